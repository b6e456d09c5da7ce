// Package testlog keeps the log lines of a test's slog.Logger, for the
// test to look for.
package testlog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Log is a slog.Handler that keeps every record as one line: level,
// message, then key=value for each attribute, those of the logger's With
// first.
type Log struct {
	mu    sync.Mutex
	lines []string
}

func (l *Log) Enabled(context.Context, slog.Level) bool        { return true }
func (l *Log) Handle(ctx context.Context, r slog.Record) error { return l.handle(nil, r) }
func (l *Log) WithAttrs(attrs []slog.Attr) slog.Handler        { return &view{root: l, attrs: attrs} }
func (l *Log) WithGroup(string) slog.Handler                   { return l }

func (l *Log) handle(with []slog.Attr, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range with {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}

// view is the Log of a logger's With: its attributes, the same lines.
type view struct {
	root  *Log
	attrs []slog.Attr
}

func (v *view) Enabled(context.Context, slog.Level) bool      { return true }
func (v *view) Handle(_ context.Context, r slog.Record) error { return v.root.handle(v.attrs, r) }
func (v *view) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &view{root: v.root, attrs: append(append([]slog.Attr(nil), v.attrs...), attrs...)}
}
func (v *view) WithGroup(string) slog.Handler { return v }

// Matching returns the lines that contain every fragment.
func (l *Log) Matching(fragments ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(line, f)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// Count counts the lines that contain every fragment.
func (l *Log) Count(fragments ...string) int { return len(l.Matching(fragments...)) }

// Has says whether a line contains every fragment.
func (l *Log) Has(fragments ...string) bool { return l.Count(fragments...) > 0 }

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
