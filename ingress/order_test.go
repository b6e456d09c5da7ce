package ingress_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/supervisors"
)

// joins is a class whose every socket hears each join: an upgrade
// counts itself in storage, broadcasts "joined <n>" and accepts its
// socket; a message "say <x>" is broadcast as "<x>".
type joins struct{}

func (joins) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if !req.IsUpgrade() {
		return actors.Text(400, "upgrade only\n"), nil
	}
	n := 1
	if v, ok := st.Get("n"); ok {
		n, _ = strconv.Atoi(string(v))
		n++
	}
	if err := st.Put("n", []byte(strconv.Itoa(n))); err != nil {
		return nil, err
	}
	actors.SocketsOf(ctx).Broadcast("", true, []byte("joined "+strconv.Itoa(n)))
	return actors.AcceptSocket(), nil
}

func (joins) HandleSocket(ctx context.Context, ev *actors.SocketEvent, _ actors.Storage) error {
	if ev.Kind == actors.SocketMessage {
		if x, ok := strings.CutPrefix(string(ev.Data), "say "); ok {
			actors.SocketsOf(ctx).Broadcast("", true, []byte(x))
		}
	}
	return nil
}

// TestSocketOutputComesBeforeTheAnswer: an event's socket output goes out
// before its answer, in the order the events were released, even as the
// actor's room actor sends it beside the actor's next events. So a socket
// that an event accepts (after its answer) never hears that event's own
// broadcast, nor an earlier one; and every socket hears the joins after
// its own in order.
func TestSocketOutputComesBeforeTheAnswer(t *testing.T) {
	const sockets = 150
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"joins": joins{}}})
	conns := make([]*websocket.Conn, sockets)
	for i := range conns {
		conns[i] = n.Dial(t, "joins", "room")
		// Its own join (i+1) and those before went out before its
		// answer: the first it can hear is the marker it says now.
		marker := fmt.Sprintf("marker %d", i)
		if err := conns[i].WriteMessage(websocket.TextMessage, []byte("say "+marker)); err != nil {
			t.Fatal(err)
		}
		if got := read(t, conns[i]); got != marker {
			t.Fatalf("socket %d: first frame %q, want %q (its own join or an earlier one overtook its answer)", i, got, marker)
		}
	}
	// The room's residency sends through one room actor, counted in the
	// tree's line of the rooms' actor.
	var rooms []supervisors.Line
	for _, l := range n.Node.Tree() {
		if l.Name == "rooms" {
			rooms = append(rooms, l)
		}
	}
	if len(rooms) != 1 || rooms[0].Progress != "room actors: 1" {
		t.Errorf("the tree's rooms' actor: %+v, want one line counting 1 room actor", rooms)
	}
	// Every socket heard, after its marker, the joins and markers of the
	// sockets after it, in order.
	for i, c := range conns {
		for j := i + 1; j < sockets; j++ {
			for _, want := range []string{fmt.Sprintf("joined %d", j+1), fmt.Sprintf("marker %d", j)} {
				if got := read(t, c); got != want {
					t.Fatalf("socket %d: %q, want %q", i, got, want)
				}
			}
		}
	}
}

func read(t *testing.T, c *websocket.Conn) string {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, data, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
