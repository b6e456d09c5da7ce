package actors_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

func (o *fakeKeeper) idled() []ownership.Generation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.idle)
}

// TestIdleTimeout: an actor without events for the idle timeout hibernates
// and tells the keeper; one with events does not. Time is synctest's.
func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &fakeKeeper{}
		h, err := actors.NewHost(actors.Config{
			Keeper: o, Bucket: memstore.New(memstore.Faults{}), Registry: actors.BuiltIn(),
			System: keeper.NewSystem(nil), IdleTimeout: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		mustCount(t, h, 3, "1")
		time.Sleep(9 * time.Second)
		mustCount(t, h, 3, "2") // restarts the idle timer
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if got := o.idled(); len(got) != 0 || h.Resident() != 1 {
			t.Fatalf("before the timeout: idle %v, resident %d", got, h.Resident())
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := o.idled(); !slices.Equal(got, []ownership.Generation{3}) || h.Resident() != 0 {
			t.Fatalf("after the timeout: idle %v, resident %d; want [3], 0", got, h.Resident())
		}
		mustCount(t, h, 4, "3") // wakes from the bucket
		if err := h.HibernateAll(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMaxResident: past the bound, the least recently used actor
// hibernates.
func TestMaxResident(t *testing.T) {
	o := &fakeKeeper{}
	hibernated := make(chan string, 4)
	h, err := actors.NewHost(actors.Config{
		Keeper: o, Bucket: memstore.New(memstore.Faults{}), Registry: actors.BuiltIn(),
		System: keeper.NewSystem(nil), MaxResident: 2,
		OnHibernate: func(a ownership.Actor, _ ownership.Generation, reason string) { hibernated <- a.Name + " " + reason },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.HibernateAll(context.Background())
	for _, name := range []string{"a", "b", "a", "c"} {
		if _, err := h.Deliver(t.Context(), ownership.Actor{Class: "counter", Name: name}, 1, get("")); err != nil {
			t.Fatal(err)
		}
	}
	if got := <-hibernated; got != "b evicted" {
		t.Fatalf("hibernated %q, want b evicted", got)
	}
	if n := h.Resident(); n != 2 {
		t.Fatalf("resident %d, want 2", n)
	}
}
