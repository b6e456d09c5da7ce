package ingress_test

import (
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// chatNode is a node serving the chat class with a short idle timeout; it
// reports on hibernations every time the room leaves memory.
func chatNode(t *testing.T, dir string, hibernations chan<- string) *testNode {
	t.Helper()
	b, err := dirstore.Open(dir)
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
		IdleTimeout: 150 * time.Millisecond,
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
	tn := &testNode{Node: n, url: "http://" + lis.Addr().String()}
	t.Cleanup(func() { tn.stop(t) })
	return tn
}

type chatClient struct {
	t    *testing.T
	name string
	conn *websocket.Conn
}

func joinChat(t *testing.T, n *testNode, room, name string) *chatClient {
	t.Helper()
	url := "ws" + strings.TrimPrefix(n.url, "http") + "/actor/chat/" + room
	conn, resp, err := websocket.DefaultDialer.DialContext(t.Context(), url, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", url, err, status)
	}
	t.Cleanup(func() { conn.Close() })
	c := &chatClient{t: t, name: name, conn: conn}
	c.send(map[string]string{"type": "join", "name": name})
	return c
}

func (c *chatClient) send(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if err := c.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("%s send: %v", c.name, err)
	}
}

type chatFrame struct {
	Type     string         `json:"type"`
	Messages []chat.Message `json:"messages"`
	Message  *chat.Message  `json:"message"`
	Names    []string       `json:"names"`
}

// await reads frames until one satisfies ok, within 10 s.
func (c *chatClient) await(what string, ok func(chatFrame) bool) chatFrame {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, b, err := c.conn.ReadMessage()
		if err != nil {
			c.t.Fatalf("%s waiting for %s: %v", c.name, what, err)
		}
		var f chatFrame
		if err := json.Unmarshal(b, &f); err != nil {
			c.t.Fatalf("%s: bad frame %q: %v", c.name, b, err)
		}
		if ok(f) {
			return f
		}
	}
}

func (c *chatClient) awaitPresence(names ...string) {
	c.t.Helper()
	c.await("presence "+strings.Join(names, ","), func(f chatFrame) bool {
		return f.Type == "presence" && slices.Equal(f.Names, names)
	})
}

func (c *chatClient) awaitSaid(from, text string) {
	c.t.Helper()
	c.await(from+" saying "+text, func(f chatFrame) bool {
		return f.Type == "said" && f.Message != nil && f.Message.From == from && f.Message.Text == text
	})
}

func awaitHibernation(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	// Hibernations before now (the room slept between earlier events)
	// are not the one waited for.
	for len(ch) > 0 {
		<-ch
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("no hibernation %q within 10 s", want)
		}
	}
}

// TestChatRoomHibernatesWithItsSockets: two people chat through a room;
// the room hibernates between messages while both stay connected, and a
// message wakes it with its history and presence intact.
func TestChatRoomHibernatesWithItsSockets(t *testing.T) {
	hib := make(chan string, 64)
	n := chatNode(t, t.TempDir(), hib)
	room := ownership.Actor{Class: "chat", Name: "lobby"}

	// The page is served to a plain GET.
	if status, body := n.get(t, "/actor/chat/lobby", nil); status != http.StatusOK || !strings.Contains(body, "<title>wasmkeep chat</title>") {
		t.Fatalf("page: %d %.80q", status, body)
	}
	ada := joinChat(t, n, "lobby", "ada")
	ada.await("history", func(f chatFrame) bool { return f.Type == "history" })
	ada.awaitPresence("ada")
	bob := joinChat(t, n, "lobby", "bob")
	bob.await("history", func(f chatFrame) bool { return f.Type == "history" })
	ada.awaitPresence("ada", "bob")
	bob.awaitPresence("ada", "bob")

	ada.send(map[string]string{"type": "say", "text": "hello"})
	ada.awaitSaid("ada", "hello")
	bob.awaitSaid("ada", "hello")

	// Idle: the room leaves memory; its record stays parked here, since its
	// sockets are open.
	awaitHibernation(t, hib, room.String()+" idle")
	if s := n.Status(); s.Parked != 1 {
		t.Fatalf("after hibernation: %d parked records, want 1", s.Parked)
	}

	// A message wakes it, with its storage and the sockets' attachments.
	bob.send(map[string]string{"type": "say", "text": "still here"})
	ada.awaitSaid("bob", "still here")
	bob.awaitSaid("bob", "still here")

	awaitHibernation(t, hib, room.String()+" idle")
	carol := joinChat(t, n, "lobby", "carol")
	h := carol.await("history", func(f chatFrame) bool { return f.Type == "history" })
	if len(h.Messages) != 2 || h.Messages[0].Text != "hello" || h.Messages[1].Text != "still here" {
		t.Fatalf("history after two hibernations: %+v", h.Messages)
	}
	ada.awaitPresence("ada", "bob", "carol")

	// The plain protocol: echo, and "all:" to everyone.
	if err := carol.conn.WriteMessage(websocket.TextMessage, []byte("ping 1")); err != nil {
		t.Fatal(err)
	}
	carol.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, b, err := carol.conn.ReadMessage()
		if err != nil {
			t.Fatalf("carol awaiting her echo: %v", err)
		}
		if string(b) == "ping 1" {
			break
		}
	}
	if err := carol.conn.WriteMessage(websocket.TextMessage, []byte("all: hi")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*chatClient{ada, bob, carol} {
		c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, b, err := c.conn.ReadMessage()
			if err != nil {
				t.Fatalf("%s awaiting the broadcast: %v", c.name, err)
			}
			if string(b) == "all: hi" {
				break
			}
		}
	}

	// The wakes and the sockets are on /metrics.
	_, metrics := n.get(t, "/metrics", nil)
	for _, want := range []string{"wasmkeep_websockets_open 3", "wasmkeep_websocket_accepted_total 3", `wasmkeep_websocket_events_total{kind="message"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^wasmkeep_websocket_wakes_total [1-9]`).MatchString(metrics) {
		t.Errorf("/metrics counts no wake by a socket event")
	}

	// A client leaving is seen by the others.
	carol.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	ada.awaitPresence("ada", "bob")
	bob.awaitPresence("ada", "bob")

	// Everyone leaves: the last socket releases the parked record.
	ada.conn.Close()
	bob.conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := n.Status()
		if s.Parked == 0 && s.Live == 0 && s.Pending == 0 && n.Sockets() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after everyone left: %+v with %d sockets, want nothing parked, live, pending or open", s, n.Sockets())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
