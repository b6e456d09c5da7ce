package actorhost_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
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
		h, err := actorhost.New(actorhost.Config{
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
	h, err := actorhost.New(actorhost.Config{
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

// mergeGate is a bucket whose writes of the bulk actor's runs over 10
// KiB (a merge's, in the tests below, where every flush is about 7 KiB)
// wait until release (or their own context ends); blocked is closed when
// the first waits.
type mergeGate struct {
	ownership.Bucket
	blocked, open chan struct{}
	stop, opened  sync.Once
}

func newMergeGate() *mergeGate {
	return &mergeGate{Bucket: memstore.New(memstore.Faults{}), blocked: make(chan struct{}), open: make(chan struct{})}
}

func (g *mergeGate) release() { g.opened.Do(func() { close(g.open) }) }

func (g *mergeGate) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	if strings.HasPrefix(key, ownership.RunsPrefix(bulkActor)) && len(body) > 10<<10 {
		g.stop.Do(func() { close(g.blocked) })
		select {
		case <-g.open:
		case <-ctx.Done(): // the write's own timeout
		}
	}
	return g.Bucket.Put(ctx, key, body, cond)
}

// TestIdleWaitsForMerge: an actor whose writes called for a merge of its
// runs stays resident past its idle timeout until the merge is back, and
// then hibernates with a head that lists the merged run, not the runs it
// replaced. Time is synctest's.
func TestIdleWaitsForMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &fakeKeeper{}
		// Two commits flush a run each, and call for a merge.
		g := newMergeGate()
		defer g.release() // a failed test leaves no write waiting
		reg := actors.BuiltIn()
		if err := reg.Register("bulk", bulk{}); err != nil {
			t.Fatal(err)
		}
		h, err := actorhost.New(actorhost.Config{Keeper: o, Bucket: g, Registry: reg,
			System: keeper.NewSystem(nil), IdleTimeout: time.Second, IOTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer h.HibernateAll(context.Background())
		m := model{}
		m.fill(t, h, 1, 0, 20, 300, "a")
		m.fill(t, h, 1, 20, 20, 300, "b")
		<-g.blocked
		// Five idle timeouts, within the merge's I/O timeout.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := o.idled(); len(got) != 0 || h.Resident() != 1 {
			t.Fatalf("5 s into the merge: idle %v, resident %d; want it resident", got, h.Resident())
		}
		g.release()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := o.idled(); !slices.Equal(got, []ownership.Generation{1}) || h.Resident() != 0 {
			t.Fatalf("after the merge and the idle timeout: idle %v, resident %d; want [1], 0", got, h.Resident())
		}
		if hd := head(t, g); hd.Runs != 1 {
			t.Fatalf("the head lists %d runs %v, want the one merged run", hd.Runs, hd.Listed)
		}
		m.check(t, h, 2)
	})
}

// TestCommitWaitsForMerge: an actor whose runs outran its merge (MaxRuns
// of them, the merge stuck) holds the answer of its next event that would
// flush one more, and counts the stall; the answer goes out once the merge
// is back, and nothing is lost. Time is synctest's.
func TestCommitWaitsForMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newMergeGate()
		defer g.release() // a failed test leaves no write waiting
		reg := actors.BuiltIn()
		if err := reg.Register("bulk", bulk{}); err != nil {
			t.Fatal(err)
		}
		h, err := actorhost.New(actorhost.Config{Keeper: &fakeKeeper{}, Bucket: g, Registry: reg, System: keeper.NewSystem(nil)})
		if err != nil {
			t.Fatal(err)
		}
		defer h.HibernateAll(context.Background())
		m := model{}
		// Each fill flushes a run of about 7 KiB; the first two call for
		// a merge, which gets stuck, and the runs pile up.
		for i := range actorhost.MaxRuns {
			m.fill(t, h, 1, i*20, 20, 300, "a")
			if i == 1 {
				<-g.blocked
			}
		}
		if n := h.StorageStats().Stalls; n != 0 {
			t.Fatalf("%d stalls before the runs reached MaxRuns", n)
		}
		// One more fill, from another goroutine: its answer is held.
		from := actorhost.MaxRuns * 20
		r := &actors.Request{Method: http.MethodPost, Header: http.Header{},
			Query: url.Values{"n": {"20"}, "size": {"300"}, "from": {strconv.Itoa(from)}, "tag": {"b"}}}
		answered := make(chan error, 1)
		go func() {
			resp, err := h.Deliver(t.Context(), bulkActor, 1, r)
			if err == nil && resp.Status != http.StatusOK {
				err = fmt.Errorf("status %d: %s", resp.Status, resp.Body)
			}
			answered <- err
		}()
		synctest.Wait()
		select {
		case err := <-answered:
			t.Fatalf("the event past MaxRuns was answered (%v) while the merge was stuck", err)
		default:
		}
		if n := h.StorageStats().Stalls; n != 1 {
			t.Fatalf("%d stalls, want 1", n)
		}
		g.release()
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
		for i := from; i < from+20; i++ {
			k := fmt.Sprintf("k%07d", i)
			m[k] = bulkValue(k, "b", 300)
		}
		m.check(t, h, 1)
		// The merges the commits started are done before the stop: one
		// cancelled by it would send its result to an actor that is gone,
		// and the actor system's dead letters leave a goroutine behind
		// that outlives the bubble.
		synctest.Wait()
		if err := h.HibernateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
		h2, err := actorhost.New(actorhost.Config{Keeper: &fakeKeeper{}, Bucket: g, Registry: reg, System: keeper.NewSystem(nil)})
		if err != nil {
			t.Fatal(err)
		}
		defer h2.HibernateAll(context.Background())
		m.check(t, h2, 2)
	})
}
