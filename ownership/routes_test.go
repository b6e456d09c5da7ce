package ownership_test

import (
	"fmt"
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

// A take call (RouteFailed without a node) drops the route whatever node it
// names, so the take reads the record its sender released.
func TestATakeDropsTheRoute(t *testing.T) {
	h := newHarness(t)
	theirs := withPeer(t, h)
	routeOf(t, h, theirs)
	free := ownership.Record{Class: "room", Name: "theirs", Node: "n9", Instance: "n9.a", Generation: 3, Held: false, Nonce: "s"}
	if _, err := h.bucket.Put(ownership.OwnerKey(theirs), ownership.EncodeRecord(free), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	h.step(ownership.RouteFailed{Actor: theirs})
	mustGrant(t, h.acquire(theirs), 4)
}

// A draining node refuses every acquisition and names the live peer to send
// the event on to, the same for every event of an actor.
func TestADrainNamesThePeer(t *testing.T) {
	h := newHarness(t)
	withPeer(t, h)
	h.step(ownership.Drain{})
	for range 2 {
		r, ok := h.acquire(room).(ownership.Refuse)
		if !ok || !r.Draining || r.Peer != "n9" || r.PeerAddr != "10.0.0.9:8080" {
			t.Fatalf("acquire while draining: %#v, want a draining refusal naming n9 at its address", r)
		}
	}
}

// PeerFor spreads actors over the live peers with an address, and names
// none when there is none.
func TestPeerFor(t *testing.T) {
	peers := []ownership.PeerStatus{
		{Node: "a", Addr: "a:1", Live: true},
		{Node: "b", Addr: "b:1", Live: false},
		{Node: "c", Addr: "", Live: true},
		{Node: "d", Addr: "d:1", Live: true},
	}
	seen := map[ownership.NodeID]int{}
	for i := range 200 {
		p, ok := ownership.PeerFor(peers, ownership.Actor{Class: "counter", Name: fmt.Sprint(i)})
		if !ok {
			t.Fatal("no peer picked")
		}
		seen[p.Node]++
	}
	if len(seen) != 2 || seen["a"] < 50 || seen["d"] < 50 {
		t.Fatalf("picks %v, want a and d only, about evenly", seen)
	}
	if _, ok := ownership.PeerFor(peers[1:3], room); ok {
		t.Fatal("picked a peer that is not live or has no address")
	}
}

// The core refuses a move to a node that is not a live peer, whatever its
// shell checked: the actor stays held here.
func TestAMoveToANodeNotLiveIsRefused(t *testing.T) {
	h := newHarness(t)
	withPeer(t, h)
	mustGrant(t, h.acquire(room), 1)
	for target, why := range map[ownership.NodeID]string{"n7": "n7 is not a node of this cluster", "n1": ""} {
		h.effects = nil
		h.step(ownership.Move{Actor: room, Target: target})
		if _, ok := h.core.Live(room); !ok || h.core.Moving(room) {
			t.Fatalf("a move to %s ended the hold here", target)
		}
		if why != "" && !h.saw(ownership.Report{Level: "warn", Key: ownership.OwnerKey(room), Msg: "move refused: " + why}) {
			t.Fatalf("a move to %s: no report of its refusal in %v", target, h.effects)
		}
	}
	h.advance(h.core.Config().LeaseTTL + h.core.Config().Grace) // n9's lease unchanged: taken for dead
	h.step(ownership.Move{Actor: room, Target: "n9"})
	if _, ok := h.core.Live(room); !ok {
		t.Fatal("a move to a peer taken for dead ended the hold here")
	}
	if got := ownership.MoveRefusal(h.core.Status(h.now), "n9"); got == "" {
		t.Fatal("MoveRefusal accepts a peer taken for dead")
	}
}
