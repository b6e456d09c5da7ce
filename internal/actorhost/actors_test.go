package actorhost_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// fakeKeeper stands in for the keeper: every hold may act unless revoked.
type fakeKeeper struct {
	mu      sync.Mutex
	revoked map[ownership.Generation]bool
	idle    []ownership.Generation
	ended   []ownership.Generation
	damaged []string // keys, one per DamageFound

	// slow: MayActNow never knows, and RequestMayAct answers later from
	// another goroutine, as the keeper does when its table of live holds
	// cannot answer. asked counts those questions.
	slow  atomic.Bool
	asked atomic.Int64
	sys   *actor.ActorSystem
}

// Acquire grants every event at generation 1.
func (o *fakeKeeper) Acquire(context.Context, ownership.Actor) (keeper.Decision, error) {
	return keeper.Decision{Verdict: keeper.Granted, Gen: 1}, nil
}

func (o *fakeKeeper) MayAct(_ ownership.Actor, gen ownership.Generation) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.revoked[gen]
}

func (o *fakeKeeper) MayActNow(a ownership.Actor, gen ownership.Generation) (bool, bool) {
	if o.slow.Load() {
		return false, false
	}
	return o.MayAct(a, gen), true
}

func (o *fakeKeeper) RequestMayAct(a ownership.Actor, gen ownership.Generation, replyTo *actor.PID, tag uint64) {
	o.asked.Add(1)
	may := o.MayAct(a, gen)
	go o.sys.Root.Send(replyTo, &keeper.MayActAnswer{Actor: a, Gen: gen, Tag: tag, May: may})
}

func (o *fakeKeeper) setSystem(sys *actor.ActorSystem) { o.sys = sys }

func (o *fakeKeeper) Idle(_ ownership.Actor, gen ownership.Generation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.idle = append(o.idle, gen)
}

func (o *fakeKeeper) HoldEnded(_ ownership.Actor, gen ownership.Generation, _ string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = append(o.ended, gen)
}

func (o *fakeKeeper) DamageFound(key string, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.damaged = append(o.damaged, key)
}

func (o *fakeKeeper) revoke(gen ownership.Generation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.revoked == nil {
		o.revoked = map[ownership.Generation]bool{}
	}
	o.revoked[gen] = true
}

func newHost(t testing.TB, b ownership.Bucket, o actorhost.Keeper, reg *actors.Registry) *actorhost.Host {
	t.Helper()
	if reg == nil {
		reg = actors.BuiltIn()
	}
	return hostOf(t, actorhost.Config{Keeper: o, Bucket: b, Registry: reg})
}

// hostOf starts a host of cfg, with a system of its own and, if cfg names
// none, a fake keeper; the test's end hibernates its actors.
func hostOf(t testing.TB, cfg actorhost.Config) *actorhost.Host {
	t.Helper()
	if cfg.Keeper == nil {
		cfg.Keeper = &fakeKeeper{}
	}
	cfg.System = keeper.NewSystem(nil)
	if o, ok := cfg.Keeper.(interface{ setSystem(*actor.ActorSystem) }); ok {
		o.setSystem(cfg.System)
	}
	h, err := actorhost.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.HibernateAll(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return h
}

var room = ownership.Actor{Class: "counter", Name: "room"}

func get(query string) *actors.Request {
	r := &actors.Request{Method: http.MethodGet, Header: http.Header{}}
	r.Query = map[string][]string{}
	if query != "" {
		r.Query.Set(query, "")
	}
	return r
}

// count sends one GET to the counter and returns its body, or the error.
func count(t *testing.T, h *actorhost.Host, gen ownership.Generation, query string) (string, error) {
	t.Helper()
	resp, err := h.Deliver(t.Context(), room, gen, get(query))
	if err != nil {
		return "", err
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	return strings.TrimSpace(string(resp.Body)), nil
}

func mustCount(t *testing.T, h *actorhost.Host, gen ownership.Generation, want string) {
	t.Helper()
	got, err := count(t, h, gen, "")
	if err != nil || got != want {
		t.Fatalf("count at generation %d = %q, %v; want %q", gen, got, err, want)
	}
}

func TestCounterPersists(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := newHost(t, b, &fakeKeeper{}, nil)
	mustCount(t, h, 1, "1")
	mustCount(t, h, 1, "2")
	if got, err := count(t, h, 1, "read"); err != nil || got != "2" {
		t.Fatalf("read = %q, %v; want 2", got, err)
	}
	// Another host (another node) at a later generation reads it back.
	h2 := newHost(t, b, &fakeKeeper{}, nil)
	mustCount(t, h2, 2, "3")
}

// TestSeal: a hold superseded by a newer one, whose seal has landed,
// cannot make its write visible: its commit is refused.
func TestSeal(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	old := newHost(t, b, &fakeKeeper{}, nil)
	mustCount(t, old, 1, "1") // old hold resident at generation 1

	current := newHost(t, b, &fakeKeeper{}, nil)
	mustCount(t, current, 2, "2") // fence at 2, then its own commit

	// The old hold still believes it owns the actor: its commit is
	// conditioned on the version it last saw, which is gone.
	_, err := count(t, old, 1, "")
	var ua *actorhost.UnavailableError
	if !errors.As(err, &ua) || !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("superseded commit: err = %v, want an UnavailableError", err)
	}
	obj, err := b.Get(t.Context(), actorstore.StateKey(room))
	if err != nil {
		t.Fatal(err)
	}
	if h, _, err := ownership.DecodeState(obj.Body); err != nil || h.Gen != 2 {
		t.Fatalf("state after the refused write: %q (%v), want generation 2's", obj.Body, err)
	}
	// The old hold's state was dropped; reloading at its old generation is
	// refused (the state is newer), and the current hold goes on from 2.
	if _, err := count(t, old, 1, ""); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("reload at an old generation: err = %v, want unavailable", err)
	}
	mustCount(t, current, 2, "3")
}

// TestOutputGate: once the hold may not act any more, an event whose
// commit landed is released all the same (it took effect: a refusal would
// tell its client to do it again), and one that only read is refused, as
// a retry that may be run again at once.
func TestOutputGate(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	o := &fakeKeeper{}
	h := newHost(t, b, o, nil)
	mustCount(t, h, 1, "1")
	o.revoke(1)
	mustCount(t, h, 1, "2")
	var ua *actorhost.UnavailableError
	if _, err := count(t, h, 1, "read"); !errors.As(err, &ua) || !ua.NotRun {
		t.Fatalf("read under a revoked hold: err = %v, want a refusal of an event that may run again", err)
	}
	obj, err := b.Get(t.Context(), actorstore.StateKey(room))
	if err != nil {
		t.Fatal(err)
	}
	if _, payload, err := ownership.DecodeState(obj.Body); err != nil || !strings.Contains(string(payload), "2") {
		t.Fatalf("state after the released increment: %q (%v), want the count 2", obj.Body, err)
	}
}

func TestStorageLimits(t *testing.T) {
	reg := actors.NewRegistry()
	err := reg.Register("store", actors.ClassFunc(func(_ context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
		key := req.Query.Get("key")
		if err := st.Put(key, req.Body); err != nil {
			return nil, err
		}
		entries, err := st.List(actors.ListOptions{})
		if err != nil {
			return nil, err
		}
		keys := make([]string, len(entries))
		for i, e := range entries {
			keys[i] = e.Key
		}
		return actors.Text(http.StatusOK, strings.Join(keys, ",")), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	b := memstore.New(memstore.Faults{})
	h := hostOf(t, actorhost.Config{Bucket: b, Registry: reg, MaxState: 1 << 20})
	a := ownership.Actor{Class: "store", Name: "s"}
	put := func(key string, size int) (int, string) {
		t.Helper()
		req := &actors.Request{Method: http.MethodPut, Query: map[string][]string{"key": {key}}, Body: make([]byte, size)}
		resp, err := h.Deliver(t.Context(), a, 1, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status, string(resp.Body)
	}
	for _, tc := range []struct {
		name   string
		key    string
		size   int
		status int
		body   string
	}{
		{"small", "a", 10, http.StatusOK, "a"},
		{"long key", strings.Repeat("k", actors.MaxKeyLen+1), 1, http.StatusRequestEntityTooLarge, "key of 2049 bytes"},
		{"large value", "b", actors.MaxValueLen + 1, http.StatusRequestEntityTooLarge, "value of 131073 bytes"},
		{"max value", "b", actors.MaxValueLen, http.StatusOK, "a,b"},
	} {
		status, body := put(tc.key, tc.size)
		if status != tc.status || !strings.Contains(body, tc.body) {
			t.Errorf("%s: %d %q, want %d containing %q", tc.name, status, body, tc.status, tc.body)
		}
	}
	// Fill up to the state bound (1 MiB here): the eighth value of 128 KiB is
	// past it.
	var last int
	var lastBody string
	for i := range 8 {
		last, lastBody = put(string(rune('c'+i)), actors.MaxValueLen)
	}
	if last != http.StatusRequestEntityTooLarge || !strings.Contains(lastBody, "state would be") {
		t.Fatalf("past the state bound: %d %q", last, lastBody)
	}
}

func TestUnknownClass(t *testing.T) {
	h := newHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, nil)
	_, err := h.Deliver(t.Context(), ownership.Actor{Class: "nope", Name: "x"}, 1, get(""))
	if !errors.Is(err, actors.ErrUnknownClass) {
		t.Fatalf("err = %v", err)
	}
}

func TestPanicIsAnError(t *testing.T) {
	reg := actors.NewRegistry()
	_ = reg.Register("boom", actors.ClassFunc(func(context.Context, *actors.Request, actors.Storage) (*actors.Response, error) {
		panic("boom")
	}))
	h := newHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, reg)
	for range 2 { // the actor survives its panic
		resp, err := h.Deliver(t.Context(), ownership.Actor{Class: "boom", Name: "x"}, 1, get(""))
		if err != nil || resp.Status != http.StatusInternalServerError {
			t.Fatalf("resp %+v, err %v", resp, err)
		}
	}
}

// TestErrorsInAnswers: a failed event's 500 keeps its error in the log,
// unless the node is for development (Config.ErrorsInAnswers), whose 500
// says it after the id.
func TestErrorsInAnswers(t *testing.T) {
	reg := actors.NewRegistry()
	_ = reg.Register("boom", actors.ClassFunc(func(context.Context, *actors.Request, actors.Storage) (*actors.Response, error) {
		panic("the secret is 42")
	}))
	for _, dev := range []bool{false, true} {
		h := hostOf(t, actorhost.Config{Bucket: memstore.New(memstore.Faults{}), Registry: reg, ErrorsInAnswers: dev})
		resp, err := h.Deliver(t.Context(), ownership.Actor{Class: "boom", Name: "x"}, 1, get(""))
		require.NoError(t, err)
		require.Equal(t, http.StatusInternalServerError, resp.Status)
		id := resp.Header.Get(actorhost.ErrorIDHeader)
		require.Contains(t, string(resp.Body), "error_id="+id)
		if dev {
			assert.Contains(t, string(resp.Body), "the secret is 42", "a node for development says why")
		} else {
			assert.NotContains(t, string(resp.Body), "secret", "the error stays in the log") // (the id is hex: "42" may be in it)
		}
	}
}

// TestStopActingDrops: StopActing drops the resident actor at once, and
// once its resident actor has terminated tells the keeper so, exactly once, with
// Idle at the stopped generation (the keeper releases the hold then);
// HibernateAll then has nothing to hibernate.
func TestStopActingDrops(t *testing.T) {
	o := &fakeKeeper{}
	h := newHost(t, memstore.New(memstore.Faults{}), o, nil)
	mustCount(t, h, 1, "1")
	h.StopActing(room, 1)
	if n := h.Resident(); n != 0 {
		t.Fatalf("resident after StopActing: %d", n)
	}
	if err := h.HibernateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if fmt.Sprint(o.idle) != "[1]" {
		t.Fatalf("Idle called for %v, want once at generation 1 (the end of the stopped resident actor)", o.idle)
	}
}

// TestEndedGrantDoesNotRun: an event granted under a hold that ended
// before it reached a new resident actor (the actor went idle in between)
// is refused before it runs, NotRun: nothing of it lands.
func TestEndedGrantDoesNotRun(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	o := &fakeKeeper{}
	h := newHost(t, b, o, nil)
	mustCount(t, h, 1, "1")
	if err := h.HibernateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	h2 := newHost(t, b, o, nil)
	o.revoke(2)
	_, err := count(t, h2, 2, "")
	var ua *actorhost.UnavailableError
	if !errors.As(err, &ua) || !ua.NotRun {
		t.Fatalf("event of an ended grant: %v, want an UnavailableError with NotRun", err)
	}
	mustCount(t, h2, 3, "2") // the refused event did not count
}

func TestRequestIsUpgrade(t *testing.T) {
	for _, tc := range []struct {
		method     string
		upgrade    string
		connection []string
		want       bool
	}{
		{"GET", "websocket", []string{"Upgrade"}, true},
		{"GET", "WebSocket", []string{"keep-alive, Upgrade"}, true},
		{"GET", "websocket", []string{"keep-alive", "upgrade"}, true},
		{"GET", "websocket", nil, false},
		{"GET", "h2c", []string{"Upgrade"}, false},
		{"POST", "websocket", []string{"Upgrade"}, false},
		{"GET", "", []string{"Upgrade"}, false},
	} {
		r := &actors.Request{Method: tc.method, Header: http.Header{}}
		if tc.upgrade != "" {
			r.Header.Set("Upgrade", tc.upgrade)
		}
		r.Header["Connection"] = tc.connection
		if got := r.IsUpgrade(); got != tc.want {
			t.Errorf("%s Upgrade %q Connection %q: %v, want %v", tc.method, tc.upgrade, tc.connection, got, tc.want)
		}
	}
}
