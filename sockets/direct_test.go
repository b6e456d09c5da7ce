//go:build unix

package sockets

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// message i of the direct write tests: 16 KiB, its index in front.
func directMessage(i int) []byte {
	b := bytes.Repeat([]byte{byte(i)}, maxDirect)
	binary.BigEndian.PutUint32(b, uint32(i))
	return b
}

// slowClient is a client whose socket's send buffer a test fills: it
// reads only when told, and checks that message i is directMessage(i).
type slowClient struct {
	t          *testing.T
	c          *websocket.Conn
	s          *socket
	sent, read int
}

// dialSlow opens a client of a with small socket buffers on both sides.
func (e *env) dialSlow(a ownership.Actor) *slowClient {
	e.t.Helper()
	c, id := e.dial(a)
	_ = c.NetConn().(*net.TCPConn).SetReadBuffer(4096)
	s, err := e.o.lookup(a, id)
	if err != nil {
		e.t.Fatal(err)
	}
	_ = s.wc.SetWriteBuffer(4096)
	return &slowClient{t: e.t, c: c, s: s}
}

// state: the tail of a partial direct write is queued first; a writer
// runs.
func (sc *slowClient) state() (partial, writing bool) {
	sc.s.mu.Lock()
	defer sc.s.mu.Unlock()
	return len(sc.s.queue) > 0 && sc.s.queue[0].kind == restFrame, sc.s.writing
}

// readNext reads and checks the next message.
func (sc *slowClient) readNext() {
	sc.t.Helper()
	_ = sc.c.SetReadDeadline(time.Now().Add(wait))
	typ, got, err := sc.c.ReadMessage()
	if err != nil {
		sc.t.Fatalf("message %d of %d: %v", sc.read, sc.sent, err)
	}
	if typ != websocket.BinaryMessage || !bytes.Equal(got, directMessage(sc.read)) {
		sc.t.Fatalf("message %d: type %d, %d bytes, index %d", sc.read, typ, len(got), binary.BigEndian.Uint32(got))
	}
	sc.read++
}

// fill sends (send(i) sends directMessage(i)) until a direct write is
// taken only in part.
func (sc *slowClient) fill(send func(i int)) {
	sc.t.Helper()
	for {
		if sc.sent == 5000 {
			sc.t.Fatal("no direct write was partial after 5000 messages")
		}
		send(sc.sent)
		sc.sent++
		partial, writing := sc.state()
		if partial {
			return
		}
		// The socket took nothing (a full buffer): the message was
		// queued. Read until its writer is done, and try again.
		for ; writing; _, writing = sc.state() {
			sc.readNext()
		}
	}
}

// readAll reads every message sent, and checks no tail is left.
func (sc *slowClient) readAll() {
	sc.t.Helper()
	for sc.read < sc.sent {
		sc.readNext()
	}
	if sc.s.wc.rest != nil {
		sc.t.Fatal("a tail is still kept")
	}
}

// TestDirectWriteCompletedFirst: a client that stops reading fills the
// node's send buffer until a direct write is taken only in part; a ping
// and more messages follow. Once the client reads, it gets every message
// whole and in order (the tail of the partial one before the ping's
// frame), and answers the ping.
func TestDirectWriteCompletedFirst(t *testing.T) {
	e := newEnv(t, Config{SendQueue: 64 << 20})
	sc := e.dialSlow(room)
	send := func(i int) {
		if err := e.o.Send(room, sc.s.id, false, directMessage(i)); err != nil {
			t.Fatal(err)
		}
	}
	sc.fill(send)
	sc.s.ping(1)
	for range 3 {
		send(sc.sent)
		sc.sent++
	}
	pinged := make(chan struct{}, 1)
	sc.c.SetPingHandler(func(string) error {
		select {
		case pinged <- struct{}{}:
		default: // the ping loop's own may follow
		}
		return nil
	})
	sc.readAll()
	select {
	case <-pinged:
	case <-time.After(wait):
		t.Fatal("the ping did not arrive")
	}
}

// TestDirectWriteAfterIdle: a message sent after the deadline of an
// earlier queued write has passed arrives (a direct write has no
// deadline), and so does the next one.
func TestDirectWriteAfterIdle(t *testing.T) {
	e := newEnv(t, Config{WriteTimeout: 50 * time.Millisecond})
	c, id := e.dial(room)
	s, err := e.o.lookup(room, id)
	if err != nil {
		t.Fatal(err)
	}
	s.ping(1) // a queued write: gorilla sets a deadline 50 ms ahead
	time.Sleep(150 * time.Millisecond)
	for _, msg := range []string{"after", "next"} {
		if err := e.o.Send(room, id, true, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		if _, got, err := c.ReadMessage(); err != nil || string(got) != msg {
			t.Fatalf("read %q, %v; want %q", got, err, msg)
		}
	}
}
