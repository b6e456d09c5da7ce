// Package nodetest starts whole nodes for tests, on 127.0.0.1 over a
// directory bucket, and speaks the chat room's protocol (examples/chat,
// examples/room-wasm) over real WebSockets.
package nodetest

import (
	"cmp"
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// Wait bounds every wait of this package.
const Wait = 15 * time.Second

// Options shape a test node. The zero value is a node "n1" (instance
// "i1") on a fresh directory bucket, serving the built-in classes with the
// default idle timeout.
type Options struct {
	// Classes are registered next to the built-in ones, by name.
	Classes map[string]actors.Class
	// IdleTimeout: zero is the node's default.
	IdleTimeout time.Duration
	// Dir is the directory bucket's directory; several nodes on one are a
	// cluster. "": a fresh one.
	Dir string
	// Node and Instance name the node; "": "n1" and "i1".
	Node, Instance string
	// Configure, when set, changes the node's configuration last.
	Configure func(*node.Config)
}

// Node is a running test node; it stops when the test ends.
type Node struct {
	*node.Node
	// URL is the node's http://host:port.
	URL          string
	hibernations chan string
}

// Start starts a node as o says.
func Start(t testing.TB, o Options) *Node {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	o.Node, o.Instance = cmp.Or(o.Node, "n1"), cmp.Or(o.Instance, "i1")
	b, err := dirstore.Open(o.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := actors.BuiltIn()
	for name, c := range o.Classes {
		if err := reg.Register(name, c); err != nil {
			t.Fatal(err)
		}
	}
	hib := make(chan string, 256)
	cfg := node.Config{
		Core:   ownership.DefaultConfig(ownership.NodeID(o.Node), ownership.InstanceID(o.Instance)),
		Bucket: b, Listener: lis, Registry: reg, PublicAdmin: true,
		Actors: actorhost.Config{IdleTimeout: o.IdleTimeout, OnHibernate: func(a ownership.Actor, _ ownership.Generation, reason string) {
			select {
			case hib <- a.String() + " " + reason:
			default:
			}
		}},
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	n, err := node.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-n.Done():
			n.Abort() // ended by itself: close its server and sockets
		default:
			if err := n.Stop(context.Background()); err != nil {
				t.Errorf("stop: %v", err)
			}
		}
	})
	return &Node{Node: n, URL: "http://" + lis.Addr().String(), hibernations: hib}
}

// AwaitIdle waits for actor ("class/name") to hibernate for being idle,
// from now: hibernations before the call are not the one waited for.
func (n *Node) AwaitIdle(t testing.TB, actor string) {
	t.Helper()
	for len(n.hibernations) > 0 {
		<-n.hibernations
	}
	deadline := time.After(Wait)
	for {
		select {
		case got := <-n.hibernations:
			if got == actor+" idle" {
				return
			}
		case <-deadline:
			t.Fatalf("%s did not hibernate within %v", actor, Wait)
		}
	}
}

// Dial opens a WebSocket to /actor/<class>/<name>.
func (n *Node) Dial(t testing.TB, class, name string) *websocket.Conn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(n.URL, "http") + "/actor/" + class + "/" + name
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

// Frame is one frame of the chat protocol, as a client reads it.
type Frame struct {
	Type     string         `json:"type"`
	Messages []chat.Message `json:"messages"`
	Message  *chat.Message  `json:"message"`
	Names    []string       `json:"names"`
}

// ChatClient is one person in a chat room.
type ChatClient struct {
	t    testing.TB
	Name string
	Conn *websocket.Conn
}

// Join connects to room of class and joins it as name.
func (n *Node) Join(t testing.TB, class, room, name string) *ChatClient {
	t.Helper()
	c := &ChatClient{t: t, Name: name, Conn: n.Dial(t, class, room)}
	c.Send(map[string]string{"type": "join", "name": name})
	return c
}

// Send sends v as a JSON text message.
func (c *ChatClient) Send(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if err := c.Conn.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("%s send: %v", c.Name, err)
	}
}

// Say says text.
func (c *ChatClient) Say(text string) { c.Send(map[string]string{"type": "say", "text": text}) }

// Await reads frames until one satisfies ok.
func (c *ChatClient) Await(what string, ok func(Frame) bool) Frame {
	c.t.Helper()
	c.Conn.SetReadDeadline(time.Now().Add(Wait))
	for {
		_, b, err := c.Conn.ReadMessage()
		if err != nil {
			c.t.Fatalf("%s waiting for %s: %v", c.Name, what, err)
		}
		var f Frame
		if err := json.Unmarshal(b, &f); err != nil {
			c.t.Fatalf("%s: bad frame %q: %v", c.Name, b, err)
		}
		if ok(f) {
			return f
		}
	}
}

// AwaitRaw reads messages until one equals want (the plain protocol).
func (c *ChatClient) AwaitRaw(want string) {
	c.t.Helper()
	c.Conn.SetReadDeadline(time.Now().Add(Wait))
	for {
		_, b, err := c.Conn.ReadMessage()
		if err != nil {
			c.t.Fatalf("%s waiting for %q: %v", c.Name, want, err)
		}
		if string(b) == want {
			return
		}
	}
}

// AwaitHistory waits for the history a joiner gets.
func (c *ChatClient) AwaitHistory() []chat.Message {
	c.t.Helper()
	return c.Await("history", func(f Frame) bool { return f.Type == "history" }).Messages
}

// AwaitPresence waits until the room says exactly names are present.
func (c *ChatClient) AwaitPresence(names ...string) {
	c.t.Helper()
	c.Await("presence "+strings.Join(names, ","), func(f Frame) bool {
		return f.Type == "presence" && slices.Equal(f.Names, names)
	})
}

// AwaitSaid waits for from saying text.
func (c *ChatClient) AwaitSaid(from, text string) {
	c.t.Helper()
	c.Await(from+" saying "+text, func(f Frame) bool {
		return f.Type == "said" && f.Message != nil && f.Message.From == from && f.Message.Text == text
	})
}

// Echo opens sockets WebSockets to /actor/<class>/<name> and has them send
// total 16-byte text messages in all, each socket waiting for its echo
// before sending the next: the load of a room echo benchmark. The clock of
// b runs only while the messages go.
func (n *Node) Echo(b *testing.B, class, name string, sockets, total int) {
	b.Helper()
	conns := make([]*websocket.Conn, sockets)
	for i := range conns {
		conns[i] = n.Dial(b, class, name)
	}
	msg := []byte("0123456789abcdef")
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, c := range conns {
		per := total / sockets
		if i < total%sockets {
			per++
		}
		wg.Go(func() {
			for range per {
				if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
					b.Errorf("socket %d: %v", i, err)
					return
				}
				if _, _, err := c.ReadMessage(); err != nil {
					b.Errorf("socket %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
}
