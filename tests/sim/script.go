package sim

import (
	"container/heap"
	"io"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Scripted runs: a world with no random chaos, driven step by step by a test.

// Quiet is a run with no faults and no random events: scripts drive it.
func Quiet() Params {
	p := Default()
	p.LoseRequest, p.LoseReply, p.LandLate, p.Slow = 0, 0, 0, 0
	p.Unavailable, p.UnavailableApplied, p.Conflict, p.ConflictApplied = 0, 0, 0, 0
	never := 1000 * time.Hour
	p.EventEvery, p.CrashEvery, p.StopEvery, p.DrainEvery, p.MoveEvery, p.CutEvery, p.BlackoutEvery = never, never, never, never, never, never, never
	p.SocketChance = 0
	p.AlarmSet, p.AlarmDelete, p.AlarmFail, p.AlarmAgain = 0, 0, 0, 0
	p.Chaos, p.Heal, p.Quiet = 10*time.Hour, 0, 0
	return p
}

// NewScripted makes a quiet world for a script.
func NewScripted(seed uint64, trace io.Writer) *World { return New(Quiet(), seed, trace) }

// RunFor advances virtual time, checking every invariant after each event.
func (w *World) RunFor(d time.Duration) {
	end := w.now + d
	for w.queue.Len() > 0 && w.Failure == "" && w.queue[0].at <= end {
		ev := heap.Pop(&w.queue).(*scheduled)
		w.now = ev.at
		w.handle(ev.ev)
		if w.Failure == "" {
			w.checkStep()
		}
	}
	if w.now < end {
		w.now = end
	}
}

// Event sends one event for a room to a node, as a client would; it
// returns the event's id. The client retries as in any run.
func (w *World) Event(node int, room ownership.Actor) uint64 {
	w.nextEvent++
	ce := &clientEvent{id: w.nextEvent, room: room, born: w.now}
	w.events[ce.id] = ce
	w.served[ce.id] = servedAt{}
	n := w.nodes[node]
	w.noteEv("event", n, ce.id, room, "scripted")
	w.step(n, ownership.Acquire{Actor: room, Ref: ce.id})
	return ce.id
}

// Served says where and at which generation an event was served.
func (w *World) Served(id uint64) (node ownership.NodeID, gen ownership.Generation, at time.Duration, ok bool) {
	s := w.served[id]
	return s.node, s.gen, s.at, s.ok
}

// OpenSocket opens a client socket for a room on a node (the room's actor
// accepted it there); it returns the socket's id.
func (w *World) OpenSocket(node int, room ownership.Actor) uint64 {
	n := w.nodes[node]
	w.nextSock++
	n.sockets[room] = append(n.sockets[room], w.nextSock)
	w.note("sock+", n, "%s s%d", room, w.nextSock)
	w.step(n, ownership.SocketOpened{Actor: room})
	return w.nextSock
}

// CloseSocket closes a client socket.
func (w *World) CloseSocket(node int, room ownership.Actor, sock uint64) {
	w.closeSocket(w.nodes[node], room, sock, "client")
}

// Crash kills a node (it does not come back by itself).
func (w *World) Crash(node int) { w.crash(w.nodes[node]) }

// Record returns the room's ownership record as the bucket holds it.
func (w *World) Record(room ownership.Actor) (ownership.Record, bool) {
	rec, ok := w.records[room]
	return rec, ok
}

// Parked reports whether a node parks a room.
func (w *World) Parked(node int, room ownership.Actor) bool {
	n := w.nodes[node]
	if !n.up {
		return false
	}
	_, ok := n.core.Parked(room)
	return ok
}

// Now is the virtual time.
func (w *World) Now() time.Duration { return w.now }

type servedAt struct {
	node ownership.NodeID
	gen  ownership.Generation
	at   time.Duration
	ok   bool
}
