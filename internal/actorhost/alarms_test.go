package actorhost_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// alarmClock sets its alarm "x", due now, on a request with ?set, and
// counts the alarm's firings.
type alarmClock struct{}

func (alarmClock) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if req.Query.Has("set") {
		if err := actors.SetAlarm(ctx, "x", time.Now()); err != nil {
			return nil, err
		}
	}
	return actors.Text(http.StatusOK, "ok"), st.Put("seen", []byte("1"))
}

func (alarmClock) HandleAlarm(_ context.Context, _ actors.Alarm, st actors.Storage) error {
	return st.Put("fired", []byte("1"))
}

// heldBucket holds back the writes of one key while hold is set: each is
// answered "outcome unknown" and kept, to land later (landHeld), as a
// write whose client gave up on it may still land in S3.
type heldBucket struct {
	ownership.Bucket
	key  string
	hold atomic.Bool

	mu   sync.Mutex
	held []heldPut
}

type heldPut struct {
	body []byte
	cond ownership.Condition
}

func (b *heldBucket) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	if key == b.key && b.hold.Load() {
		b.mu.Lock()
		b.held = append(b.held, heldPut{body: body, cond: cond})
		b.mu.Unlock()
		return "", fmt.Errorf("put %s: %w", key, ownership.ErrUnknownOutcome)
	}
	return b.Bucket.Put(ctx, key, body, cond)
}

// landHeld lands the writes held back, in the order they were sent, and
// returns what became of each.
func (b *heldBucket) landHeld(ctx context.Context) []error {
	b.mu.Lock()
	held := b.held
	b.held = nil
	b.mu.Unlock()
	var errs []error
	for _, p := range held {
		_, err := b.Bucket.Put(ctx, b.key, p.body, p.cond)
		errs = append(errs, err)
	}
	return errs
}

// TestAlarmGoneAfterAnUnknownCommit: an event sets an alarm and its
// commit has no answer, nor has the fence that would settle it. The
// alarm's delivery then finds the alarm gone from the state it reads
// again, and so its index entry may be deleted: the commit must no longer
// be able to land with the alarm, or the alarm would be in the actor's
// state with no entry, never to fire. The reload seals the state
// (ownership.JudgeReload), and the late commit is refused.
func TestAlarmGoneAfterAnUnknownCommit(t *testing.T) {
	for _, first := range []bool{false, true} {
		t.Run(fmt.Sprintf("first-commit=%v", first), func(t *testing.T) {
			a := ownership.Actor{Class: "clock", Name: "c"}
			b := &heldBucket{Bucket: memstore.New(memstore.Faults{}), key: actorstore.StateKey(a)}
			reg := actors.NewRegistry()
			if err := reg.Register("clock", alarmClock{}); err != nil {
				t.Fatal(err)
			}
			h := newHost(t, b, &fakeKeeper{}, reg)
			deliver := func(q string) error {
				_, err := h.Deliver(t.Context(), a, 1, get(q))
				return err
			}
			if !first {
				if err := deliver(""); err != nil {
					t.Fatal(err)
				}
			}
			b.hold.Store(true)
			if err := deliver("set"); !errors.Is(err, actors.ErrOutcomeUnknown) {
				t.Fatalf("an event whose commit had no answer: %v, want outcome unknown", err)
			}
			b.hold.Store(false)

			page, err := b.List(t.Context(), actorstore.IndexPrefix, "", 0)
			if err != nil || len(page.Entries) != 1 {
				t.Fatalf("alarm index: %+v %v, want the entry of the set", page, err)
			}
			e, err := actorstore.ParseIndexKey(page.Entries[0].Key)
			if err != nil {
				t.Fatal(err)
			}
			o, at, err := h.DispatchAlarm(t.Context(), e)
			if err != nil || at != nil {
				t.Fatalf("delivery: %v %v %v", o, at, err)
			}
			if o != actorhost.AlarmGone {
				t.Fatalf("delivery: %v, want gone (the set did not land)", o)
			}
			if !ownership.AlarmEntryDone(o.Verdict(), true) {
				t.Fatal("a durable gone keeps its entry")
			}
			for i, err := range b.landHeld(t.Context()) {
				if err == nil {
					t.Fatalf("write %d held back landed after the alarm was found gone: the alarm is in the state with no index entry", i)
				}
				if !errors.Is(err, ownership.ErrPrecondition) {
					t.Fatalf("write %d held back: %v, want refused", i, err)
				}
			}
			if err := deliver(""); err != nil {
				t.Fatalf("an event after the late writes were refused: %v", err)
			}
		})
	}
}
