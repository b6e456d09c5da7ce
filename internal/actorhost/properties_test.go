package actorhost_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// The four properties of docs/PROTOCOL.md §6, as they hold for the layout of
// one state object per actor. Properties 1 and 2 are also checked from
// ground truth by the simulation (tests/sim/storage.go) under lost and late
// writes, crashes, drains and moves; the acquisition's seal is tested in
// ownership/seal_test.go.

// countingBucket counts the calls that reach a bucket.
type countingBucket struct {
	ownership.Bucket
	gets, puts, deletes, lists atomic.Int64
}

func (b *countingBucket) Get(ctx context.Context, key string) (ownership.Object, error) {
	b.gets.Add(1)
	return b.Bucket.Get(ctx, key)
}

func (b *countingBucket) Put(ctx context.Context, key string, body []byte, c ownership.Condition) (ownership.ETag, error) {
	b.puts.Add(1)
	return b.Bucket.Put(ctx, key, body, c)
}

func (b *countingBucket) Delete(ctx context.Context, key string, c ownership.Condition) error {
	b.deletes.Add(1)
	return b.Bucket.Delete(ctx, key, c)
}

func (b *countingBucket) List(ctx context.Context, prefix, startAfter string, limit int) (ownership.ListPage, error) {
	b.lists.Add(1)
	return b.Bucket.List(ctx, prefix, startAfter, limit)
}

func (b *countingBucket) reset() {
	b.gets.Store(0)
	b.puts.Store(0)
	b.deletes.Store(0)
	b.lists.Store(0)
}

// Property 1: an acknowledged write survives the hold moving on, whatever
// the hold that follows (another host, a later generation).
func TestPropertyAcknowledgedWritesSurvive(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	for gen := ownership.Generation(1); gen <= 5; gen++ {
		h := newHost(t, b, &fakeKeeper{}, nil)
		mustCount(t, h, gen, strconv.Itoa(2*int(gen)-1))
		mustCount(t, h, gen, strconv.Itoa(2*int(gen)))
		if err := h.HibernateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// Property 2: a superseded hold's write never becomes visible; its resident
// actor, finding the state sealed above its generation, ends its hold.
func TestPropertySupersededHoldEnds(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	o := &fakeKeeper{}
	old := newHost(t, b, o, nil)
	mustCount(t, old, 1, "1")
	old.StopActing(room, 1) // the resident actor drops its state
	newer := newHost(t, b, &fakeKeeper{}, nil)
	mustCount(t, newer, 2, "2")

	// A stale grant at 1 reaches a fresh resident actor of the old host: it
	// loads, finds the state at 2, refuses and ends its hold.
	_, err := count(t, old, 1, "")
	if !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("superseded event: err = %v, want unavailable", err)
	}
	o.mu.Lock()
	ended := slices.Clone(o.ended)
	o.mu.Unlock()
	if !slices.Equal(ended, []ownership.Generation{1}) {
		t.Fatalf("holds ended: %v, want [1]", ended)
	}
	obj, err := b.Get(t.Context(), actorstore.StateKey(room))
	if err != nil {
		t.Fatal(err)
	}
	if h, _, err := ownership.DecodeState(obj.Body); err != nil || h.Gen != 2 {
		t.Fatalf("state %q (%v), want generation 2's", obj.Body, err)
	}
	mustCount(t, newer, 2, "3")
}

// Property 3: what superseded holds wrote is not left behind. Each commit
// replaces the actor's one object, so after many holds and commits the
// actor's prefix holds exactly that object.
func TestPropertyNothingLeftBehind(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	for gen := ownership.Generation(1); gen <= 20; gen++ {
		h := newHost(t, b, &fakeKeeper{}, nil)
		mustCount(t, h, gen, strconv.Itoa(int(gen)))
		if err := h.HibernateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	page, err := b.List(t.Context(), ownership.ActorsPrefix, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 1 || page.Entries[0].Key != actorstore.StateKey(room) {
		t.Fatalf("objects under %s after 20 holds: %v, want only %s", ownership.ActorsPrefix, page.Entries, actorstore.StateKey(room))
	}
}

// Property 4: the reads after a wake cost a bounded number of requests,
// whatever the history: one read of the state object, then the event's
// commit (and the hold's own seal when no acquisition sealed it).
func TestPropertyWakeReadsAreBounded(t *testing.T) {
	for _, history := range []int{1, 50} {
		b := &countingBucket{Bucket: memstore.New(memstore.Faults{})}
		h := newHost(t, b, &fakeKeeper{}, nil)
		for i := 1; i <= history; i++ {
			mustCount(t, h, 1, strconv.Itoa(i))
		}
		if err := h.HibernateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.reset()
		woken := newHost(t, b, &fakeKeeper{}, nil)
		mustCount(t, woken, 2, strconv.Itoa(history+1))
		if g, p, l := b.gets.Load(), b.puts.Load(), b.lists.Load(); g != 1 || p != 2 || l != 0 {
			t.Fatalf("after %d events, a wake cost %d gets, %d puts, %d lists; want 1, 2 (fence, commit), 0", history, g, p, l)
		}
	}
}
