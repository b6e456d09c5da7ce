// Package damagetest damages a directory bucket for tests, and keeps the
// log lines a test then looks for.
package damagetest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Segment is the path of the segment the directory store in dir writes
// to now (the one its file "current" names).
func Segment(t testing.TB, dir string) string {
	t.Helper()
	cur, err := os.ReadFile(filepath.Join(dir, "current"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, strings.TrimSpace(string(cur)))
}

// FlipAfterKey flips, in place, the byte after the last copy of key in the
// segment of the directory store in dir: the first byte of the body of the
// key's last record.
func FlipAfterKey(t testing.TB, dir, key string) {
	t.Helper()
	p := Segment(t, dir)
	seg, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(seg, []byte(key))
	if at < 0 {
		t.Fatalf("%s holds no record of %s", p, key)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{seg[at+len(key)] ^ 0x01}, int64(at+len(key))); err != nil {
		t.Fatal(err)
	}
}

// Log is a slog.Handler that keeps every record as one line: level,
// message, then key=value for each attribute.
type Log struct {
	mu    sync.Mutex
	lines []string
}

func (l *Log) Enabled(context.Context, slog.Level) bool { return true }
func (l *Log) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *Log) WithGroup(string) slog.Handler            { return l }

func (l *Log) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}

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

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
