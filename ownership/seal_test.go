package ownership_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

func (h *harness) state(a ownership.Actor) (ownership.StateHeader, []byte, ownership.ETag) {
	h.t.Helper()
	o, err := h.bucket.Get(ownership.StateKey(a))
	if err != nil {
		h.t.Fatalf("state of %s: %v", a, err)
	}
	sh, payload, err := ownership.DecodeState(o.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return sh, payload, o.ETag
}

// TestSealBeforeRecord: an acquisition stamps the state object with its
// generation, keeping the payload, before it writes the record; the old
// hold's commit, conditioned on the version before the seal, is refused.
func TestSealBeforeRecord(t *testing.T) {
	h := newHarness(t)
	a := ownership.Actor{Class: "room", Name: "seal"}
	g1, ok := h.acquire(a).(ownership.Grant)
	if !ok || g1.Gen != 1 {
		t.Fatalf("first acquire: %v", g1)
	}
	// A new actor (no record) is not sealed: no hold of it ever existed.
	if _, err := h.bucket.Get(ownership.StateKey(a)); !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("a new actor's state: %v, want none", err)
	}
	// Hold 1 commits, as an instance does: its first commit creates it.
	committed, err := h.bucket.Put(ownership.StateKey(a), ownership.EncodeState(ownership.StateHeader{Gen: 1, Seq: 1}, []byte("v1")), ownership.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	h.step(ownership.Idle{Actor: a, Gen: 1}) // released
	if h.record(a).Held {
		t.Fatal("record still held after idle")
	}

	// The next acquisition: watch the order of its writes.
	h.effects = nil
	g2, ok := h.acquire(a).(ownership.Grant)
	if !ok || g2.Gen != 2 {
		t.Fatalf("second acquire: %v", g2)
	}
	var order []string
	for _, e := range h.effects {
		if r, ok := e.(ownership.Request); ok && r.Op == ownership.OpPut {
			order = append(order, r.Key)
		}
	}
	if len(order) != 2 || order[0] != ownership.StateKey(a) || order[1] != ownership.OwnerKey(a) {
		t.Fatalf("writes of the acquisition: %v, want the state seal then the record", order)
	}
	sh, payload, _ := h.state(a)
	if sh.Gen != 2 || !bytes.Equal(payload, []byte("v1")) {
		t.Fatalf("sealed state: %+v %q, want generation 2 with hold 1's payload", sh, payload)
	}
	// Hold 1's late commit, conditioned on what it last wrote, is refused.
	_, err = h.bucket.Put(ownership.StateKey(a), ownership.EncodeState(ownership.StateHeader{Gen: 1, Seq: 3}, []byte("late")), ownership.IfMatch(committed))
	if !errors.Is(err, ownership.ErrPrecondition) {
		t.Fatalf("old hold's late commit: %v, want refused", err)
	}
}

// TestSealTakesAStrandedStamp: an acquisition that sealed at a generation
// and then wrote no record leaves a stamp above the record; the next
// acquisition takes that generation instead of being blocked by it.
func TestSealTakesAStrandedStamp(t *testing.T) {
	h := newHarness(t)
	a := ownership.Actor{Class: "room", Name: "stranded"}
	h.existed(a)
	if _, err := h.bucket.Put(ownership.StateKey(a), ownership.EncodeState(ownership.StateHeader{Gen: 7, Seq: 1}, []byte("kept")), ownership.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	g, ok := h.acquire(a).(ownership.Grant)
	if !ok || g.Gen != 7 {
		t.Fatalf("acquire over a stamp at 7 with no record: %v, want a grant at 7", g)
	}
	if rec := h.record(a); rec.Generation != 7 || !rec.Held {
		t.Fatalf("record %+v, want held at 7", rec)
	}
	if sh, payload, _ := h.state(a); sh.Gen != 7 || string(payload) != "kept" {
		t.Fatalf("state %+v %q, want 7 and the payload kept", sh, payload)
	}
}

// TestSealRefusesUnreadableState: a state object the node cannot read is
// never overwritten; the event is refused as damaged and the record left
// alone.
func TestSealRefusesUnreadableState(t *testing.T) {
	h := newHarness(t)
	a := ownership.Actor{Class: "room", Name: "garbled"}
	h.existed(a)
	if _, err := h.bucket.Put(ownership.StateKey(a), []byte("not a state object"), ownership.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if r, ok := h.acquire(a).(ownership.Refuse); !ok || r.Damaged != ownership.StateKey(a) {
		t.Fatalf("acquire over unreadable state: %#v, want a refusal for damage naming the state key", r)
	}
	if rec := h.record(a); rec.Held || rec.Generation != 1 {
		t.Fatalf("record after a refused seal: %+v, want free at generation 1", rec)
	}
	if o, _ := h.bucket.Get(ownership.StateKey(a)); string(o.Body) != "not a state object" {
		t.Fatalf("state overwritten: %q", o.Body)
	}
}

// existed gives a a record and no state: it was held once (generation 1)
// and released without writing.
func (h *harness) existed(a ownership.Actor) {
	h.t.Helper()
	if g, ok := h.acquire(a).(ownership.Grant); !ok || g.Gen != 1 {
		h.t.Fatalf("first acquire of %s: %v", a, g)
	}
	h.step(ownership.Idle{Actor: a, Gen: 1})
	if h.record(a).Held {
		h.t.Fatalf("%s still held after idle", a)
	}
}

func TestStateEncoding(t *testing.T) {
	for _, payload := range [][]byte{nil, []byte("x"), []byte("line\nbreaks\n"), bytes.Repeat([]byte{0}, 100)} {
		b := ownership.EncodeState(ownership.StateHeader{Gen: 42, Seq: 9}, payload)
		h, got, err := ownership.DecodeState(b)
		if err != nil || h.Gen != 42 || h.Seq != 9 || !bytes.Equal(got, payload) {
			t.Fatalf("round trip of %q: %+v %q %v", payload, h, got, err)
		}
	}
	for _, bad := range []string{"", "wk1 state 1 2", "wk1 owner 1 2\n", "wk2 state 1 2\n", "wk1 state x 2\n", "{\"gen\":1}"} {
		if _, _, err := ownership.DecodeState([]byte(bad)); !errors.Is(err, ownership.ErrUnreadable) {
			t.Errorf("DecodeState(%q) = %v, want ErrUnreadable", bad, err)
		}
	}
}

func TestJudgeState(t *testing.T) {
	for _, tc := range []struct {
		found bool
		read  ownership.StateHeader
		gen   ownership.Generation
		want  ownership.StateVerdict
		write ownership.StateHeader
	}{
		{false, ownership.StateHeader{}, 3, ownership.StateNew, ownership.StateHeader{Gen: 3}},
		{true, ownership.StateHeader{Gen: 3, Seq: 7}, 3, ownership.StateUse, ownership.StateHeader{Gen: 3, Seq: 7}},
		{true, ownership.StateHeader{Gen: 4, Seq: 7}, 3, ownership.StateSuperseded, ownership.StateHeader{Gen: 4, Seq: 7}},
		{true, ownership.StateHeader{Gen: 2, Seq: 7}, 3, ownership.StateFence, ownership.StateHeader{Gen: 3, Seq: 8}},
		{true, ownership.StateHeader{Gen: 0, Seq: 0}, 1, ownership.StateFence, ownership.StateHeader{Gen: 1, Seq: 1}},
	} {
		v, h := ownership.JudgeState(tc.found, tc.read, tc.gen)
		if v != tc.want || h != tc.write {
			t.Errorf("JudgeState(%v, %+v, %d) = %v, %+v; want %v, %+v", tc.found, tc.read, tc.gen, v, h, tc.want, tc.write)
		}
	}
}

// TestJudgeReload: a hold whose commit may still land fences its own
// object, or creates it when there is none; without one pending, a
// reload is judged as any read.
func TestJudgeReload(t *testing.T) {
	for _, tc := range []struct {
		found   bool
		read    ownership.StateHeader
		pending bool
		want    ownership.StateVerdict
		write   ownership.StateHeader
	}{
		{true, ownership.StateHeader{Gen: 3, Seq: 7}, false, ownership.StateUse, ownership.StateHeader{Gen: 3, Seq: 7}},
		{true, ownership.StateHeader{Gen: 3, Seq: 7}, true, ownership.StateFence, ownership.StateHeader{Gen: 3, Seq: 8}},
		{false, ownership.StateHeader{}, false, ownership.StateNew, ownership.StateHeader{Gen: 3}},
		{false, ownership.StateHeader{}, true, ownership.StateFence, ownership.StateHeader{Gen: 3}},
		{true, ownership.StateHeader{Gen: 4, Seq: 7}, true, ownership.StateSuperseded, ownership.StateHeader{Gen: 4, Seq: 7}},
		{true, ownership.StateHeader{Gen: 2, Seq: 7}, true, ownership.StateFence, ownership.StateHeader{Gen: 3, Seq: 8}},
	} {
		v, h := ownership.JudgeReload(tc.found, tc.read, 3, tc.pending)
		if v != tc.want || h != tc.write {
			t.Errorf("JudgeReload(%v, %+v, 3, %v) = %v, %+v; want %v, %+v", tc.found, tc.read, tc.pending, v, h, tc.want, tc.write)
		}
	}
}
