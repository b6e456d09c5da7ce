package ownership_test

import (
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

func closedRoom(effects []ownership.Effect, a ownership.Actor) bool {
	for _, e := range effects {
		if c, ok := e.(ownership.CloseSockets); ok && c.Actor == a {
			return true
		}
	}
	return false
}

// A move of a parked room whose release finds the record naming this node
// at a later generation (a wake of ours that landed without an answer)
// keeps the room's sockets open, and looks at the record until another
// live node holds the room: then it closes them, 1012, without the owner
// sweep (docs/PROTOCOL.md §5).
func TestAMoveWaitsWhileTheRecordNamesThisNodeLater(t *testing.T) {
	h := newHarness(t)
	withPeer(t, h)
	parkRoom(h)
	later := ownership.Record{Class: room.Class, Name: room.Name, Node: "n1", Instance: "n1.a", Generation: 2, Held: true, Nonce: "w"}
	if _, err := h.bucket.Put(ownership.OwnerKey(room), ownership.EncodeRecord(later), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	h.effects = nil
	h.step(ownership.Move{Actor: room, Target: "n9"})
	if closedRoom(h.effects, room) {
		t.Fatal("the move closed the sockets though its release did not land")
	}
	if !h.core.Moving(room) {
		t.Fatal("the move was dropped")
	}
	h.advance(2 * h.core.Config().LeasePeriod)
	if closedRoom(h.effects, room) {
		t.Fatal("the sockets were closed while the record names this node")
	}

	theirs := ownership.Record{Class: room.Class, Name: room.Name, Node: "n9", Instance: "n9.a", Generation: 3, Held: true, Nonce: "t"}
	if _, err := h.bucket.Put(ownership.OwnerKey(room), ownership.EncodeRecord(theirs), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	h.effects = nil
	h.advance(h.core.Config().LeasePeriod + h.core.Config().SweepPeriod/10)
	if !h.saw(ownership.CloseSockets{Actor: room, Code: ownership.CloseServiceRestart, Reason: "move"}) {
		t.Fatalf("the target holds the room: want its sockets closed 1012 for the move, effects %v", h.effects)
	}
}
