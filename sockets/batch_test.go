package sockets

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// writePaths are the two ways a broadcast writes: its sends submitted
// together (io_uring, the default where it works) or one write(2) each.
var writePaths = []struct {
	name string
	cfg  Config
}{
	{"io_uring", Config{}},
	{"write", Config{NoIOUring: true}},
}

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
