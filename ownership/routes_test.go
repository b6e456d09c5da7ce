package ownership_test

import (
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// withPeer adds a live peer n9 holding actor theirs, and lets the core see
// its lease.
func withPeer(t *testing.T, h *harness) ownership.Actor {
	t.Helper()
	peer := ownership.Lease{Node: "n9", Instance: "n9.a", Addr: "10.0.0.9:8080", TTLMilli: 10000, State: ownership.LeaseLive, Seq: 1, Nonce: "q"}
	if _, err := h.bucket.Put(ownership.NodeKey("n9"), ownership.EncodeLease(peer), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	theirs := ownership.Actor{Class: "room", Name: "theirs"}
	rec := ownership.Record{Class: "room", Name: "theirs", Node: "n9", Instance: "n9.a", Generation: 3, Held: true, Nonce: "r"}
	if _, err := h.bucket.Put(ownership.OwnerKey(theirs), ownership.EncodeRecord(rec), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	h.advance(3 * time.Second) // a listing and the lease read it starts
	return theirs
}

// routeOf acquires a and wants a route to n9; it returns the requests the
// acquisition made.
func routeOf(t *testing.T, h *harness, a ownership.Actor) []string {
	t.Helper()
	if r, ok := h.acquire(a).(ownership.Route); !ok || r.Node != "n9" || r.Addr != "10.0.0.9:8080" {
		t.Fatalf("acquire %s: want a route to n9 at its address, got %#v", a, r)
	}
	return h.requests()
}

// An actor a live peer holds is routed after one read of its record, and
// the events after it within a lease period are routed without a read.
// A route that failed, a period gone by, or a holder no longer live sends
// the next acquisition back to the record.
func TestRoutesAreKeptForALeasePeriod(t *testing.T) {
	h := newHarness(t)
	theirs := withPeer(t, h)
	if got := routeOf(t, h, theirs); len(got) != 1 || got[0] != "get owners" {
		t.Fatalf("the first route: requests %v, want one read of the record", got)
	}
	for range 3 {
		if got := routeOf(t, h, theirs); len(got) != 0 {
			t.Fatalf("a kept route read %v", got)
		}
	}

	h.step(ownership.RouteFailed{Actor: theirs, Node: "n7"}) // another node's route: nothing
	if got := routeOf(t, h, theirs); len(got) != 0 {
		t.Fatalf("a failure of another node's route dropped this one: %v", got)
	}
	h.step(ownership.RouteFailed{Actor: theirs, Node: "n9"})
	if got := routeOf(t, h, theirs); len(got) != 1 {
		t.Fatalf("after the route failed: requests %v, want the record read", got)
	}

	h.advance(h.core.Config().LeasePeriod)
	got := routeOf(t, h, theirs)
	if n := count(got, "get owners"); n != 1 {
		t.Fatalf("a period after the route was kept: requests %v, want the record read once", got)
	}

	// The peer's lease stops changing: once it is past dead, the record is
	// read again (and the core fences the peer) rather than routed blindly.
	h.advance(h.core.Config().LeaseTTL + h.core.Config().Grace)
	h.effects = nil
	if _, ok := h.acquire(theirs).(ownership.Route); ok {
		t.Fatal("routed to a peer past dead")
	}
	if n := count(h.requests(), "get owners"); n == 0 {
		t.Fatalf("a route to a dead peer was taken without reading the record: %v", h.requests())
	}
}

// A route kept for an actor is dropped when this node then takes the
// actor: a record read that finds it free is not followed by a route.
func TestARouteEndsWhenTheRecordIsFree(t *testing.T) {
	h := newHarness(t)
	theirs := withPeer(t, h)
	routeOf(t, h, theirs)
	free := ownership.Record{Class: "room", Name: "theirs", Node: "n9", Instance: "n9.a", Generation: 3, Held: false, Nonce: "s"}
	if _, err := h.bucket.Put(ownership.OwnerKey(theirs), ownership.EncodeRecord(free), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	h.step(ownership.RouteFailed{Actor: theirs, Node: "n9"}) // n9 refused: it released the actor
	mustGrant(t, h.acquire(theirs), 4)
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
