package keeper

import (
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// TestFastHoldsWaitForQueuedInputs: an Idle posted while a step that
// granted the actor's live hold runs (or before it, queued behind it)
// keeps that step from putting the hold in the fast answers, until the
// actor has taken the Idle: otherwise the fast path would answer live a
// hold the queued Idle ends.
func TestFastHoldsWaitForQueuedInputs(t *testing.T) {
	f := newFastHolds()
	a := ownership.Actor{Class: "counter", Name: "a"}
	b := ownership.Actor{Class: "counter", Name: "b"}
	now := time.Unix(1000, 0)
	until := now.Add(time.Minute)
	idle := ownership.Idle{Actor: a, Gen: 1}
	if !f.forget(idle) {
		t.Fatal("an Idle is not counted")
	}
	f.put(a, 1, until) // the step that granted a, before the Idle is taken
	if _, ok := f.lookup(a, now); ok {
		t.Fatal("a hold with an Idle queued is answered live")
	}
	f.put(b, 1, until)
	if _, ok := f.lookup(b, now); !ok {
		t.Fatal("another actor's hold is not put")
	}
	f.taken(idle)
	f.put(a, 2, until) // a later grant, after the Idle
	if g, ok := f.lookup(a, now); !ok || g != 2 {
		t.Fatalf("after the Idle was taken: %d %v", g, ok)
	}
	drain := ownership.Drain{}
	f.forget(drain)
	if _, ok := f.lookup(b, now); ok {
		t.Fatal("a node-wide input left an entry")
	}
	f.put(b, 1, until)
	if _, ok := f.lookup(b, now); ok {
		t.Fatal("a hold put while a node-wide input is queued")
	}
	f.taken(drain)
	f.put(b, 1, until)
	if _, ok := f.lookup(b, now); !ok {
		t.Fatal("no entry after the node-wide input was taken")
	}
	if f.forget(ownership.DamageFound{Key: "k"}) {
		t.Fatal("a damage report is counted as queued")
	}
}
