package actorhost_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
	"github.com/wasmkeep/wasmkeep/supervisors"
)

// panickyKeeper panics in MayAct while armed: outside the class's per-event
// recover, so the panic reaches the resident actor's supervisor.
type panickyKeeper struct {
	fakeKeeper
	armed atomic.Bool
}

func (o *panickyKeeper) MayAct(a ownership.Actor, gen ownership.Generation) bool {
	if o.armed.Load() {
		panic("keeper broke")
	}
	return o.fakeKeeper.MayAct(a, gen)
}

func (o *panickyKeeper) MayActNow(a ownership.Actor, gen ownership.Generation) (bool, bool) {
	if o.armed.Load() {
		panic("keeper broke")
	}
	return o.fakeKeeper.MayActNow(a, gen)
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "counter" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s for class counter", name)
	return 0
}

// TestSupervisedResident: a panic outside the per-event recover (here at
// the output gate of a read, which asks the keeper) restarts the resident
// actor, whose restart refuses the read (it took no effect) and which
// reloads its state from the bucket; past the policy the actor is stopped
// and the director drops the actor; the next event spawns a new one.
func TestSupervisedResident(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := supervisors.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	sup, err := supervisors.New(m, supervisors.Policy{MaxRestarts: 1, Within: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hibernated := make(chan string, 16)
	o := &panickyKeeper{}
	h, err := actorhost.New(actorhost.Config{
		Keeper: o, Bucket: memstore.New(memstore.Faults{}), Registry: actors.BuiltIn(), System: keeper.NewSystem(nil),
		Supervision: sup,
		OnHibernate: func(_ ownership.Actor, _ ownership.Generation, reason string) { hibernated <- reason },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.HibernateAll(context.Background()); err != nil {
			t.Error(err)
		}
	})
	fail := func() {
		t.Helper()
		o.armed.Store(true)
		defer o.armed.Store(false)
		if _, err := h.Deliver(t.Context(), room, 1, get("read")); !errors.Is(err, actors.ErrUnavailable) {
			t.Fatalf("event that panicked: %v, want ErrUnavailable", err)
		}
	}

	mustCount(t, h, 1, "1")
	mustCount(t, h, 1, "2")
	fail()
	if got := counterValue(t, reg, "wasmkeep_actor_restarts_total"); got != 1 {
		t.Fatalf("restarts: %v", got)
	}
	mustCount(t, h, 1, "3") // restarted empty, reloaded from the bucket
	fail()                  // the second failure within the hour: stopped
	if reason := <-hibernated; reason != "stopped by supervisor" {
		t.Fatalf("actor left memory: %q", reason)
	}
	if n := h.Resident(); n != 0 {
		t.Fatalf("resident after the stop: %d", n)
	}
	if got := counterValue(t, reg, "wasmkeep_actor_restarts_total"); got != 1 {
		t.Fatalf("restarts after the stop: %v", got)
	}
	if got := counterValue(t, reg, "wasmkeep_actor_failures_total"); got != 2 {
		t.Fatalf("failures: %v", got)
	}
	mustCount(t, h, 1, "4") // spawned anew
}

// TestStoppedResidentAnswersQueuedEvents: when the supervisor stops a
// resident actor at its first failure, every event queued behind the one that
// failed is answered (unavailable), none is left waiting.
func TestStoppedResidentAnswersQueuedEvents(t *testing.T) {
	m, err := supervisors.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	sup, err := supervisors.New(m, supervisors.Policy{MaxRestarts: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := &panickyKeeper{}
	o.armed.Store(true)
	h, err := actorhost.New(actorhost.Config{
		Keeper: o, Bucket: memstore.New(memstore.Faults{}), Registry: actors.BuiltIn(), System: keeper.NewSystem(nil),
		Supervision: sup,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.HibernateAll(context.Background()) })
	// A deadline only so that a regression fails instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const events = 8
	errs := make(chan error, events)
	for range events {
		go func() {
			_, err := h.Deliver(ctx, room, 1, get(""))
			errs <- err
		}()
	}
	for range events {
		if err := <-errs; !errors.Is(err, actors.ErrUnavailable) {
			t.Fatalf("an event behind a failed resident actor got %v, want ErrUnavailable", err)
		}
	}
}
