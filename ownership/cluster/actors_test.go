package cluster_test

import (
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// ListActors gives every actor of a class that has storage or a record,
// with its sizes from the listing, who holds it from its record and its
// holder's lease, and its state object's header; ReadHolder judges one
// actor the same way.
func TestListActors(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	writeCluster(t, b)
	state := func(a ownership.Actor, gen, seq uint64, payload string) {
		put(t, b, ownership.StateKey(a), ownership.EncodeState(ownership.StateHeader{Gen: ownership.Generation(gen), Seq: seq}, []byte(payload)))
	}
	state(room("a"), 1, 3, "0123456789")
	put(t, b, ownership.RunKey(room("a"), 1, 7), make([]byte, 100))
	put(t, b, ownership.RunKey(room("a"), 1, 8), make([]byte, 50))
	state(room("b"), 1, 1, "")
	state(room("g h"), 0, 1, "x") // imported: no record
	put(t, b, ownership.StateKey(ownership.Actor{Class: "other", Name: "a"}), []byte("another class"))
	put(t, b, ownership.OwnerKey(room("u")), []byte("not a record"))
	put(t, b, ownership.StateKey(room("v")), []byte("no header line"))

	l, err := cluster.ListActors(t.Context(), b, "room", cluster.ActorOptions{Records: true, Headers: true}, t0)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name        string
		state, runs int64
		objects     int
		record      cluster.RecordState
		node        ownership.NodeID
		gen         ownership.Generation
		header      string
		err         bool
	}
	var got []row
	for _, s := range l.Actors {
		r := row{s.Name, s.StateBytes, s.RunBytes, s.Objects, s.Record, s.Node, s.Generation, "", s.Err != ""}
		if s.State != nil {
			r.header = string(ownership.EncodeState(ownership.StateHeader{Gen: s.State.Generation, Seq: s.State.Writes}, nil))
		}
		got = append(got, r)
	}
	sz := func(gen, seq uint64, payload string) int64 {
		return int64(len(ownership.EncodeState(ownership.StateHeader{Gen: ownership.Generation(gen), Seq: seq}, []byte(payload))))
	}
	want := []row{
		{"a", sz(1, 3, "0123456789"), 150, 3, cluster.RecordFree, "n1", 1, "wk1 state 1 3\n", false},
		{"b", sz(1, 1, ""), 0, 1, cluster.RecordHeld, "n1", 1, "wk1 state 1 1\n", false},
		{"c", 0, 0, 0, cluster.RecordHeld, "n1", 1, "", false}, // parked: the bucket cannot tell
		{"d", 0, 0, 0, cluster.RecordFree, "n2", 1, "", false},
		{"e", 0, 0, 0, cluster.RecordEnded, "n3", 4, "", false},
		{"g h", sz(0, 1, "x"), 0, 1, cluster.RecordNone, "", 0, "wk1 state 0 1\n", false},
		{"u", 0, 0, 0, cluster.RecordUnreadable, "", 0, "", true},
		{"v", int64(len("no header line")), 0, 1, cluster.RecordNone, "", 0, "", true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d actors, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("actor %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if l.Actors[5].Segment != "g%20h" {
		t.Errorf("segment %q", l.Actors[5].Segment)
	}

	// The listings alone: sizes, and nothing read.
	l, err = cluster.ListActors(t.Context(), b, "room", cluster.ActorOptions{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if a := l.Actors[0]; a.Name != "a" || a.Size() != sz(1, 3, "0123456789")+150 || a.Record != "" || a.State != nil {
		t.Errorf("listing alone: %+v", a)
	}

	for name, want := range map[string]cluster.RecordState{
		"a": cluster.RecordFree, "b": cluster.RecordHeld, "c": cluster.RecordHeld, "e": cluster.RecordEnded,
		"u": cluster.RecordUnreadable, "z": cluster.RecordNone,
	} {
		h, err := cluster.ReadHolder(t.Context(), b, room(name))
		if err != nil || h.State != want {
			t.Errorf("holder of %s: %+v, %v; want %s", name, h, err, want)
		}
		if want == cluster.RecordHeld && (h.Lease == nil || h.Lease.Node != "n1") {
			t.Errorf("holder of %s: lease %+v", name, h.Lease)
		}
	}
}

// TestClaimRecord: an actor with no record gets a free one naming
// ImportHolder, which any node may acquire; one that has a record keeps
// it, and its holder is said as ReadHolder says it.
func TestClaimRecord(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	a := ownership.Actor{Class: "notes", Name: "n"}
	h, err := cluster.ClaimRecord(t.Context(), b, a, "nonce1")
	if err != nil || h.State != cluster.RecordFree || h.Record.Node != cluster.ImportHolder || h.Record.Generation != 1 {
		t.Fatalf("claim of a new actor: %+v %v", h, err)
	}
	obj, err := b.Get(t.Context(), ownership.OwnerKey(a))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ownership.DecodeRecord(obj.Body)
	if err != nil || rec.Held || rec.Generation != 1 || rec.Node != cluster.ImportHolder {
		t.Fatalf("the record written: %+v %v", rec, err)
	}
	again, err := cluster.ClaimRecord(t.Context(), b, a, "nonce2")
	if err != nil || again.Record == nil || again.Record.Nonce != "nonce1" {
		t.Fatalf("a second claim replaced the first record: %+v %v", again, err)
	}
}
