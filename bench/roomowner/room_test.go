// Package roomowner measures the mechanism a socket owner of one actor
// would run on: a room behind a lock (today's sockets.Owner, a call from
// the event's goroutine) against a room that is a proto.actor actor (a
// message to its mailbox, run on the actor's goroutine). The room is a
// model: sockets whose send queues are slices behind a lock of their own,
// as a socket's queue is, so only the way to the room differs.
//
//	go test -run '^$' -bench . -benchtime 2s -count 5 ./bench/roomowner/
package roomowner

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/ownership/keeper"
)

// socket is a socket's send queue.
type socket struct {
	mu    sync.Mutex
	queue [][]byte
}

func (s *socket) enqueue(b []byte) {
	s.mu.Lock()
	if len(s.queue) >= 64 {
		s.queue = s.queue[:0] // a writer took them
	}
	s.queue = append(s.queue, b)
	s.mu.Unlock()
}

// room is the sockets of one actor.
type room struct {
	sockets []*socket
}

func newRoom(n int) *room {
	r := &room{}
	for range n {
		r.sockets = append(r.sockets, &socket{})
	}
	return r
}

func (r *room) broadcast(b []byte) {
	for _, s := range r.sockets {
		s.enqueue(b)
	}
}

func (r *room) send(i int, b []byte) { r.sockets[i%len(r.sockets)].enqueue(b) }

// lockedRoom is today's shape: the room behind a lock.
type lockedRoom struct {
	mu sync.Mutex
	r  *room
}

// roomActor is the other: the room is a proto.actor actor.
type roomActor struct{ r *room }

type broadcastMsg struct{ b []byte }
type sendMsg struct {
	i int
	b []byte
}
type syncMsg struct{ done chan struct{} }

func (a *roomActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *broadcastMsg:
		a.r.broadcast(m.b)
	case *sendMsg:
		a.r.send(m.i, m.b)
	case *syncMsg:
		close(m.done)
	}
}

var msg = []byte("a sixteen byte m")

func bench(b *testing.B, sockets int, op func(l *lockedRoom, i int), aop func(root *actor.RootContext, pid *actor.PID, i int)) {
	b.Run("lock", func(b *testing.B) {
		l := &lockedRoom{r: newRoom(sockets)}
		for i := range b.N {
			op(l, i)
		}
	})
	b.Run("actor", func(b *testing.B) {
		sys := keeper.NewSystem(nil)
		defer sys.Shutdown()
		pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &roomActor{r: newRoom(sockets)} }))
		b.ResetTimer()
		for i := range b.N {
			aop(sys.Root, pid, i)
		}
		done := make(chan struct{})
		sys.Root.Send(pid, &syncMsg{done: done}) // every message before it has run
		<-done
	})
}

// BenchmarkBroadcast: a broadcast to a room of 40 sockets (ws-idle's rooms
// hold 20 to 100).
func BenchmarkBroadcast(b *testing.B) {
	bench(b, 40,
		func(l *lockedRoom, _ int) { l.mu.Lock(); l.r.broadcast(msg); l.mu.Unlock() },
		func(root *actor.RootContext, pid *actor.PID, _ int) { root.Send(pid, &broadcastMsg{b: msg}) })
}

// BenchmarkSend: one message to one socket of a room of 100, as an echo.
func BenchmarkSend(b *testing.B) {
	bench(b, 100,
		func(l *lockedRoom, i int) { l.mu.Lock(); l.r.send(i, msg); l.mu.Unlock() },
		func(root *actor.RootContext, pid *actor.PID, i int) { root.Send(pid, &sendMsg{i: i, b: msg}) })
}

// info is what an event learns of one socket of its room (sockets.SocketInfo).
type info struct {
	id         uint64
	tags       []string
	attachment []byte
}

// snapshotRoom is a room whose sockets carry tags and an attachment, as a
// chat room's do.
func snapshotRoom(n int) []*info {
	r := make([]*info, n)
	for i := range r {
		r[i] = &info{id: uint64(i + 1), tags: []string{"room", "user"}, attachment: make([]byte, 64)}
	}
	return r
}

// BenchmarkEventSnapshot: what an event would carry if the room were an
// actor and the event could not ask it anything synchronously: a snapshot
// of the room, taken for every event. copy is a snapshot made as List
// makes its answer today (ids, tags and attachments copied, so the class
// cannot change the room's own); shared is one the room keeps immutable
// and hands to every event, whose cost moves to each change of the room
// (BenchmarkRoomChange).
func BenchmarkEventSnapshot(b *testing.B) {
	for _, n := range []int{1, 40, 100} {
		r := snapshotRoom(n)
		b.Run(fmt.Sprintf("sockets=%d/copy", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out := make([]info, 0, len(r))
				for _, s := range r {
					out = append(out, info{id: s.id, tags: slices.Clone(s.tags), attachment: slices.Clone(s.attachment)})
				}
				sink = out
			}
		})
		b.Run(fmt.Sprintf("sockets=%d/shared", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = r
			}
		})
	}
}

// BenchmarkRoomChange: the price of a shared snapshot: a change of one
// socket (its attachment set, as a chat room does at each join) copies the
// room's index and that socket's entry.
func BenchmarkRoomChange(b *testing.B) {
	for _, n := range []int{1, 40, 100} {
		r := snapshotRoom(n)
		att := make([]byte, 64)
		b.Run(fmt.Sprintf("sockets=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				next := slices.Clone(r)
				old := next[i%n]
				next[i%n] = &info{id: old.id, tags: old.tags, attachment: slices.Clone(att)}
				r = next
				i++
			}
			sink = r
		})
	}
}

var sink any
