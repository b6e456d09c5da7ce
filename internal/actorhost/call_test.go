package actorhost_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// localCaller routes calls to actors of one host, at generation 1, and
// lets a test look at the bucket as each call leaves.
type localCaller struct {
	before func(to ownership.Actor) // called before each call is delivered
	calls  atomic.Int32
}

func (c *localCaller) Call(ctx context.Context, here *actorhost.Host, to ownership.Actor, req *actors.Request) (*actors.Response, error) {
	c.calls.Add(1)
	if c.before != nil {
		c.before(to)
	}
	return here.Deliver(ctx, to, 1, req)
}

func newCallHost(t *testing.T, b ownership.Bucket, o actorhost.Keeper, reg *actors.Registry, c *localCaller) *actorhost.Host {
	t.Helper()
	h := hostOf(t, actorhost.Config{Keeper: o, Bucket: b, Registry: reg, Caller: c})
	return h
}

// relay is a class whose actors, asked GET /to/<name>, write "sent" and
// call the relay actor <name> with the rest of the path; asked /put/<v>,
// they store v under "v"; asked anything else, they answer their stored v
// and how many requests they served.
func relay() actors.ClassFunc {
	return func(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
		served := 0
		if v, ok := st.Get("served"); ok {
			served, _ = strconv.Atoi(string(v))
		}
		served++
		if err := st.Put("served", []byte(strconv.Itoa(served))); err != nil {
			return nil, err
		}
		switch {
		case strings.HasPrefix(req.Path, "/to/"):
			name, rest, _ := strings.Cut(strings.TrimPrefix(req.Path, "/to/"), "/")
			if err := st.Put("sent", []byte(name)); err != nil {
				return nil, err
			}
			resp, err := actors.Call(ctx, ownership.Actor{Class: "relay", Name: name}, &actors.Request{Method: http.MethodGet, Path: "/" + rest})
			if err != nil {
				return actors.Text(http.StatusBadGateway, "call: "+err.Error()), nil
			}
			return actors.Text(resp.Status, "via "+name+": "+string(resp.Body)), nil
		case strings.HasPrefix(req.Path, "/put/"):
			if err := st.Put("v", []byte(strings.TrimPrefix(req.Path, "/put/"))); err != nil {
				return nil, err
			}
			return actors.Text(http.StatusOK, "put"), nil
		}
		v, _ := st.Get("v")
		return actors.Text(http.StatusOK, fmt.Sprintf("v=%s served=%d", v, served)), nil
	}
}

func relayRegistry(t *testing.T) *actors.Registry {
	t.Helper()
	reg := actors.NewRegistry()
	if err := reg.Register("relay", relay()); err != nil {
		t.Fatal(err)
	}
	return reg
}

func relayGet(t *testing.T, h *actorhost.Host, name, path string) (*actors.Response, error) {
	t.Helper()
	return h.Deliver(t.Context(), ownership.Actor{Class: "relay", Name: name}, 1, &actors.Request{Method: http.MethodGet, Path: path})
}

func TestCallReachesAnotherActor(t *testing.T) {
	c := &localCaller{}
	h := newCallHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, relayRegistry(t), c)
	if resp, err := relayGet(t, h, "b", "/put/42"); err != nil || resp.Status != http.StatusOK {
		t.Fatalf("put: %v %v", resp, err)
	}
	resp, err := relayGet(t, h, "a", "/to/b/")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(resp.Body)), "via b: v=42 served=2"; resp.Status != http.StatusOK || got != want {
		t.Fatalf("call answered %d %q; want 200 %q", resp.Status, got, want)
	}
	// A chain through three actors, each an event of its own.
	resp, err = relayGet(t, h, "a", "/to/c/to/b/")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(resp.Body)), "via c: via b: v=42 served=3"; got != want {
		t.Fatalf("chain answered %q; want %q", got, want)
	}
}

// TestCallCommitsFirst: what the caller wrote, in earlier events and in the
// calling event before the call, is durable in the bucket before the
// callee runs.
func TestCallCommitsFirst(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	a := ownership.Actor{Class: "relay", Name: "a"}
	var seen []string
	c := &localCaller{before: func(ownership.Actor) {
		obj, err := b.Get(context.Background(), actorstore.StateKey(a))
		if err != nil {
			seen = append(seen, "error: "+err.Error())
			return
		}
		seen = append(seen, string(obj.Body))
	}}
	h := newCallHost(t, b, &fakeKeeper{}, relayRegistry(t), c)
	if _, err := relayGet(t, h, "a", "/put/7"); err != nil {
		t.Fatal(err)
	}
	if _, err := relayGet(t, h, "a", "/to/b/"); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 {
		t.Fatalf("callee saw %d calls; want 1", len(seen))
	}
	for _, want := range []string{"v", "7", "sent", "served"} {
		if !strings.Contains(seen[0], want) {
			t.Fatalf("caller's state as the call left lacks %q: %q", want, seen[0])
		}
	}
	// The writes after the call (none here) and the event's end commit as
	// usual: the caller's state is whole afterwards.
	resp, err := relayGet(t, h, "a", "/")
	if err != nil || !strings.Contains(string(resp.Body), "v=7 served=3") {
		t.Fatalf("caller after the call: %v %v", resp, err)
	}
}

func TestCallCycleRefused(t *testing.T) {
	c := &localCaller{}
	h := newCallHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, relayRegistry(t), c)
	for _, tc := range []struct{ path, want string }{
		{"/to/a/", "call: actor call cycle: relay/a"},             // itself
		{"/to/b/to/a/", "via b: call: actor call cycle: relay/a"}, // through another
	} {
		resp, err := relayGet(t, h, "a", tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(resp.Body), tc.want) {
			t.Fatalf("%s answered %q; want it to start with %q", tc.path, resp.Body, tc.want)
		}
	}
	// A chain deeper than MaxCallDepth is refused at its end.
	path := ""
	for i := range actors.MaxCallDepth + 2 {
		path += fmt.Sprintf("/to/n%d", i)
	}
	resp, err := relayGet(t, h, "start", path+"/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Body), "chain deeper than") {
		t.Fatalf("deep chain answered %q", resp.Body)
	}
}

func TestCallOutsideEvent(t *testing.T) {
	_, err := actors.Call(t.Context(), ownership.Actor{Class: "relay", Name: "a"}, &actors.Request{Method: http.MethodGet})
	if !errors.Is(err, actors.ErrNotInEvent) {
		t.Fatalf("call outside an event: %v; want ErrNotInEvent", err)
	}
}

// TestCallRefusedWhenHoldMayNotAct: a caller whose hold may no longer act
// sends nothing. Its writes before the call are durable, so its answer (the
// class's, to the failed call) is released.
func TestCallRefusedWhenHoldMayNotAct(t *testing.T) {
	o := &fakeKeeper{}
	c := &localCaller{before: func(to ownership.Actor) {
		if to.Name == "b" {
			t.Error("the call left a hold that may not act")
		}
	}}
	h := newCallHost(t, memstore.New(memstore.Faults{}), o, relayRegistry(t), c)
	if _, err := relayGet(t, h, "a", "/put/1"); err != nil {
		t.Fatal(err)
	}
	o.revoke(1)
	resp, err := relayGet(t, h, "a", "/to/b/")
	if err != nil || resp.Status != http.StatusBadGateway || !strings.Contains(string(resp.Body), "hold no longer live") {
		t.Fatalf("event of a revoked hold: %v %v; want the class's 502 for its refused call", resp, err)
	}
}

// keyFailBucket fails the calls on one key while fail is set: a write is
// refused (412) while refuse is set too, and otherwise has no answer
// (having landed first, with land), as has a read; with once, only the
// first write fails, and fail is cleared with it.
type keyFailBucket struct {
	ownership.Bucket
	key          string
	land, once   bool
	fail, refuse atomic.Bool
}

func (b *keyFailBucket) Get(ctx context.Context, key string) (ownership.Object, error) {
	if key == b.key && b.fail.Load() && !b.refuse.Load() {
		return ownership.Object{}, fmt.Errorf("get %s: %w", key, ownership.ErrUnknownOutcome)
	}
	return b.Bucket.Get(ctx, key)
}

func (b *keyFailBucket) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	if key == b.key && b.fail.Load() {
		if b.once {
			b.fail.Store(false)
		}
		if b.refuse.Load() {
			return "", fmt.Errorf("put %s: %w", key, ownership.ErrPrecondition)
		}
		if b.land {
			if _, err := b.Bucket.Put(ctx, key, body, cond); err != nil {
				return "", err
			}
		}
		return "", fmt.Errorf("put %s: %w", key, ownership.ErrUnknownOutcome)
	}
	return b.Bucket.Put(ctx, key, body, cond)
}

// TestCallCommitFailureFailsEvent: a commit point that does not land fails
// the call and the event, whatever the class answers, and nothing of the
// event is kept. Its outcome is unknown when the commit's is (it may still
// land), and it is refused when the commit was refused.
func TestCallCommitFailureFailsEvent(t *testing.T) {
	a := ownership.Actor{Class: "relay", Name: "a"}
	b := &keyFailBucket{Bucket: memstore.New(memstore.Faults{}), key: actorstore.StateKey(a)}
	c := &localCaller{}
	h := newCallHost(t, b, &fakeKeeper{}, relayRegistry(t), c)
	if _, err := relayGet(t, h, "a", "/put/1"); err != nil {
		t.Fatal(err)
	}
	b.fail.Store(true)
	if _, err := relayGet(t, h, "a", "/to/b/"); !errors.Is(err, actors.ErrOutcomeUnknown) {
		t.Fatalf("event whose commit point had no answer: %v; want outcome unknown", err)
	}
	b.refuse.Store(true)
	if _, err := relayGet(t, h, "a", "/to/b/"); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("event whose commit point was refused: %v; want unavailable", err)
	}
	if n := c.calls.Load(); n != 0 {
		t.Fatalf("%d calls left; want none", n)
	}
	b.fail.Store(false)
	b.refuse.Store(false)
	resp, err := relayGet(t, h, "a", "/")
	if err != nil || !strings.Contains(string(resp.Body), "v=1 served=2") {
		t.Fatalf("caller after the failed event: %v %v; want v=1 served=2", resp, err)
	}
}

// TestCallsUnderLoad: many callers call one callee at once; every call is
// answered and counted once.
func TestCallsUnderLoad(t *testing.T) {
	c := &localCaller{}
	h := newCallHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, relayRegistry(t), c)
	const callers, rounds = 8, 10
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for range rounds {
				resp, err := relayGet(t, h, fmt.Sprintf("c%d", i), "/to/hub/")
				if err != nil || resp.Status != http.StatusOK {
					t.Errorf("caller %d: %v %v", i, resp, err)
					return
				}
			}
		})
	}
	wg.Wait()
	resp, err := relayGet(t, h, "hub", "/")
	if err != nil || !strings.Contains(string(resp.Body), fmt.Sprintf("served=%d", callers*rounds+1)) {
		t.Fatalf("hub: %v %v; want served=%d", resp, err, callers*rounds+1)
	}
}
