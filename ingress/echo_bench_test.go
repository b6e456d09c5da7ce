package ingress_test

import (
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
)

// BenchmarkRoomEcho: 100 sockets in one chat room each send a message and
// wait for its echo, b.N round trips in all: every message is an event of
// the room, from the socket's read to the echo's write.
func BenchmarkRoomEcho(b *testing.B) {
	n := nodetest.Start(b, nodetest.Options{Classes: map[string]actors.Class{"chat": chat.Room{}}})
	n.Echo(b, "chat", "bench", 100, b.N)
}
