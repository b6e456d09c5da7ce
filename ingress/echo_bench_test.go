package ingress_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
)

// BenchmarkRoomEcho: 100 sockets in one chat room each send a message and
// wait for its echo, b.N round trips in all: every message is an event of
// the room, from the socket's read to the echo's write.
func BenchmarkRoomEcho(b *testing.B) {
	n := nodetest.Start(b, nodetest.Options{Classes: map[string]actors.Class{"chat": chat.Room{}}})
	const sockets = 100
	conns := make([]*websocket.Conn, sockets)
	for i := range conns {
		conns[i] = n.Dial(b, "chat", "bench")
	}
	msg := []byte("0123456789abcdef")
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, c := range conns {
		per := b.N / sockets
		if i < b.N%sockets {
			per++
		}
		wg.Go(func() {
			for range per {
				if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
					b.Error(err)
					return
				}
				if _, _, err := c.ReadMessage(); err != nil {
					b.Error(fmt.Errorf("socket %d: %w", i, err))
					return
				}
			}
		})
	}
	wg.Wait()
}
