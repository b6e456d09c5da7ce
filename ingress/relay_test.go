package ingress_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
)

// closeCodeOf reads c until it ends and returns its close code (-1: it
// ended without a close frame).
func closeCodeOf(t *testing.T, c *websocket.Conn) int {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(nodetest.Wait))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			t.Logf("ended without a close frame: %v", err)
			return -1
		}
	}
}

// TestRelayedSocketClosedWith1012 : a WebSocket relayed through a node to
// the node that holds its room carries the room's frames both ways, and
// when the relaying node stops, its client is closed with 1012 (service
// restart), as the node's own sockets are, and the room hears the socket
// close.
func TestRelayedSocketClosedWith1012(t *testing.T) {
	dir := t.TempDir()
	room := map[string]actors.Class{"chat": chat.Room{}}
	a := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "a", Instance: "ai", Classes: room})
	b := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "b", Instance: "bi", Classes: room})
	ann := a.Join(t, "chat", "lobby", "ann") // the room is held by a
	ann.AwaitHistory()
	bob := b.Join(t, "chat", "lobby", "bob") // relayed by b to a
	bob.AwaitHistory()
	ann.AwaitPresence("ann", "bob")
	// Frames of each length encoding, relayed whole (the room keeps the
	// first 2,000 bytes of a message).
	for _, n := range []int{20, 200, 20000} {
		bob.Say(strings.Repeat("long ", n))
		ann.Await("bob's long message", func(f nodetest.Frame) bool {
			return f.Type == "said" && f.Message != nil && f.Message.From == "bob" && len(f.Message.Text) >= min(5*n-1, chat.MaxText-4)
		})
	}
	ann.Say("hi")
	bob.AwaitSaid("ann", "hi")
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := closeCodeOf(t, bob.Conn); code != 1012 {
		t.Fatalf("the relayed socket closed with %d, want 1012", code)
	}
	ann.AwaitPresence("ann")
}
