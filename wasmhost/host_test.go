package wasmhost

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// anyKeeper lets every hold act.
type anyKeeper struct{}

func (anyKeeper) Acquire(context.Context, ownership.Actor) (keeper.Decision, error) {
	return keeper.Decision{Verdict: keeper.Granted, Gen: 1}, nil
}
func (anyKeeper) MayAct(ownership.Actor, ownership.Generation) bool            { return true }
func (anyKeeper) MayActNow(ownership.Actor, ownership.Generation) (bool, bool) { return true, true }

// RequestMayAct is never asked: MayActNow always knows.
func (anyKeeper) RequestMayAct(ownership.Actor, ownership.Generation, *actor.PID, uint64) {
	panic("RequestMayAct: MayActNow always knows")
}
func (anyKeeper) Idle(ownership.Actor, ownership.Generation)              {}
func (anyKeeper) HoldEnded(ownership.Actor, ownership.Generation, string) {}
func (anyKeeper) DamageFound(string, error)                               {}

// TestClassInHost runs the wasm counter as a registered class of an
// actorhost.Host: durable counts per actor, one guest per resident actor (the
// probe's in-memory event count tells), and a fresh guest after a guest
// error.
func TestClassInHost(t *testing.T) {
	r := newRuntime(t, Config{})
	ctx := context.Background()
	counter := mustCompile(t, r, "counter-wasm", guest(t, counterGuest))
	probe := mustCompile(t, r, "probe", guest(t, probeGuest))
	reg := actors.NewRegistry()
	if err := reg.Register("counter-wasm", counter); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register("probe", probe); err != nil {
		t.Fatal(err)
	}
	bucket := memstore.New(memstore.Faults{})
	h, err := actorhost.New(actorhost.Config{Keeper: anyKeeper{}, Bucket: bucket, Registry: reg, System: keeper.NewSystem(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.HibernateAll(ctx) }() // the host current at the end
	deliver := func(a ownership.Actor, path string) *actors.Response {
		t.Helper()
		resp, err := h.Deliver(t.Context(), a, 1, get(path, ""))
		if err != nil {
			t.Fatalf("%v %s: %v", a, path, err)
		}
		return resp
	}
	expect := func(a ownership.Actor, path, want string) {
		t.Helper()
		if resp := deliver(a, path); resp.Status != http.StatusOK || strings.TrimSpace(string(resp.Body)) != want {
			t.Fatalf("%v %s = %d %q, want %q", a, path, resp.Status, resp.Body, want)
		}
	}
	room, hall := ownership.Actor{Class: "counter-wasm", Name: "room"}, ownership.Actor{Class: "counter-wasm", Name: "hall"}
	expect(room, "", "1")
	expect(room, "", "2")
	expect(hall, "", "1")
	expect(room, "", "3")
	// Hibernation drops the guests; the counts are in the bucket.
	if err := h.HibernateAll(ctx); err != nil {
		t.Fatal(err)
	}
	h, err = actorhost.New(actorhost.Config{Keeper: anyKeeper{}, Bucket: bucket, Registry: reg, System: keeper.NewSystem(nil)})
	if err != nil {
		t.Fatal(err)
	}
	expect(room, "", "4")

	a, b := ownership.Actor{Class: "probe", Name: "a"}, ownership.Actor{Class: "probe", Name: "b"}
	expect(a, "/events", "1")
	expect(a, "/events", "2")
	expect(b, "/events", "1") // its own guest
	if resp := deliver(a, "/panic"); resp.Status != http.StatusInternalServerError {
		t.Fatalf("panic = %d, want 500", resp.Status)
	}
	expect(a, "/events", "1") // a fresh guest
	expect(b, "/events", "2")
}

// probeRegistry compiles the probe guest on a runtime of cfg and returns a
// registry serving it as class "probe".
func probeRegistry(t *testing.T, cfg Config) *actors.Registry {
	t.Helper()
	r := newRuntime(t, cfg)
	probe := mustCompile(t, r, "probe", guest(t, probeGuest))
	reg := actors.NewRegistry()
	if err := reg.Register("probe", probe); err != nil {
		t.Fatal(err)
	}
	return reg
}
