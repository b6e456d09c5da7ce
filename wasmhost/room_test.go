package wasmhost

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// The wasm chat room (examples/room-wasm) on a real node, with real
// WebSocket clients over 127.0.0.1.

const roomGuest = "../examples/room-wasm"

// roomNode is a node serving the wasm room as class "room-wasm", with a
// short idle timeout; it reports every hibernation on hibernations.
type roomNode struct {
	*ingress.Node
	url string
}

func startRoomNode(t *testing.T, hibernations chan<- string) *roomNode {
	t.Helper()
	r := newRuntime(t, Config{})
	mod, err := r.Compile(t.Context(), "room-wasm", guest(t, roomGuest))
	if err != nil {
		t.Fatal(err)
	}
	reg := actors.BuiltIn()
	if err := reg.Register("room-wasm", mod); err != nil {
		t.Fatal(err)
	}
	b, err := dirstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
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
	// Cleanups run last first: the node stops before the runtime closes.
	t.Cleanup(func() {
		select {
		case <-n.Done():
		default:
			if err := n.Stop(context.Background()); err != nil {
				t.Errorf("stop: %v", err)
			}
		}
	})
	return &roomNode{Node: n, url: "http://" + lis.Addr().String()}
}

func (n *roomNode) dial(t *testing.T, room string) *websocket.Conn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(n.url, "http") + "/actor/room-wasm/" + room
	conn, resp, err := websocket.DefaultDialer.DialContext(t.Context(), url, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", url, err, status)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// message is one line of a room's history.
type message struct {
	From string `json:"from"`
	Text string `json:"text"`
	At   int64  `json:"at"`
}

type roomFrame struct {
	Type     string    `json:"type"`
	Messages []message `json:"messages"`
	Message  *message  `json:"message"`
	Names    []string  `json:"names"`
}

type roomClient struct {
	t    *testing.T
	name string
	conn *websocket.Conn
}

func joinRoom(t *testing.T, n *roomNode, room, name string) *roomClient {
	t.Helper()
	c := &roomClient{t: t, name: name, conn: n.dial(t, room)}
	c.send(map[string]string{"type": "join", "name": name})
	return c
}

func (c *roomClient) send(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if err := c.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("%s send: %v", c.name, err)
	}
}

// await reads frames until one satisfies ok, within 10 s.
func (c *roomClient) await(what string, ok func(roomFrame) bool) roomFrame {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, b, err := c.conn.ReadMessage()
		if err != nil {
			c.t.Fatalf("%s waiting for %s: %v", c.name, what, err)
		}
		var f roomFrame
		if err := json.Unmarshal(b, &f); err != nil {
			c.t.Fatalf("%s: bad frame %q: %v", c.name, b, err)
		}
		if ok(f) {
			return f
		}
	}
}

func (c *roomClient) awaitPresence(names ...string) {
	c.t.Helper()
	c.await("presence "+strings.Join(names, ","), func(f roomFrame) bool {
		return f.Type == "presence" && slices.Equal(f.Names, names)
	})
}

func (c *roomClient) awaitSaid(from, text string) {
	c.t.Helper()
	c.await(from+" saying "+text, func(f roomFrame) bool {
		return f.Type == "said" && f.Message != nil && f.Message.From == from && f.Message.Text == text
	})
}

func (c *roomClient) awaitHistory() []message {
	c.t.Helper()
	return c.await("history", func(f roomFrame) bool { return f.Type == "history" }).Messages
}

func awaitRoomHibernation(t *testing.T, ch <-chan string, want string) {
	t.Helper()
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

// TestRoomHibernatesWithItsSockets: two people chat through the wasm room;
// it hibernates (its wasm instance closed) while both stay connected, and a
// message wakes it on a fresh instance with its history and presence
// intact.
func TestRoomHibernatesWithItsSockets(t *testing.T) {
	hib := make(chan string, 64)
	n := startRoomNode(t, hib)
	room := ownership.Actor{Class: "room-wasm", Name: "lobby"}

	resp, err := http.Get(n.url + "/actor/room-wasm/lobby")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	ada := joinRoom(t, n, "lobby", "ada")
	if h := ada.awaitHistory(); len(h) != 0 {
		t.Fatalf("history of a new room: %+v", h)
	}
	ada.awaitPresence("ada")
	bob := joinRoom(t, n, "lobby", "bob")
	bob.awaitHistory()
	ada.awaitPresence("ada", "bob")
	bob.awaitPresence("ada", "bob")

	ada.send(map[string]string{"type": "say", "text": "hello \"world\" ☃"})
	ada.awaitSaid("ada", "hello \"world\" ☃")
	bob.awaitSaid("ada", "hello \"world\" ☃")

	awaitRoomHibernation(t, hib, room.String()+" idle")
	if s := n.Status(); s.Parked != 1 {
		t.Fatalf("after hibernation: %d parked records, want 1", s.Parked)
	}

	// A message wakes it, with its storage and the sockets' attachments.
	bob.send(map[string]string{"type": "say", "text": "still here"})
	ada.awaitSaid("bob", "still here")
	bob.awaitSaid("bob", "still here")

	awaitRoomHibernation(t, hib, room.String()+" idle")
	carol := joinRoom(t, n, "lobby", "carol")
	h := carol.awaitHistory()
	if len(h) != 2 || h[0].From != "ada" || h[0].Text != "hello \"world\" ☃" || h[1].Text != "still here" || h[1].At == 0 {
		t.Fatalf("history after two hibernations: %+v", h)
	}
	ada.awaitPresence("ada", "bob", "carol")

	// A client leaving is seen by the others.
	carol.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	ada.awaitPresence("ada", "bob")
	bob.awaitPresence("ada", "bob")

	// Saying before joining closes the socket with 1008.
	eve := &roomClient{t: t, name: "eve", conn: n.dial(t, "lobby")}
	eve.send(map[string]string{"type": "say", "text": "sneaky"})
	eve.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := eve.conn.ReadMessage()
		if err == nil {
			continue // a presence frame may come first
		}
		if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
			t.Fatalf("say before join: %v, want close 1008", err)
		}
		break
	}
}

// TestRoomEcho: the peer benchmark's protocol. A text message not starting
// with "{" is echoed to its socket, and so is a binary message; a text
// message starting with "all:" goes to every socket of the room.
func TestRoomEcho(t *testing.T) {
	n := startRoomNode(t, make(chan string, 64))
	a, b := n.dial(t, "bench"), n.dial(t, "bench")
	other := n.dial(t, "elsewhere")
	read := func(c *websocket.Conn, who string) string {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		typ, msg, err := c.ReadMessage()
		if err != nil || typ != websocket.TextMessage {
			t.Fatalf("%s read: %v (type %d)", who, err, typ)
		}
		return string(msg)
	}
	for i := range 3 {
		want := "ping " + string(rune('0'+i))
		if err := a.WriteMessage(websocket.TextMessage, []byte(want)); err != nil {
			t.Fatal(err)
		}
		if got := read(a, "a"); got != want {
			t.Fatalf("echo: %q, want %q", got, want)
		}
	}
	if err := a.WriteMessage(websocket.BinaryMessage, []byte("all:\x00")); err != nil {
		t.Fatal(err)
	}
	a.SetReadDeadline(time.Now().Add(10 * time.Second))
	if typ, msg, err := a.ReadMessage(); err != nil || typ != websocket.BinaryMessage || string(msg) != "all:\x00" {
		t.Fatalf("binary echo: %v, type %d, %q", err, typ, msg)
	}
	if err := b.WriteMessage(websocket.TextMessage, []byte("all:hi")); err != nil {
		t.Fatal(err)
	}
	if got := read(a, "a"); got != "all:hi" {
		t.Fatalf("a got %q, want the broadcast", got)
	}
	if got := read(b, "b"); got != "all:hi" {
		t.Fatalf("b got %q, want the broadcast", got)
	}
	// The other room hears nothing: its next frame is its own echo.
	if err := other.WriteMessage(websocket.TextMessage, []byte("me")); err != nil {
		t.Fatal(err)
	}
	if got := read(other, "other"); got != "me" {
		t.Fatalf("other room got %q", got)
	}
}
