package sockets

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// message i of the direct write tests: 16 KiB, its index in front.
func directMessage(i int) []byte {
	b := bytes.Repeat([]byte{byte(i)}, maxDirect)
	binary.BigEndian.PutUint32(b, uint32(i))
	return b
}

// TestDirectWriteCompletedFirst: a client that stops reading fills the
// node's send buffer until a direct write is taken only in part; a ping
// and more messages follow. Once the client reads, it gets every message
// whole and in order (the tail of the partial one before the ping's
// frame), and answers the ping.
func TestDirectWriteCompletedFirst(t *testing.T) {
	e := newEnv(t, Config{SendQueue: 64 << 20})
	c, id := e.dial(room)
	_ = c.NetConn().(*net.TCPConn).SetReadBuffer(4096)
	s, err := e.o.lookup(room, id)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.wc.SetWriteBuffer(4096)

	state := func() (partial, writing bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.queue) > 0 && s.queue[0].kind == restFrame, s.writing
	}
	sent, read := 0, 0
	readNext := func() {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(wait))
		typ, got, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("message %d of %d: %v", read, sent, err)
		}
		if typ != websocket.BinaryMessage || !bytes.Equal(got, directMessage(read)) {
			t.Fatalf("message %d: type %d, %d bytes, index %d", read, typ, len(got), binary.BigEndian.Uint32(got))
		}
		read++
	}
	for {
		if sent == 5000 {
			t.Fatal("no direct write was partial after 5000 messages")
		}
		if err := e.o.Send(room, id, false, directMessage(sent)); err != nil {
			t.Fatal(err)
		}
		sent++
		partial, writing := state()
		if partial {
			break
		}
		// The socket took nothing (a full buffer): the message was
		// queued. Read until its writer is done, and try again.
		for ; writing; _, writing = state() {
			readNext()
		}
	}
	s.ping(1)
	for range 3 {
		if err := e.o.Send(room, id, false, directMessage(sent)); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	pinged := make(chan struct{}, 1)
	c.SetPingHandler(func(string) error {
		select {
		case pinged <- struct{}{}:
		default: // the ping loop's own may follow
		}
		return nil
	})
	for read < sent {
		readNext()
	}
	select {
	case <-pinged:
	case <-time.After(wait):
		t.Fatal("the ping did not arrive")
	}
	if s.wc.rest != nil {
		t.Fatal("a tail is still kept")
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
