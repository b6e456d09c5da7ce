package guest

import "github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"

// Actors. Every event names the actor it is for. A guest may serve
// many actors of the class (isolation class, the default), one event at a
// time, or one actor alone (isolation actor, see SetIsolation). Either
// way the package keeps one Actor per actor the guest serves: made at
// the actor's first event on the guest, dropped when the host says the
// actor left memory (it hibernated, was evicted or moved, or the node
// stops), after the handler registered with HandleLeave has seen it.

// Actor is the in-memory object of one resident actor on this guest.
type Actor struct {
	id uint64
	// Class and Name name the actor: its URL path is /actor/<Class>/<Name>.
	Class, Name string
	// Value is the class's own, kept from one of the actor's events to the
	// next while the actor stays in memory on this guest: a cache of
	// what its storage holds, never the only copy, since the host may drop
	// the guest at any time (a failure of any actor it serves, a
	// limit). It starts nil.
	Value any
}

// Isolation is how a class's resident actors share guests.
type Isolation uint32

// Isolations (wasmhost/ABI.md, wasmkeep_isolation).
const (
	// IsolationActor: a guest of its own for each resident actor, the
	// opt-in. It costs 1.3 to 1.7 MB of memory per resident actor, by
	// what the guest does;
	// one actor's failure never touches another's guest, and package
	// variables are the actor's own.
	IsolationActor Isolation = wire.IsolationActor
	// IsolationClass: the default. The resident actors of the class
	// share a few guests, each serving many of them one event at a time,
	// which costs a small object per actor. A failure (a panic not recovered, a
	// limit) ends the guest and the Actors of every actor it served;
	// their next events make them again. Package variables are shared by
	// the actors of a guest: keep per-actor data in Actor.Value.
	IsolationClass Isolation = wire.IsolationClass
)

// Invariant: set only by package initialisers, before the host asks.
var (
	isolation    = IsolationClass
	leaveHandler func(*Actor)
)

// SetIsolation declares the class's isolation; without it, the class is
// served in IsolationClass. Call it from an init function. The node may
// override it (wasmkeep serve --wasm-isolation).
func SetIsolation(i Isolation) {
	if i != IsolationActor && i != IsolationClass {
		panic("guest: unknown isolation")
	}
	isolation = i
}

// HandleLeave registers h, called with an actor's Actor when the actor
// leaves memory, before the package drops it. Call it once, from an init
// function. h may read the Actor and Log; Storage, Sockets and Call are
// not the actor's any more (the host fails the call and the guest).
func HandleLeave(h func(*Actor)) {
	if leaveHandler != nil {
		panic("guest: HandleLeave called twice")
	}
	leaveHandler = h
}

// known holds the Actors of this guest by id; current is the running
// event's. dropped counts deletions since known was made, to make it
// anew once most of it was deleted: a map keeps the room of the keys
// deleted from it, and ids are never reused.
var (
	known   = map[uint64]*Actor{}
	current *Actor
	dropped int
)

// Current returns the Actor of the running event: nil outside an event.
func Current() *Actor { return current }

// enter makes the actor id the current one, making its Actor if this
// guest has not met it.
func enter(id uint64) {
	if current != nil && current.id == id {
		return
	}
	a := known[id]
	if a == nil {
		buf := make([]byte, eventActorLen())
		eventActorRead(buf)
		r := wire.NewReader(buf)
		a = &Actor{id: id, Class: r.String(), Name: r.String()}
		if r.Err() {
			panic("guest: event actor from the host is malformed")
		}
		known[id] = a
	}
	current = a
}

// leave drops the Actor of id, after the leave handler has seen it.
func leave(id uint64) int32 {
	a := known[id]
	if a == nil {
		return wire.OK
	}
	if leaveHandler != nil {
		current = a
		leaveHandler(a)
	}
	current = nil
	delete(known, id)
	if dropped++; dropped > 64 && dropped > 2*len(known) {
		fresh := make(map[uint64]*Actor, len(known))
		for k, v := range known {
			fresh[k] = v
		}
		known, dropped = fresh, 0
	}
	return wire.OK
}

// Actors reports how many Actors this guest holds: the actors it
// serves, resident now.
func Actors() int { return len(known) }
