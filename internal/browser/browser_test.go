package browser

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// testTimeout bounds each test's browser work; a healthy run takes about a
// second per test.
const testTimeout = 60 * time.Second

// echoPage opens a WebSocket to the server's /echo, sends "hi" and shows the
// reply in #out. It also logs to the console as it loads.
const echoPage = `<!doctype html>
<title>echo</title>
<div id="out">waiting</div>
<script>
console.log("page loaded", 42, {a: 1});
const ws = new WebSocket("ws://" + location.host + "/echo");
ws.onopen = () => ws.send("hi");
ws.onmessage = (e) => {
	document.getElementById("out").textContent = "echo: " + e.data;
};
ws.onerror = () => console.error("websocket error");
</script>
`

// newServer serves echoPage at / and a WebSocket echo at /echo, on
// 127.0.0.1.
func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	upgrader := websocket.Upgrader{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(echoPage))
	})
	mux.HandleFunc("GET /echo", func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return // Upgrade has replied with the error
		}
		defer ws.Close()
		for {
			typ, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if err := ws.WriteMessage(typ, msg); err != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// launch starts a browser that the test's cleanup closes.
func launch(t *testing.T) (context.Context, *Browser) {
	t.Helper()
	path := Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	b, err := Launch(ctx, Options{Path: path, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close browser: %v", err)
		}
	})
	return ctx, b
}

func newPage(t *testing.T, ctx context.Context, b *Browser, url string) *Page {
	t.Helper()
	p, err := b.NewPage(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func evalString(t *testing.T, ctx context.Context, p *Page, js string) string {
	t.Helper()
	raw, err := p.Eval(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("eval %q = %s, want a string: %v", js, raw, err)
	}
	return s
}

func TestEchoInTwoPages(t *testing.T) {
	srv := newServer(t)
	ctx, b := launch(t)

	pages := []*Page{newPage(t, ctx, b, srv.URL), newPage(t, ctx, b, srv.URL)}
	for i, p := range pages {
		err := p.WaitFor(ctx, `document.getElementById("out").textContent === "echo: hi"`, 10*time.Second)
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		if got := evalString(t, ctx, p, `document.getElementById("out").textContent`); got != "echo: hi" {
			t.Errorf("page %d: #out = %q, want %q", i, got, "echo: hi")
		}
		if got, want := evalString(t, ctx, p, `location.href`), srv.URL+"/"; got != want {
			t.Errorf("page %d: location.href = %q, want %q", i, got, want)
		}
		// The console.log ran while the page loaded, before WaitFor's first
		// reply, and events arrive in order with replies.
		if want := `log: page loaded 42 Object`; !slices.Contains(p.Console(), want) {
			t.Errorf("page %d: console = %q, want it to contain %q", i, p.Console(), want)
		}
	}
}

func TestEval(t *testing.T) {
	ctx, b := launch(t)
	p := newPage(t, ctx, b, "about:blank")

	for _, tc := range []struct{ js, want string }{
		{`1 + 2`, `3`},
		{`"a" + "b"`, `"ab"`},
		{`({n: 1, s: ["x"]})`, `{"n":1,"s":["x"]}`},
		{`Promise.resolve(7)`, `7`},
		{`new Promise(r => setTimeout(() => r("later"), 10))`, `"later"`},
		{`undefined`, `null`},
		{`0/0`, `"NaN"`},
	} {
		raw, err := p.Eval(ctx, tc.js)
		if err != nil {
			t.Errorf("eval %q: %v", tc.js, err)
			continue
		}
		if string(raw) != tc.want {
			t.Errorf("eval %q = %s, want %s", tc.js, raw, tc.want)
		}
	}

	for _, js := range []string{`throw new Error("boom")`, `Promise.reject(new Error("boom"))`, `boom.x`} {
		_, err := p.Eval(ctx, js)
		var evalErr *EvalError
		if !errors.As(err, &evalErr) {
			t.Errorf("eval %q: err = %v, want an *EvalError", js, err)
			continue
		}
		if !strings.Contains(evalErr.Text, "boom") {
			t.Errorf("eval %q: error %q does not say boom", js, evalErr.Text)
		}
	}
}

func TestConsole(t *testing.T) {
	ctx, b := launch(t)
	p := newPage(t, ctx, b, "about:blank")

	if _, err := p.Eval(ctx, `console.log("hello", 1, true); console.warn("careful")`); err != nil {
		t.Fatal(err)
	}
	// An uncaught exception in a timer; the promise settles after it.
	_, err := p.Eval(ctx, `new Promise(r => {
		setTimeout(() => { throw new Error("late boom") }, 0);
		setTimeout(r, 20);
	})`)
	if err != nil {
		t.Fatal(err)
	}
	got := p.Console()
	want := []string{"log: hello 1 true", "warning: careful", "exception: Uncaught Error: late boom"}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(line string) bool { return strings.HasPrefix(line, w) }) {
			t.Errorf("console = %q, want a line starting %q", got, w)
		}
	}
}

func TestWaitForTimeout(t *testing.T) {
	ctx, b := launch(t)
	p := newPage(t, ctx, b, "about:blank")
	if _, err := p.Eval(ctx, `console.log("still here"); window.n = 5`); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	err := p.WaitFor(ctx, `window.n > 10 || window.n`, 300*time.Millisecond)
	var waitErr *WaitError
	if !errors.As(err, &waitErr) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *WaitError for a deadline", err)
	}
	if waitErr.Last != "5" {
		t.Errorf("last value = %q, want 5", waitErr.Last)
	}
	if !strings.Contains(err.Error(), "log: still here") {
		t.Errorf("error %q does not show the console", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("WaitFor with a 300ms timeout took %v", d)
	}

	err = p.WaitFor(ctx, `document.getElementById("never").id === "x"`, 200*time.Millisecond)
	if !errors.As(err, &waitErr) || !strings.Contains(waitErr.Last, "TypeError") {
		t.Errorf("err = %v, want a *WaitError whose last value is the TypeError", err)
	}
}

func TestNavigateRefused(t *testing.T) {
	// A port nothing listens on: take one from a listener and close it.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()

	ctx, b := launch(t)
	p, err := b.NewPage(ctx, url)
	if err == nil {
		p.Close()
		t.Fatalf("NewPage(%s) succeeded with nothing listening", url)
	}
	if !strings.Contains(err.Error(), "ERR_CONNECTION_REFUSED") {
		t.Errorf("err = %v, want it to say ERR_CONNECTION_REFUSED", err)
	}
}

// fakeTB records what Require does instead of ending the test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Skipf(format string, args ...any)  { f.skipped = format }
func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = format }

func TestRequireWithoutChromium(t *testing.T) {
	t.Setenv("PATH", t.TempDir())

	t.Setenv(NoBrowserEnv, "")
	f := &fakeTB{TB: t}
	Require(f)
	if !strings.Contains(f.failed, "scripts/chromium.sh") || f.skipped != "" {
		t.Errorf("without %s: failed %q, skipped %q; want a failure naming scripts/chromium.sh", NoBrowserEnv, f.failed, f.skipped)
	}

	t.Setenv(NoBrowserEnv, "1")
	f = &fakeTB{TB: t}
	Require(f)
	if f.skipped == "" {
		t.Errorf("with %s=1: not skipped (failed %q)", NoBrowserEnv, f.failed)
	}
}
