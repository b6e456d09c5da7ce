// Package e2e runs whole nodes against real clients: here, two pages of
// headless Chromium chatting through a room that hibernates between
// messages.
package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/browser"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/wasmhost"
)

// wasmRoom compiles examples/room-wasm, the chat room as a wasm guest.
func wasmRoom(t *testing.T) actors.Class {
	t.Helper()
	out := filepath.Join(t.TempDir(), "room-wasm.wasm")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-buildmode=c-shared", "-o", out, "../../examples/room-wasm")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build examples/room-wasm: %v\n%s", err, msg)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	r, err := wasmhost.NewRuntime(context.Background(), wasmhost.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	mod, err := r.Compile(t.Context(), "room-wasm", wasm)
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

// chatPage is one tab of the browser on the chat page; it keeps the page's
// console output for failure messages.
type chatPage struct {
	t    *testing.T
	name string
	ctx  context.Context // the tab's chromedp context

	mu      sync.Mutex
	console []string
}

// waitTimeout bounds each wait for the page and each script run in it.
const waitTimeout = 15 * time.Second

// eval runs js in the page, bounded by waitTimeout.
func (c *chatPage) eval(js string) (bool, error) {
	ctx, cancel := context.WithTimeout(c.ctx, waitTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise))
}

// waitFor evaluates js every 50ms until it is true; an exception (the page
// is still loading its script) counts as "not yet".
func (c *chatPage) waitFor(what, js string) {
	c.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, err := c.eval(js)
		if ok {
			return
		}
		if time.Now().After(deadline) || c.t.Context().Err() != nil {
			last := "false"
			if err != nil {
				last = err.Error()
			}
			c.t.Fatalf("%s's page, waiting for %s (%q) within %v: last %s; console: %q",
				c.name, what, js, waitTimeout, last, c.Console())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Console returns the page's console messages and uncaught exceptions so
// far, one line each such as "log: hello 42".
func (c *chatPage) Console() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.console)
}

// onEvent runs on the tab's reading goroutine and must not block.
func (c *chatPage) onEvent(ev any) {
	var line string
	switch ev := ev.(type) {
	case *cdpruntime.EventConsoleAPICalled:
		parts := make([]string, len(ev.Args))
		for i, a := range ev.Args {
			parts[i] = consoleText(a)
		}
		line = string(ev.Type) + ": " + strings.Join(parts, " ")
	case *cdpruntime.EventExceptionThrown:
		line = "exception: " + ev.ExceptionDetails.Text
		if e := ev.ExceptionDetails.Exception; e != nil {
			line += " " + e.Description
		}
	default:
		return
	}
	c.mu.Lock()
	c.console = append(c.console, line)
	c.mu.Unlock()
}

// consoleText renders a console argument in one line: strings bare, other
// values as JSON or their description.
func consoleText(o *cdpruntime.RemoteObject) string {
	var s string
	switch {
	case o.UnserializableValue != "":
		return string(o.UnserializableValue)
	case o.Type == cdpruntime.RemoteObjectTypeString && json.Unmarshal(o.Value, &s) == nil:
		return s
	case len(o.Value) > 0:
		return string(o.Value)
	case o.Description != "":
		return o.Description
	}
	return string(o.Type)
}

// openPage opens the chat page at url as name in a new tab of the
// browser bctx; stop, or chromedp.Cancel, closes it.
func openPage(t *testing.T, bctx context.Context, url, name string) *chatPage {
	t.Helper()
	tab, _ := chromedp.NewContext(bctx)
	c := &chatPage{t: t, name: name, ctx: tab}
	// Listen opens the tab, so the page's first scripts are heard too.
	if err := chromedp.Listen(tab, c.onEvent); err != nil {
		t.Fatalf("open a tab for %s: %v", name, err)
	}
	nctx, ncancel := context.WithTimeout(tab, waitTimeout)
	defer ncancel()
	if err := chromedp.Do(nctx, chromedp.Navigate(url+"?name="+name)); err != nil {
		t.Fatalf("%s's page: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s's console: %q", name, c.Console())
		}
	})
	return c
}

func (c *chatPage) say(text string) {
	c.t.Helper()
	js, _ := json.Marshal(text)
	ctx, cancel := context.WithTimeout(c.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void]("say("+string(js)+")", chromedp.EvalAwaitPromise)); err != nil {
		c.t.Fatalf("%s says %q: %v", c.name, text, err)
	}
}

func (c *chatPage) sees(text string) {
	c.t.Helper()
	js, _ := json.Marshal(text)
	c.waitFor("message "+text, "window.chat.messages.some((m) => m.text === "+string(js)+")")
}

func (c *chatPage) presence(names ...string) {
	c.t.Helper()
	js, _ := json.Marshal(strings.Join(names, ","))
	c.waitFor("presence "+strings.Join(names, ","), "window.chat.names.join(',') === "+string(js))
}

// TestChatInBrowsers: two pages chat through a room, the Go-native chat
// class and the wasm room; the room hibernates between messages while both
// stay connected, and both pages see every message and who is present,
// before and after.
func TestChatInBrowsers(t *testing.T) {
	path := browser.Require(t)
	t.Run("chat", func(t *testing.T) { chatInBrowsers(t, path, "chat", chat.Room{}) })
	t.Run("room-wasm", func(t *testing.T) { chatInBrowsers(t, path, "room-wasm", wasmRoom(t)) })
}

func chatInBrowsers(t *testing.T, chromium, class string, c actors.Class) {
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{class: c}, IdleTimeout: 300 * time.Millisecond})
	url := n.URL

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	bctx, stop, err := browser.Launch(ctx, chromium, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	open := func(name string) *chatPage { return openPage(t, bctx, url+"/actor/"+class+"/lobby", name) }
	ada := open("ada")
	ada.waitFor("joining", "window.chat.joined")
	bob := open("bob")
	bob.waitFor("joining", "window.chat.joined")
	ada.presence("ada", "bob")
	bob.presence("ada", "bob")

	ada.say("hello from ada")
	ada.sees("hello from ada")
	bob.sees("hello from ada")

	// The room sleeps; both pages stay connected to the node.
	n.AwaitIdle(t, class+"/lobby")
	if s := n.Status(); s.Parked != 1 || s.Live != 0 {
		t.Fatalf("while the room sleeps: %d parked, %d live; want 1 parked", s.Parked, s.Live)
	}
	if got := n.Sockets(); got != 2 {
		t.Fatalf("sockets open while the room sleeps: %d, want 2", got)
	}

	// A message wakes it: both see it, presence is intact.
	bob.say("bob, after the nap")
	ada.sees("bob, after the nap")
	bob.sees("bob, after the nap")
	ada.presence("ada", "bob")

	// Asleep again; a newcomer gets the whole history from storage.
	n.AwaitIdle(t, class+"/lobby")
	cy := open("cy")
	cy.waitFor("history", "window.chat.messages.length === 2")
	ada.presence("ada", "bob", "cy")

	// A page that goes away leaves the room.
	if err := chromedp.Cancel(bob.ctx); err != nil {
		t.Fatal(err)
	}
	ada.presence("ada", "cy")
	cy.presence("ada", "cy")

	// A client sends a text message that is not UTF-8: its socket fails
	// with 1007, nothing of it reaches the room, and the pages (which
	// would drop their connections on an invalid text frame) stay in it.
	eve := n.Join(t, class, "lobby", "eve")
	ada.presence("ada", "cy", "eve")
	if err := eve.Conn.WriteMessage(websocket.TextMessage, []byte("{\"type\":\"say\",\"text\":\"\xff\xfe\"}")); err != nil {
		t.Fatal(err)
	}
	eve.Conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		_, _, err := eve.Conn.ReadMessage()
		if err == nil {
			continue // what the room sent before
		}
		if !websocket.IsCloseError(err, websocket.CloseInvalidFramePayloadData) {
			t.Fatalf("the invalid sender's socket ended with %v, want close 1007", err)
		}
		break
	}
	ada.presence("ada", "cy")
	cy.say("still here")
	ada.sees("still here")
	cy.sees("still here")
	ada.waitFor("an open socket", "window.chat.joined && window.chat.messages.length === 3")
}
