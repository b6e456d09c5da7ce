package ingress_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
)

func TestChatRoomHibernatesWithItsSockets(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"chat": chat.Room{}}, IdleTimeout: 150 * time.Millisecond})
	tn := &testNode{Node: n.Node, url: n.URL}

	// The page is served to a plain GET.
	if status, body := tn.get(t, "/actor/chat/lobby", nil); status != http.StatusOK || !strings.Contains(body, "<title>wasmkeep chat</title>") {
		t.Fatalf("page: %d %.80q", status, body)
	}
	ada := n.Join(t, "chat", "lobby", "ada")
	ada.AwaitHistory()
	ada.AwaitPresence("ada")
	bob := n.Join(t, "chat", "lobby", "bob")
	bob.AwaitHistory()
	ada.AwaitPresence("ada", "bob")
	bob.AwaitPresence("ada", "bob")

	ada.Say("hello")
	ada.AwaitSaid("ada", "hello")
	bob.AwaitSaid("ada", "hello")

	// Idle: the room leaves memory; its record stays parked here, since its
	// sockets are open.
	n.AwaitIdle(t, "chat/lobby")
	if s := n.Status(); s.Parked != 1 {
		t.Fatalf("after hibernation: %d parked records, want 1", s.Parked)
	}

	// A message wakes it, with its storage and the sockets' attachments.
	bob.Say("still here")
	ada.AwaitSaid("bob", "still here")
	bob.AwaitSaid("bob", "still here")

	n.AwaitIdle(t, "chat/lobby")
	carol := n.Join(t, "chat", "lobby", "carol")
	h := carol.AwaitHistory()
	if len(h) != 2 || h[0].Text != "hello" || h[1].Text != "still here" {
		t.Fatalf("history after two hibernations: %+v", h)
	}
	ada.AwaitPresence("ada", "bob", "carol")

	// The plain protocol: echo, and "all:" to everyone.
	if err := carol.Conn.WriteMessage(websocket.TextMessage, []byte("ping 1")); err != nil {
		t.Fatal(err)
	}
	carol.AwaitRaw("ping 1")
	if err := carol.Conn.WriteMessage(websocket.TextMessage, []byte("all: hi")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*nodetest.ChatClient{ada, bob, carol} {
		c.AwaitRaw("all: hi")
	}

	// The wakes and the sockets are on /metrics.
	_, metrics := tn.get(t, "/metrics", nil)
	for _, want := range []string{"wasmkeep_websockets_open 3", "wasmkeep_websocket_accepted_total 3", `wasmkeep_websocket_events_total{kind="message"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^wasmkeep_websocket_wakes_total [1-9]`).MatchString(metrics) {
		t.Errorf("/metrics counts no wake by a socket event")
	}

	// A client leaving is seen by the others.
	carol.Conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	ada.AwaitPresence("ada", "bob")
	bob.AwaitPresence("ada", "bob")

	// Everyone leaves: the last socket releases the parked record. The
	// release ends with the keeper's own write to the bucket, of which the
	// node tells nothing: its status is watched until the write has landed.
	ada.Conn.Close()
	bob.Conn.Close()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := n.Status()
		assert.Zero(c, n.Sockets(), "sockets open")
		assert.Zero(c, s.Parked, "records parked: %+v", s)
		assert.Zero(c, s.Live, "holds live: %+v", s)
		assert.Zero(c, s.Pending, "releases pending: %+v", s)
	}, 10*time.Second, 20*time.Millisecond, "after everyone left: want nothing parked, live, pending or open")
}
