package memstore

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

func TestStateZeroValue(t *testing.T) {
	var s State
	if _, err := s.Get("k"); !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("get on the zero State: %v, want ErrNotFound", err)
	}
	page, err := s.List("", "", 0)
	if err != nil || len(page.Entries) != 0 || page.Truncated {
		t.Fatalf("list on the zero State: %+v, %v", page, err)
	}
	if err := s.Delete("k", ownership.Always()); err != nil {
		t.Fatalf("delete on the zero State: %v", err)
	}
	if _, err := s.Put("k", []byte("v"), ownership.IfAbsent()); err != nil {
		t.Fatalf("put on the zero State: %v", err)
	}
	if s.Len() != 1 {
		t.Fatalf("Len %d, want 1", s.Len())
	}
}

// TestStateDeterministic: the same requests in the same order give the same
// ETags and the same objects, so a simulation's trace is replayable.
func TestStateDeterministic(t *testing.T) {
	run := func() []string {
		var s State
		var trace []string
		var last ownership.ETag
		for i := range 50 {
			key := fmt.Sprintf("k%d", i%7)
			var res Response
			switch i % 5 {
			case 0, 1:
				res = s.Apply(Request{Op: OpPut, Key: key, Body: []byte{byte(i)}, Cond: ownership.IfAbsent()})
			case 2:
				res = s.Apply(Request{Op: OpPut, Key: key, Body: []byte{byte(i)}, Cond: ownership.IfMatch(last)})
			case 3:
				res = s.Apply(Request{Op: OpDelete, Key: key, Cond: ownership.IfMatch(last)})
			case 4:
				res = s.Apply(Request{Op: OpList, Prefix: "k", Limit: 3})
			}
			if res.ETag != "" {
				last = res.ETag
			}
			trace = append(trace, fmt.Sprintf("%v %q %v %v", ownership.OutcomeOf(res.Err), res.ETag, res.Page, res.Object))
		}
		return trace
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Fatalf("two runs differ:\n%q\n%q", a, b)
	}
}

// TestStateHeldRequest: a simulator may build a request, hold it, let other
// requests land, and apply it later; its condition is evaluated then.
func TestStateHeldRequest(t *testing.T) {
	var s State
	e1, err := s.Put("k", []byte("v1"), ownership.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("held")
	held := Request{Op: OpPut, Key: "k", Body: body, Cond: ownership.IfMatch(e1)}
	e2, err := s.Put("k", []byte("v2"), ownership.IfMatch(e1))
	if err != nil {
		t.Fatal(err)
	}
	if res := s.Apply(held); !errors.Is(res.Err, ownership.ErrPrecondition) {
		t.Fatalf("held if-match write landing after another write: %v, want ErrPrecondition", res.Err)
	}
	held.Cond = ownership.IfMatch(e2)
	res := s.Apply(held)
	if res.Err != nil {
		t.Fatalf("held write with the current ETag: %v", res.Err)
	}
	copy(body, "XXXX") // the State copied the body when the request landed
	obj, _ := s.Get("k")
	if string(obj.Body) != "held" || obj.ETag != res.ETag {
		t.Fatalf("get: %q %q", obj.Body, obj.ETag)
	}
}

func TestStateIgnoreConditions(t *testing.T) {
	s := State{IgnoreConditions: true}
	e1, err := s.Put("k", []byte("v1"), ownership.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("k", []byte("v2"), ownership.IfAbsent()); err != nil {
		t.Errorf("create-only over an existing key on a broken server: %v, want it to land", err)
	}
	if _, err := s.Put("k", []byte("v3"), ownership.IfMatch(e1)); err != nil {
		t.Errorf("stale if-match on a broken server: %v, want it to land", err)
	}
	if _, err := s.Put("missing", []byte("v"), ownership.IfMatch(e1)); err != nil {
		t.Errorf("if-match on a missing key on a broken server: %v, want it to land", err)
	}
	if err := s.Delete("k", ownership.IfMatch(e1)); err != nil {
		t.Errorf("stale if-match delete on a broken server: %v, want it to land", err)
	}
	if _, err := s.Get("k"); !errors.Is(err, ownership.ErrNotFound) {
		t.Errorf("get after the delete: %v", err)
	}
	// Arguments are still checked: the broken part is the server's
	// conditions, not the client.
	if err := s.Delete("missing", ownership.IfAbsent()); ownership.OutcomeOf(err) != ownership.Failed {
		t.Errorf("create-only delete: %v, want a failed request", err)
	}
}

func TestStateBadRequests(t *testing.T) {
	var s State
	for _, r := range []Request{
		{Op: OpDelete, Key: "k", Cond: ownership.IfAbsent()},
		{Op: OpPut, Key: "k", Cond: ownership.Condition{Kind: 9}},
		{Op: Op(42), Key: "k"},
		{Op: 0},
		{Op: OpGet, Key: "k", Ranged: true, Off: -1, N: 1},
		{Op: OpGet, Key: "k", Ranged: true, Off: 0, N: 0},
	} {
		if res := s.Apply(r); ownership.OutcomeOf(res.Err) != ownership.Failed {
			t.Errorf("%v: %v, want a failed request", r, res.Err)
		}
	}
	if res := s.Apply(Request{Op: OpPut, Key: "", Body: []byte("x")}); !errors.Is(res.Err, ownership.ErrInvalidKey) {
		t.Errorf("put of the empty key: %v, want ErrInvalidKey", res.Err)
	}
	if s.Len() != 0 {
		t.Fatalf("bad requests wrote %d objects", s.Len())
	}
}
