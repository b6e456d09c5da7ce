package wasmhost

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
)

// The wasm chat room (examples/room-wasm) on a real node, with real
// WebSocket clients over 127.0.0.1.

const roomGuest = "../examples/room-wasm"

// startRoomNode starts a node serving the wasm room as class "room-wasm",
// with a short idle timeout, its configuration changed by configure if
// given.
func startRoomNode(t *testing.T, configure ...func(*node.Config)) *nodetest.Node {
	t.Helper()
	r := newRuntime(t, Config{})
	mod := mustCompile(t, r, "room-wasm", guest(t, roomGuest))
	// Cleanups run last first: the node (started after) stops before the
	// runtime closes.
	o := nodetest.Options{Classes: map[string]actors.Class{"room-wasm": mod}, IdleTimeout: 150 * time.Millisecond}
	if len(configure) > 0 {
		o.Configure = configure[0]
	}
	return nodetest.Start(t, o)
}

// TestRoomHibernatesWithItsSockets: two people chat through the wasm room;
// it hibernates (its guest closed) while both stay connected, and a
// message wakes it on a fresh guest with its history and presence
// intact.
func TestRoomHibernatesWithItsSockets(t *testing.T) {
	n := startRoomNode(t)

	resp, err := http.Get(n.URL + "/actor/room-wasm/lobby")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	ada := n.Join(t, "room-wasm", "lobby", "ada")
	if h := ada.AwaitHistory(); len(h) != 0 {
		t.Fatalf("history of a new room: %+v", h)
	}
	ada.AwaitPresence("ada")
	bob := n.Join(t, "room-wasm", "lobby", "bob")
	bob.AwaitHistory()
	ada.AwaitPresence("ada", "bob")
	bob.AwaitPresence("ada", "bob")

	ada.Say("hello \"world\" ☃")
	ada.AwaitSaid("ada", "hello \"world\" ☃")
	bob.AwaitSaid("ada", "hello \"world\" ☃")

	n.AwaitIdle(t, "room-wasm/lobby")
	if s := n.Status(); s.Parked != 1 {
		t.Fatalf("after hibernation: %d parked records, want 1", s.Parked)
	}

	// A message wakes it, with its storage and the sockets' attachments.
	bob.Say("still here")
	ada.AwaitSaid("bob", "still here")
	bob.AwaitSaid("bob", "still here")

	n.AwaitIdle(t, "room-wasm/lobby")
	carol := n.Join(t, "room-wasm", "lobby", "carol")
	h := carol.AwaitHistory()
	if len(h) != 2 || h[0].From != "ada" || h[0].Text != "hello \"world\" ☃" || h[1].Text != "still here" || h[1].At == 0 {
		t.Fatalf("history after two hibernations: %+v", h)
	}
	ada.AwaitPresence("ada", "bob", "carol")

	// A client leaving is seen by the others.
	carol.Conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	ada.AwaitPresence("ada", "bob")
	bob.AwaitPresence("ada", "bob")

	// Saying before joining closes the socket with 1008.
	eve := n.Dial(t, "room-wasm", "lobby")
	if err := eve.WriteJSON(map[string]string{"type": "say", "text": "sneaky"}); err != nil {
		t.Fatal(err)
	}
	eve.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := eve.ReadMessage()
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
	n := startRoomNode(t)
	a, b := n.Dial(t, "room-wasm", "bench"), n.Dial(t, "room-wasm", "bench")
	other := n.Dial(t, "room-wasm", "elsewhere")
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

// BenchmarkRoomEcho: ingress's BenchmarkRoomEcho through the wasm room.
func BenchmarkRoomEcho(b *testing.B) {
	r := newRuntime(b, Config{})
	mod := mustCompile(b, r, "room-wasm", guest(b, roomGuest))
	n := nodetest.Start(b, nodetest.Options{Classes: map[string]actors.Class{"room-wasm": mod}})
	n.Echo(b, "room-wasm", "bench", 100, b.N)
}

// TestRoomReminder: "/remind" sets an alarm of the wasm room, which posts
// the reminder when it is due, waking the room where its people are
// connected after it hibernated.
func TestRoomReminder(t *testing.T) {
	n := startRoomNode(t)
	ada := n.Join(t, "room-wasm", "hall", "ada")
	ada.AwaitHistory()
	ada.AwaitPresence("ada")
	ada.Say("/remind 1s stretch")
	ada.AwaitSaid("reminder", "reminder set for 1s from now")
	n.AwaitIdle(t, "room-wasm/hall")
	ada.AwaitSaid("reminder", "ada: stretch")
}

// TestRoomFollow: "/follow" has the wasm room dial a feed, whose messages
// it posts from "feed", each waking the room after it hibernated; a feed
// the node does not allow is refused; when the feed ends the socket, the
// room dials the URL its close event names again; "/unfollow" closes it.
func TestRoomFollow(t *testing.T) {
	f := newFeed(t)
	n := startRoomNode(t, allowFeed(t, f))
	ada := n.Join(t, "room-wasm", "news", "ada")
	ada.AwaitHistory()
	ada.AwaitPresence("ada")
	ada.Say("/follow ws://10.1.2.3/feed")
	ada.AwaitSaid("feed", "cannot follow ws://10.1.2.3/feed: outbound socket refused by the egress allow-list")
	u := f.url("/feed")
	ada.Say("/follow " + u)
	ada.AwaitSaid("feed", "following "+u)
	c := f.next(t)
	for _, msg := range []string{"breaking", "and more"} {
		n.AwaitIdle(t, "room-wasm/news")
		if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		ada.AwaitSaid("feed", msg)
	}

	// The feed ends the socket: the room dials it again.
	if err := c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "rotate"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	again := f.next(t)
	if err := again.WriteMessage(websocket.TextMessage, []byte("after the rotation")); err != nil {
		t.Fatal(err)
	}
	ada.AwaitSaid("feed", "after the rotation")

	ada.Say("/unfollow")
	ada.AwaitSaid("feed", "unfollowed "+u)
	again.SetReadDeadline(time.Now().Add(nodetest.Wait))
	for {
		_, _, err := again.ReadMessage()
		if err == nil {
			continue
		}
		if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Fatalf("the feed after /unfollow: %v, want close 1000", err)
		}
		break
	}
	ada.Say("still here")
	ada.AwaitSaid("ada", "still here")
	select {
	case c := <-f.conns:
		c.Close()
		t.Fatal("the room dialed the feed again after /unfollow")
	default:
	}
}

// TestRoomAsk: "/ask URL" has the wasm room fetch a local service (one the
// node's egress allows) and post the first line of its answer from "web";
// a URL the node does not allow is said to be so.
func TestRoomAsk(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "sunny, 21 degrees\nmore lines\n")
	}))
	defer srv.Close()
	n := startRoomNode(t, func(c *node.Config) {
		allow, err := egress.ParseAllow([]string{srv.Listener.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		c.Egress.Allow = allow
	})
	ada := n.Join(t, "room-wasm", "weather", "ada")
	ada.AwaitHistory()
	ada.Say("/ask " + srv.URL + "/today")
	ada.AwaitSaid("web", "200 sunny, 21 degrees")
	ada.Say("/ask http://10.1.2.3/today")
	ada.AwaitSaid("web", "not allowed: http://10.1.2.3/today (the node's --egress-allow)")
}
