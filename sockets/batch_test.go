//go:build unix

package sockets

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestBroadcastPartialWrite: a client that stops reading fills its
// socket's send buffer until a broadcast's direct write is taken only in
// part, while three others read along; more broadcasts follow. Every
// client gets every message whole and in order, the slow one once it
// reads again.
func TestBroadcastPartialWrite(t *testing.T) {
	for _, p := range writePaths {
		t.Run(p.name, func(t *testing.T) {
			cfg := p.cfg
			cfg.SendQueue = 64 << 20
			testBroadcastPartialWrite(t, cfg)
		})
	}
}

func testBroadcastPartialWrite(t *testing.T, cfg Config) {
	e := newEnv(t, cfg)
	needRings(t, e, cfg)
	slow := e.dialSlow(room)

	// The fast clients read every message as it comes, and check it.
	var wg sync.WaitGroup
	counts := make([]chan int, 3)
	for i := range counts {
		c, _ := e.dial(room)
		counts[i] = make(chan int, 1)
		wg.Go(func() {
			n := 0
			defer func() { counts[i] <- n }()
			for {
				_ = c.SetReadDeadline(time.Now().Add(wait))
				typ, got, err := c.ReadMessage()
				if err != nil {
					return // closed at the end (or the count below fails)
				}
				if typ != websocket.BinaryMessage || !bytes.Equal(got, directMessage(n)) {
					t.Errorf("fast client %d, message %d: type %d, %d bytes, index %d", i, n, typ, len(got), binary.BigEndian.Uint32(got))
					return
				}
				n++
			}
		})
	}
	broadcast := func(i int) {
		if n, err := e.o.Broadcast(room, "", false, directMessage(i)); n != 4 || err != nil {
			t.Fatalf("broadcast %d: %d, %v; want 4", i, n, err)
		}
	}
	slow.fill(broadcast)
	for range 3 {
		broadcast(slow.sent)
		slow.sent++
	}
	slow.readAll()
	// The fast clients read every message before the close frame.
	e.o.CloseActor(room, 1000, "done")
	wg.Wait()
	for i, c := range counts {
		if n := <-c; n != slow.sent {
			t.Errorf("fast client %d read %d of %d messages", i, n, slow.sent)
		}
	}
}

// TestCloseDuringDirectWrite: a close started while a direct write holds
// the socket is sent once the write is done, though the write took
// nothing.
func TestCloseDuringDirectWrite(t *testing.T) {
	e := newEnv(t, Config{})
	c, id := e.dial(room)
	s, err := e.o.lookup(room, id)
	if err != nil {
		t.Fatal(err)
	}
	if !s.claimDirect(5) {
		t.Fatal("an idle socket cannot be claimed")
	}
	if err := e.o.Close(room, id, 4000, "bye"); err != nil {
		t.Fatal(err)
	}
	if err := s.directDone(textFrame, []byte("never"), 0, errNoDirect); !errors.Is(err, ErrClosing) {
		t.Fatalf("directDone = %v, want ErrClosing", err)
	}
	if ce := readClose(t, c); ce.Code != 4000 || ce.Text != "bye" {
		t.Fatalf("close %d %q, want 4000 bye", ce.Code, ce.Text)
	}
}

// TestDirectWritesStopAfterAFailedWrite: once a write of gorilla's has
// failed, the stream may end inside a frame, so nothing more is written
// directly: the client never gets a frame after the failed one.
func TestDirectWritesStopAfterAFailedWrite(t *testing.T) {
	e := newEnv(t, Config{})
	c, id := e.dial(room)
	s, err := e.o.lookup(room, id)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.conn.SetWriteDeadline(time.Now().Add(-time.Second))
	if err := s.conn.WriteMessage(websocket.TextMessage, []byte("late")); err == nil {
		t.Fatal("a write past its deadline succeeded")
	}
	if s.wc.claim() {
		t.Fatal("a direct write may start after a failed write")
	}
	_ = e.o.Send(room, id, true, []byte("after"))
	_ = c.SetReadDeadline(time.Now().Add(wait))
	if _, got, err := c.ReadMessage(); err == nil {
		t.Fatalf("the client read %q after the failed write", got)
	}
}

// TestLargeWriteFailureStopsDirectWrites: gorilla writes a frame larger
// than its buffer past wireConn.Write; when such a write fails, the
// connection is marked broken all the same.
func TestLargeWriteFailureStopsDirectWrites(t *testing.T) {
	e := newEnv(t, Config{WriteTimeout: 100 * time.Millisecond, SendQueue: 64 << 20})
	slow := e.dialSlow(room)
	big := make([]byte, 2*maxDirect) // queued: too large for a direct write
	for range 8 {
		if err := e.o.Send(room, slow.s.id, false, big); err != nil {
			t.Fatal(err)
		}
	}
	// Closing: the writer's failure drops the connection at once, with no
	// close frame of gorilla's that would fail (and mark it) too.
	if err := e.o.Close(room, slow.s.id, 1000, ""); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, e.sink.ends); ev.id != slow.s.id {
		t.Fatalf("terminal event of socket %v, want %v", ev.id, slow.s.id)
	}
	slow.s.wc.mu.Lock()
	broken := slow.s.wc.broken
	slow.s.wc.mu.Unlock()
	if !broken {
		t.Fatal("a failed write of a large frame left the connection open to direct writes")
	}
}
