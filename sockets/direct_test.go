//go:build unix

package sockets

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

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
	e          *env
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
	require.NoError(e.t, err)
	_ = s.wc.SetWriteBuffer(4096)
	return &slowClient{t: e.t, e: e, c: c, s: s}
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
		// A writer runs: the socket took nothing (a full buffer), and the
		// message was queued. Read until the writer stops (the next
		// message is then written directly), and try again; once every
		// message sent is read, it has written all, and its stop is
		// waited for.
		for ; writing; _, writing = sc.state() {
			if sc.read == sc.sent {
				sc.e.awaitNoWriter(sc.s)
				break
			}
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
	sc.s.wc.mu.Lock() // waits for a flush still under way
	rest := sc.s.wc.rest
	sc.s.wc.mu.Unlock()
	require.Nil(sc.t, rest, "a tail is still kept")
}

// TestDirectWriteCompletedFirst: a client that stops reading fills the
// node's send buffer until a direct write is taken only in part; a ping
// and more messages follow. Once the client reads, it gets every message
// whole and in order (the tail of the partial one before the ping's
// frame), and the ping before the messages sent after it.
func TestDirectWriteCompletedFirst(t *testing.T) {
	// No ping of the ping loop's own: the only ping is the test's.
	e := newEnv(t, Config{SendQueue: 64 << 20, PingInterval: time.Hour})
	sc := e.dialSlow(room)
	send := func(i int) {
		require.NoError(t, e.o.Send(room, sc.s.id, false, directMessage(i)))
	}
	sc.fill(send)
	sc.s.ping(1)
	for range 3 {
		send(sc.sent)
		sc.sent++
	}
	pings := 0
	sc.c.SetPingHandler(func(string) error { pings++; return nil }) // called within ReadMessage
	sc.readAll()
	require.Equal(t, 1, pings, "pings read before the last message, which was sent after the ping")
}

// TestDirectWriteAfterIdle: a message sent once the write deadline an
// earlier queued write left on the connection has passed arrives (a
// direct write has no deadline), and so does the next one.
func TestDirectWriteAfterIdle(t *testing.T) {
	// No ping of the ping loop's own: nothing is queued but the test's.
	e := newEnv(t, Config{PingInterval: time.Hour})
	c, id := e.dial(room)
	s, err := e.o.lookup(room, id)
	require.NoError(t, err)
	s.ping(1) // a queued write: gorilla leaves the connection's write deadline WriteTimeout ahead
	e.awaitNoWriter(s)
	// The socket idles past that deadline: it is set in the past here
	// rather than waited for.
	require.NoError(t, s.wc.SetWriteDeadline(time.Now().Add(-time.Second)))
	for _, msg := range []string{"after", "next"} {
		require.NoError(t, e.o.Send(room, id, true, []byte(msg)))
		require.Equal(t, msg, readText(t, c))
	}
}
