package sim

import (
	"os"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// TestRoomWakesWhereItsSocketsAre is the parking rule of docs/PROTOCOL.md §4 as a script:
// a room with a socket on n1, called through n2 and n3, wakes on n1 each
// time at a new generation; n1 is killed; another node takes the room within
// the failover bound; the new node parks it with a socket; the last socket
// closing leaves a record naming nobody.
func TestRoomWakesWhereItsSocketsAre(t *testing.T) {
	var trace *os.File
	if testing.Verbose() {
		trace = os.Stdout
	}
	w := NewScripted(1, trace)
	room := ownership.Actor{Class: "room", Name: "lobby"}
	w.rooms = append(w.rooms, room)
	w.RunFor(time.Second) // every node takes its lease and reads the others
	const n1, n2, n3 = 0, 1, 2

	// runUntilServed advances in small steps until the event is served, so a
	// socket can be opened in the same moment, as an actor accepts one.
	runUntilServed := func(id uint64, limit time.Duration) {
		for end := w.Now() + limit; w.Now() < end && w.Failure == ""; {
			if _, _, _, ok := w.Served(id); ok {
				return
			}
			w.RunFor(5 * time.Millisecond)
		}
	}
	served := func(id uint64, want ownership.NodeID) ownership.Generation {
		t.Helper()
		runUntilServed(id, time.Second)
		node, gen, _, ok := w.Served(id)
		if !ok {
			t.Fatalf("event %d not served (failure: %q)", id, w.Failure)
		}
		if node != want {
			t.Fatalf("event %d served on %s, want %s", id, node, want)
		}
		return gen
	}
	hibernate := func(node int) {
		t.Helper()
		w.RunFor(4 * time.Second) // past any idle timeout
		if !w.Parked(node, room) {
			t.Fatalf("%s does not park the room after its idle drop", w.nodes[node].name)
		}
	}

	gen := served(w.Event(n1, room), "n1")
	sock := w.OpenSocket(n1, room)
	hibernate(n1)

	for _, via := range []int{n2, n3} {
		next := served(w.Event(via, room), "n1")
		if next <= gen {
			t.Fatalf("the wake through %s reused generation %d (before: %d): a wake must write a new generation", w.nodes[via].name, next, gen)
		}
		gen = next
		hibernate(n1)
	}

	// n1 dies with the room parked and its socket open.
	w.Crash(n1)
	killed := w.Now()
	id := w.Event(n2, room)
	bound := w.settle() + coreConfig("n", "i").LeasePeriod
	runUntilServed(id, bound)
	node, taken, at, ok := w.Served(id)
	if !ok {
		t.Fatalf("no node took the room within the failover bound %v after n1 died (failure: %q)", bound, w.Failure)
	}
	if node == "n1" || taken <= gen {
		t.Fatalf("the room was served on %s at generation %d after n1 died at generation %d", node, taken, gen)
	}
	t.Logf("room taken by %s at generation %d, %v after n1 was killed (bound %v)", node, taken, at-killed, bound)

	// The new node parks it with a socket; the last socket leaves a free record.
	holder := n2
	if node == "n3" {
		holder = n3
	}
	sock = w.OpenSocket(holder, room)
	hibernate(holder)
	w.CloseSocket(holder, room, sock)
	w.RunFor(time.Second)
	rec, ok := w.Record(room)
	if !ok || rec.Held {
		t.Fatalf("after the last socket closed the record is %+v (present %v), want one naming nobody", rec, ok)
	}
	if w.Parked(holder, room) {
		t.Fatalf("%s still parks the room after its last socket closed", node)
	}
	if w.Failure != "" {
		t.Fatal(w.Failure)
	}
}

// TestSameSeedSameTrace runs seeds twice, once with the trace printed, and
// compares the running hashes: a run depends on its seed alone.
func TestSameSeedSameTrace(t *testing.T) {
	for _, seed := range []uint64{0, 1, 7, 1234} {
		a := New(Default(), seed, nil)
		fa := a.Run()
		var sink discard
		b := New(Default(), seed, &sink)
		fb := b.Run()
		if a.TraceHash() != b.TraceHash() || fa != fb {
			t.Fatalf("seed %d: two runs differ: hash %016x vs %016x, failure %q vs %q", seed, a.TraceHash(), b.TraceHash(), fa, fb)
		}
		if sink.n == 0 {
			t.Fatalf("seed %d: the printed trace is empty", seed)
		}
		c := New(Default(), seed+1, nil)
		c.Run()
		if c.TraceHash() == a.TraceHash() {
			t.Fatalf("seeds %d and %d give the same trace hash", seed, seed+1)
		}
	}
}

type discard struct{ n int }

func (d *discard) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
