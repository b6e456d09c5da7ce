package actorhost_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// keyed delivers req to a at gen with the client's key k.
func keyed(t *testing.T, h *actorhost.Host, a ownership.Actor, gen ownership.Generation, k string, req *actors.Request) (*actors.Response, error) {
	t.Helper()
	return h.Deliver(actorhost.WithEventKey(t.Context(), actorhost.ClientKey(k, 0)), a, gen, req)
}

func mustKeyed(t *testing.T, h *actorhost.Host, gen ownership.Generation, k string, req *actors.Request, wantStatus int, wantBody string) *actors.Response {
	t.Helper()
	resp, err := keyed(t, h, room, gen, k, req)
	if err != nil {
		t.Fatalf("key %q: %v", k, err)
	}
	if resp.Status != wantStatus || strings.TrimSpace(string(resp.Body)) != wantBody {
		t.Fatalf("key %q: %d %q, want %d %q", k, resp.Status, resp.Body, wantStatus, wantBody)
	}
	return resp
}

// TestKeyRunsOnce: an event with a key runs once; the same request with
// the key again gets the first answer, marked replayed, without running,
// also under a later hold on another host; with another request it gets
// 422.
func TestKeyRunsOnce(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := newHost(t, b, &fakeKeeper{}, nil)
	first := mustKeyed(t, h, 1, "k1", get(""), 200, "1")
	if first.Header.Get(actorhost.ReplayedHeader) != "" {
		t.Fatalf("the first answer is marked replayed")
	}
	again := mustKeyed(t, h, 1, "k1", get(""), 200, "1")
	if again.Header.Get(actorhost.ReplayedHeader) != "true" {
		t.Fatalf("the second answer is not marked replayed: %v", again.Header)
	}
	mustKeyed(t, h, 1, "k2", get(""), 200, "2")
	mustCount(t, h, 1, "3") // no key: runs

	// Another host, a later hold: what the actor keeps came with its state.
	if err := h.HibernateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	later := newHost(t, b, &fakeKeeper{}, nil)
	mustKeyed(t, later, 2, "k1", get(""), 200, "1")
	mustKeyed(t, later, 2, "k2", get(""), 200, "2")
	mustKeyed(t, later, 2, "k1", get("read"), http.StatusUnprocessableEntity,
		"this Idempotency-Key was first used with another request (method, path, query or body)")
	mustCount(t, later, 2, "4")
}

// TestKeyWhileRunning: a request whose key names an event that still runs
// is answered 409, marked running, and does not run.
func TestKeyWhileRunning(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	reg := actors.NewRegistry()
	if err := reg.Register("slow", actors.ClassFunc(func(_ context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
		n := 0
		if v, ok := st.Get("n"); ok {
			n, _ = strconv.Atoi(string(v))
		}
		if req.Query.Has("wait") {
			entered <- struct{}{}
			<-release
		}
		if err := st.Put("n", []byte(strconv.Itoa(n+1))); err != nil {
			return nil, err
		}
		return actors.Text(http.StatusOK, strconv.Itoa(n+1)), nil
	})); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, reg)
	slow := ownership.Actor{Class: "slow", Name: "s"}
	done := make(chan *actors.Response, 1)
	go func() {
		resp, err := keyed(t, h, slow, 1, "k", get("wait"))
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	<-entered
	resp, err := keyed(t, h, slow, 1, "k", get("wait"))
	if err != nil || resp.Status != http.StatusConflict || resp.Header.Get(actorhost.OutcomeHeader) != "running" {
		t.Fatalf("the same key while the first runs: %v %v, want 409 running", resp, err)
	}
	close(release)
	if r := <-done; r.Status != 200 || string(r.Body) != "1" {
		t.Fatalf("first: %d %q", r.Status, r.Body)
	}
	resp, err = keyed(t, h, slow, 1, "k", get("wait"))
	if err != nil || string(resp.Body) != "1" || resp.Header.Get(actorhost.ReplayedHeader) != "true" {
		t.Fatalf("the key once the first was answered: %v %v, want its answer replayed", resp, err)
	}
}

// TestKeyRollbackAndFailure: a rolled-back event's answer is remembered
// (its writes are not); a failed event's is not, and the key runs again.
func TestKeyRollbackAndFailure(t *testing.T) {
	fail := true
	reg := actors.NewRegistry()
	if err := reg.Register("seats", actors.ClassFunc(func(_ context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
		if err := st.Put(req.Path, []byte("taken")); err != nil {
			return nil, err
		}
		switch {
		case req.Query.Has("rollback"):
			return nil, actors.Rollback(actors.Text(http.StatusConflict, "no"))
		case req.Query.Has("fail") && fail:
			return nil, errors.New("broke")
		}
		n, _ := st.List(actors.ListOptions{})
		return actors.Text(http.StatusOK, strconv.Itoa(len(n))), nil
	})); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, reg)
	a := ownership.Actor{Class: "seats", Name: "s"}
	req := func(path, q string) *actors.Request {
		r := get(q)
		r.Path = path
		return r
	}
	for range 2 {
		resp, err := keyed(t, h, a, 1, "rb", req("/1A", "rollback"))
		if err != nil || resp.Status != http.StatusConflict {
			t.Fatalf("rolled back: %v %v", resp, err)
		}
	}
	for range 2 {
		resp, err := keyed(t, h, a, 1, "f", req("/1B", "fail"))
		if err != nil || resp.Status != http.StatusInternalServerError || resp.Header.Get(actorhost.ReplayedHeader) != "" {
			t.Fatalf("failed: %v %v, want a 500 run each time", resp, err)
		}
	}
	fail = false
	resp, err := keyed(t, h, a, 1, "f", req("/1B", "fail"))
	if err != nil || resp.Status != http.StatusOK || string(resp.Body) != "1" {
		t.Fatalf("the failed key run again: %v %v, want 200 and one seat taken (1A was rolled back)", resp, err)
	}
}

// TestKeyLargeAnswer: an answer over one stored value is kept in parts,
// and replayed whole.
func TestKeyLargeAnswer(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320,000 bytes: three values
	reg := actors.NewRegistry()
	runs := 0
	if err := reg.Register("big", actors.ClassFunc(func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
		runs++
		return &actors.Response{Status: http.StatusCreated, Header: http.Header{"X-Kind": {"big"}}, Body: body}, st.Put("x", []byte("y"))
	})); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, reg)
	a := ownership.Actor{Class: "big", Name: "b"}
	for range 2 {
		resp, err := keyed(t, h, a, 1, "k", get(""))
		if err != nil || resp.Status != http.StatusCreated || !bytes.Equal(resp.Body, body) || resp.Header.Get("X-Kind") != "big" {
			t.Fatalf("large answer: %v", err)
		}
	}
	if runs != 1 {
		t.Fatalf("the class ran %d times, want once", runs)
	}
}

// TestKeysSurviveDeleteAll: DeleteAll removes the class's keys, not the
// event keys the actor remembers.
func TestKeysSurviveDeleteAll(t *testing.T) {
	reg := actors.NewRegistry()
	if err := reg.Register("wipe", actors.ClassFunc(func(_ context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
		if req.Query.Has("wipe") {
			return actors.Text(http.StatusOK, "wiped"), actors.DeleteAll(st)
		}
		n := 0
		if v, ok := st.Get("n"); ok {
			n, _ = strconv.Atoi(string(v))
		}
		return actors.Text(http.StatusOK, strconv.Itoa(n+1)), st.Put("n", []byte(strconv.Itoa(n+1)))
	})); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, reg)
	a := ownership.Actor{Class: "wipe", Name: "w"}
	check := func(k, q, want string) {
		t.Helper()
		resp, err := keyed(t, h, a, 1, k, get(q))
		if err != nil || string(resp.Body) != want {
			t.Fatalf("key %s: %v %v, want %q", k, resp, err, want)
		}
	}
	check("a", "", "1")
	check("b", "", "2")
	check("w", "wipe", "wiped")
	check("a", "", "1") // remembered across the wipe
	check("c", "", "1") // the class's keys are gone
}

// TestNodeKeyOnlyWhenEffect: a node's key that must be kept only if the
// event took effect is not kept for a read, and is for a write; sent
// again (not fresh), the write is not run again: it is answered "outcome
// unknown", since a node's key keeps no answer.
func TestNodeKeyOnlyWhenEffect(t *testing.T) {
	h := newHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, nil)
	k := actorhost.NewNodeKey()
	k.Fresh = false
	deliver := func(q string) string {
		t.Helper()
		resp, err := h.Deliver(actorhost.WithEventKey(t.Context(), k), room, 1, get(q))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(resp.Body)) + " " + resp.Header.Get(actorhost.ReplayedHeader)
	}
	mustCount(t, h, 1, "1")
	if got := deliver("read"); got != "1 " {
		t.Fatalf("read with a node key: %q", got)
	}
	mustCount(t, h, 1, "2")
	if got := deliver("read"); got != "2 " {
		t.Fatalf("read again with the node key: %q, want it run (it was not kept)", got)
	}
	// The same key with the write: kept.
	w := actorhost.NewNodeKey()
	resp, err := h.Deliver(actorhost.WithEventKey(t.Context(), w), room, 1, get(""))
	if err != nil || strings.TrimSpace(string(resp.Body)) != "3" {
		t.Fatalf("write with a node key: %v %v", resp, err)
	}
	w.Fresh = false // sent again
	if _, err := h.Deliver(actorhost.WithEventKey(t.Context(), w), room, 1, get("")); !errors.Is(err, actors.ErrOutcomeUnknown) {
		t.Fatalf("the write's node key again: %v, want outcome unknown", err)
	}
	mustCount(t, h, 1, "4")
}

// TestTimedKeysEnd: timed keys (a node's, kept only for events that took
// effect) are ended once their window is over, in passes.
func TestTimedKeysEnd(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := newHost(t, b, &fakeKeeper{}, nil)
	old := actorhost.EventKey{Key: fmt.Sprintf("%012x", uint64(time.Now().Add(-time.Minute).UnixMilli())) + "AAAAAAAAAAAAAAAA", Node: true, Keep: time.Minute}
	if _, err := h.Deliver(actorhost.WithEventKey(t.Context(), old), room, 1, get("")); err != nil {
		t.Fatal(err)
	}
	for range 40 { // past a pass
		if _, err := h.Deliver(actorhost.WithEventKey(t.Context(), actorhost.NewNodeKey()), room, 1, get("")); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := h.Deliver(actorhost.WithEventKey(t.Context(), old), room, 1, get(""))
	if err != nil || strings.TrimSpace(string(resp.Body)) != "42" {
		t.Fatalf("the key whose time was over: %v %v, want it run again", resp, err)
	}
}

// TestKeyCommitUnknownThenRetry: an event whose commit has no answer, and
// whose actor cannot read its state to find out, is answered "outcome
// unknown"; a retry with its key runs it if the commit did not land, and
// answers the first answer if it did, so the counter counts it once
// either way.
func TestKeyCommitUnknownThenRetry(t *testing.T) {
	for _, landed := range []bool{false, true} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) {
			a := room
			b := &keyFailBucket{Bucket: memstore.New(memstore.Faults{}), key: actorstore.StateKey(a)}
			b.land = landed
			h := newHost(t, b, &fakeKeeper{}, nil)
			mustCount(t, h, 1, "1")
			b.fail.Store(true)
			if _, err := keyed(t, h, a, 1, "k", get("")); !errors.Is(err, actors.ErrOutcomeUnknown) {
				t.Fatalf("commit without an answer: %v, want outcome unknown", err)
			}
			b.fail.Store(false)
			mustKeyed(t, h, 1, "k", get(""), 200, "2")
			mustCount(t, h, 1, "3")
		})
	}
}

// TestKeyBound: an actor keeps at most MaxKeys keys, ending the oldest.
func TestKeyBound(t *testing.T) {
	h := hostOf(t, actorhost.Config{Bucket: memstore.New(memstore.Faults{}), Registry: actors.BuiltIn(), MaxKeys: 5})
	for i := range 10 {
		mustKeyed(t, h, 1, "k"+strconv.Itoa(i), get(""), 200, strconv.Itoa(i+1))
	}
	mustKeyed(t, h, 1, "k9", get(""), 200, "10")
	mustKeyed(t, h, 1, "k5", get(""), 200, "6")
	mustKeyed(t, h, 1, "k0", get(""), 200, "11") // ended: runs again
}

// TestLostCommitResolved: a commit that had no answer is read again: one
// that landed is a success; one that did not is fenced (its object written
// again as it was) and its event refused, and it can no longer land.
func TestLostCommitResolved(t *testing.T) {
	for _, landed := range []bool{false, true} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) {
			b := &keyFailBucket{Bucket: memstore.New(memstore.Faults{}), key: actorstore.StateKey(room), land: landed, once: true}
			h := newHost(t, b, &fakeKeeper{}, nil)
			mustCount(t, h, 1, "1")
			b.fail.Store(true)
			got, err := count(t, h, 1, "")
			switch {
			case landed && (err != nil || got != "2"):
				t.Fatalf("a commit that landed without an answer: %q %v, want 2", got, err)
			case !landed && !errors.Is(err, actors.ErrUnavailable):
				t.Fatalf("a commit that did not land: %q %v, want refused", got, err)
			}
			want := "2"
			if landed {
				want = "3"
			}
			mustCount(t, h, 1, want)
		})
	}
}
