package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Page is one browser tab, driven over a flattened DevTools session of the
// browser's connection. Its methods may be called from any goroutine.
type Page struct {
	b         *Browser
	targetID  string
	sessionID string

	mu      sync.Mutex
	console []string

	closeOnce sync.Once
	closeErr  error
}

// NewPage opens a tab, starts collecting its console output, navigates it to
// url, and waits until the document has loaded (document.readyState is
// "complete") or ctx ends. A navigation the browser refuses (connection
// refused, bad address) is an error.
func (b *Browser) NewPage(ctx context.Context, url string) (*Page, error) {
	var created struct {
		TargetID string `json:"targetId"`
	}
	err := b.conn.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &created)
	if err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	err = b.conn.call(ctx, "", "Target.attachToTarget",
		map[string]any{"targetId": created.TargetID, "flatten": true}, &attached)
	if err != nil {
		b.closeTarget(created.TargetID)
		return nil, err
	}
	p := &Page{b: b, targetID: created.TargetID, sessionID: attached.SessionID}
	b.conn.subscribe(p.sessionID, p.onEvent)

	// Runtime.enable before navigating, so output of the page's first
	// scripts is collected too.
	if err := p.call(ctx, "Runtime.enable", nil, nil); err != nil {
		p.Close()
		return nil, err
	}
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.call(ctx, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		p.Close()
		return nil, err
	}
	if nav.ErrorText != "" {
		p.Close()
		return nil, fmt.Errorf("browser: navigate to %s: %s", url, nav.ErrorText)
	}
	if err := p.waitLoaded(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("browser: load %s: %w", url, err)
	}
	return p, nil
}

// waitLoaded polls document.readyState until ctx ends; there is no separate
// timeout, since how long a page may take to load is the caller's to say.
func (p *Page) waitLoaded(ctx context.Context) error {
	return p.poll(ctx, `document.readyState === "complete"`, "ctx")
}

func (p *Page) call(ctx context.Context, method string, params, result any) error {
	return p.b.conn.call(ctx, p.sessionID, method, params, result)
}

// EvalError is a JavaScript exception thrown by an expression given to Eval.
type EvalError struct {
	Expr string // the expression evaluated
	Text string // the exception as the browser describes it, with stack when known
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("browser: eval %q: %s", shorten(e.Expr), e.Text)
}

// remoteObject is the part of a DevTools Runtime.RemoteObject we use.
type remoteObject struct {
	Type                string          `json:"type"`
	Subtype             string          `json:"subtype,omitempty"`
	Value               json.RawMessage `json:"value,omitempty"`
	UnserializableValue string          `json:"unserializableValue,omitempty"`
	Description         string          `json:"description,omitempty"`
}

// exceptionDetails is the part of a DevTools Runtime.ExceptionDetails we use.
type exceptionDetails struct {
	Text      string        `json:"text"`
	Exception *remoteObject `json:"exception,omitempty"`
}

func (d *exceptionDetails) String() string {
	// Text is a prefix such as "Uncaught" or "Uncaught (in promise)"; the
	// description has the message and stack.
	if d.Exception != nil && d.Exception.Description != "" {
		return d.Text + " " + d.Exception.Description
	}
	return d.Text
}

// Eval evaluates the JavaScript expression js in the page's main frame,
// waits for it if it is a promise, and returns its value as JSON. undefined
// becomes null; values JSON cannot hold (NaN, Infinity, -0, BigInt) come back
// as JSON strings such as "NaN". A thrown exception or rejected promise is an
// *EvalError.
func (p *Page) Eval(ctx context.Context, js string) (json.RawMessage, error) {
	var reply struct {
		Result           remoteObject      `json:"result"`
		ExceptionDetails *exceptionDetails `json:"exceptionDetails"`
	}
	err := p.call(ctx, "Runtime.evaluate", map[string]any{
		"expression":    js,
		"returnByValue": true,
		"awaitPromise":  true,
	}, &reply)
	if err != nil {
		return nil, err
	}
	if reply.ExceptionDetails != nil {
		return nil, &EvalError{Expr: js, Text: reply.ExceptionDetails.String()}
	}
	r := reply.Result
	switch {
	case r.UnserializableValue != "":
		return json.Marshal(r.UnserializableValue)
	case len(r.Value) == 0:
		return json.RawMessage("null"), nil
	}
	return r.Value, nil
}

// PollInterval is how often WaitFor evaluates its expression.
const PollInterval = 50 * time.Millisecond

// WaitFor evaluates the JavaScript expression js every PollInterval until it
// returns true, and fails when timeout passes or ctx ends first. Exceptions
// (say, an element that does not exist yet) count as "not yet". The error
// says the last value or exception and the page's console output.
func (p *Page) WaitFor(ctx context.Context, js string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return p.poll(ctx, js, timeout.String())
}

// poll is WaitFor without its own timeout; bound names the bound in errors.
func (p *Page) poll(ctx context.Context, js, bound string) error {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	last := "nothing: never evaluated"
	for {
		v, err := p.Eval(ctx, js)
		var evalErr *EvalError
		var protoErr *ProtocolError
		switch {
		case err == nil && string(v) == "true":
			return nil
		case err == nil:
			last = string(v)
		case errors.As(err, &evalErr):
			last = "exception " + evalErr.Text
		case errors.As(err, &protoErr):
			// The page is between documents ("execution context was
			// destroyed"); try again.
			last = "protocol error " + protoErr.Error()
		case ctx.Err() != nil:
			// Eval gave up on its reply because ctx ended: report as a
			// timeout below.
		default:
			return fmt.Errorf("browser: wait for %q: %w", shorten(js), err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return &WaitError{Expr: js, Bound: bound, Last: last, Console: p.Console(), Err: ctx.Err()}
		}
	}
}

// WaitError is WaitFor's error when its expression did not become true in
// time. It unwraps to context.DeadlineExceeded or context.Canceled.
type WaitError struct {
	Expr    string   // the expression waited for
	Bound   string   // the timeout, or "ctx" when only the context bounded the wait
	Last    string   // the last value, exception or error seen
	Console []string // the page's console output at the time
	Err     error    // the context's error
}

func (e *WaitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "browser: wait for %q (within %s): %v; last value: %s", shorten(e.Expr), e.Bound, e.Err, e.Last)
	if len(e.Console) == 0 {
		b.WriteString("; console: empty")
	} else {
		b.WriteString("; console:")
		for _, line := range e.Console {
			b.WriteString("\n\t" + line)
		}
	}
	return b.String()
}

func (e *WaitError) Unwrap() error { return e.Err }

// Console returns the page's console messages and uncaught exceptions so
// far, oldest first, one line each such as "log: hello 42" or
// "exception: Uncaught Error: boom".
func (p *Page) Console() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.console...)
}

// onEvent runs on the connection's read goroutine; it must not block.
func (p *Page) onEvent(method string, params json.RawMessage) {
	var line string
	switch method {
	case "Runtime.consoleAPICalled":
		var ev struct {
			Type string         `json:"type"`
			Args []remoteObject `json:"args"`
		}
		if json.Unmarshal(params, &ev) != nil {
			return
		}
		parts := make([]string, len(ev.Args))
		for i, a := range ev.Args {
			parts[i] = a.text()
		}
		line = ev.Type + ": " + strings.Join(parts, " ")
	case "Runtime.exceptionThrown":
		var ev struct {
			Details exceptionDetails `json:"exceptionDetails"`
		}
		if json.Unmarshal(params, &ev) != nil {
			return
		}
		line = "exception: " + ev.Details.String()
	default:
		return
	}
	p.mu.Lock()
	p.console = append(p.console, line)
	p.mu.Unlock()
}

// text renders a console argument the way the DevTools console shows it
// in one line: strings bare, other values as JSON or their description.
func (o *remoteObject) text() string {
	switch {
	case o.UnserializableValue != "":
		return o.UnserializableValue
	case o.Type == "string":
		var s string
		if json.Unmarshal(o.Value, &s) == nil {
			return s
		}
	case len(o.Value) > 0:
		return string(o.Value)
	case o.Description != "":
		return o.Description
	}
	return o.Type
}

// pageCloseTimeout bounds Page.Close, which takes no context.
const pageCloseTimeout = 5 * time.Second

// Close closes the tab. Its console output stays readable. Close may be
// called more than once.
func (p *Page) Close() error {
	p.closeOnce.Do(func() {
		p.b.conn.unsubscribe(p.sessionID)
		p.closeErr = p.b.closeTarget(p.targetID)
	})
	return p.closeErr
}

func (b *Browser) closeTarget(targetID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), pageCloseTimeout)
	defer cancel()
	return b.conn.call(ctx, "", "Target.closeTarget", map[string]any{"targetId": targetID}, nil)
}

// shorten keeps error messages readable when the expression is a script.
func shorten(js string) string {
	const max = 80
	if len(js) <= max {
		return js
	}
	return js[:max] + "…"
}
