// Package e2e runs whole nodes against real clients: here, two pages of
// headless Chromium chatting through a room that hibernates between
// messages.
package e2e

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/internal/browser"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// startNode starts a node serving the chat class with a short idle
// timeout; hibernations reports "<class>/<name> <reason>" each time an
// actor leaves memory.
func startNode(t *testing.T, hibernations chan<- string) (*ingress.Node, string) {
	t.Helper()
	b, err := dirstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := actors.BuiltIn()
	if err := reg.Register("chat", chat.Room{}); err != nil {
		t.Fatal(err)
	}
	n, err := ingress.StartNode(t.Context(), ingress.NodeConfig{
		Core:   ownership.DefaultConfig("n1", "i1"),
		Bucket: b, Listener: lis, Registry: reg,
		IdleTimeout: 300 * time.Millisecond,
		OnHibernate: func(a ownership.Actor, _ ownership.Generation, reason string) {
			select {
			case hibernations <- a.String() + " " + reason:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return n, "http://" + lis.Addr().String()
}

type chatPage struct {
	t    *testing.T
	name string
	p    *browser.Page
}

func (c *chatPage) waitFor(what, js string) {
	c.t.Helper()
	if err := c.p.WaitFor(c.t.Context(), js, 15*time.Second); err != nil {
		c.t.Fatalf("%s's page, waiting for %s: %v", c.name, what, err)
	}
}

func (c *chatPage) say(text string) {
	c.t.Helper()
	js, _ := json.Marshal(text)
	if _, err := c.p.Eval(c.t.Context(), "say("+string(js)+")"); err != nil {
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

func awaitIdle(t *testing.T, ch <-chan string, actor string) {
	t.Helper()
	// Hibernations before now (the room slept between earlier events)
	// are not the one waited for.
	for len(ch) > 0 {
		<-ch
	}
	deadline := time.After(15 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == actor+" idle" {
				return
			}
		case <-deadline:
			t.Fatalf("%s did not hibernate within 15 s", actor)
		}
	}
}

// TestChatInBrowsers: two pages chat through a room; the room hibernates
// between messages while both stay connected, and both pages see every
// message and who is present, before and after.
func TestChatInBrowsers(t *testing.T) {
	browser.Require(t)
	hib := make(chan string, 64)
	n, url := startNode(t, hib)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b, err := browser.Launch(ctx, browser.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	open := func(name string) *chatPage {
		p, err := b.NewPage(ctx, url+"/actor/chat/lobby?name="+name)
		if err != nil {
			t.Fatal(err)
		}
		c := &chatPage{t: t, name: name, p: p}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s's console: %q", name, p.Console())
			}
		})
		return c
	}
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
	awaitIdle(t, hib, "chat/lobby")
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
	awaitIdle(t, hib, "chat/lobby")
	cy := open("cy")
	cy.waitFor("history", "window.chat.messages.length === 2")
	ada.presence("ada", "bob", "cy")

	// A page that goes away leaves the room.
	if err := bob.p.Close(); err != nil {
		t.Fatal(err)
	}
	ada.presence("ada", "cy")
	cy.presence("ada", "cy")
}
