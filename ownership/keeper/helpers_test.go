package keeper_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/wasmkeep/wasmkeep/internal/testlog"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// coreConfig is a node's configuration with the defaults of docs/PROTOCOL.md §2.
func coreConfig(node, instance string) ownership.Config {
	c := ownership.DefaultConfig(ownership.NodeID(node), ownership.InstanceID(instance))
	c.Addr = node + ".test:7000"
	return c
}

var (
	roomA = ownership.Actor{Class: "room", Name: "a"}
	roomB = ownership.Actor{Class: "room", Name: "b"}
	roomC = ownership.Actor{Class: "room", Name: "c"}
)

// node is one keeper under test with what it was given.
type node struct {
	*keeper.Keeper
	hooks *recorder
	logs  *testlog.Log
	reg   *prometheus.Registry
}

type nodeOption func(*keeper.Config)

// startNode starts a keeper for node/instance over b and fails the test if
// it does not take its lease.
func startNode(t *testing.T, b ownership.Bucket, nodeName, instance string, opts ...nodeOption) *node {
	t.Helper()
	n, err := tryStart(t, b, nodeName, instance, opts...)
	if err != nil {
		t.Fatalf("start %s/%s: %v\nlogs:\n%s", nodeName, instance, err, n.logs)
	}
	return n
}

func tryStart(t *testing.T, b ownership.Bucket, nodeName, instance string, opts ...nodeOption) (*node, error) {
	t.Helper()
	n := &node{hooks: &recorder{}, logs: &testlog.Log{}, reg: prometheus.NewRegistry()}
	cfg := keeper.Config{
		Core:       coreConfig(nodeName, instance),
		Bucket:     b,
		Logger:     slog.New(n.logs),
		Registerer: n.reg,
	}
	for _, o := range opts {
		o(&cfg)
	}
	k, err := keeper.Start(t.Context(), cfg, n.hooks)
	n.Keeper = k
	return n, err
}

// stop stops a keeper cleanly and fails the test if the stop is not clean.
func (n *node) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		t.Fatalf("stop: %v\nlogs:\n%s", err, n.logs)
	}
}

func (n *node) acquire(t *testing.T, a ownership.Actor) keeper.Decision {
	t.Helper()
	d, err := n.Acquire(t.Context(), a)
	if err != nil {
		t.Fatalf("acquire %s: %v", a, err)
	}
	return d
}

func (n *node) mustGrant(t *testing.T, a ownership.Actor, gen ownership.Generation) {
	t.Helper()
	d := n.acquire(t, a)
	if d.Verdict != keeper.Granted || d.Gen != gen {
		t.Fatalf("acquire %s: %v, want granted at generation %d\nlogs:\n%s", a, d, gen, n.logs)
	}
}

// recorder is a Hooks that remembers every call. Its methods run on the
// keeper's goroutine; tests read it once the keeper settled or ended.
type recorder struct {
	mu           sync.Mutex
	stopActing   []ownership.StopActing
	closeSockets []ownership.CloseSockets
	takes        []ownership.Take
	drained      int
	leases       []ownership.LeaseChanged
	abandoned    []string
	exits        []ownership.Exit
	panicOn      string // a hook name that panics, for tests of a broken keeper
}

func (r *recorder) hit(name string) {
	if r.panicOn == name {
		panic("test hook " + name + " panics")
	}
}

func (r *recorder) StopActing(e ownership.StopActing) {
	r.mu.Lock()
	r.stopActing = append(r.stopActing, e)
	r.mu.Unlock()
	r.hit("StopActing")
}

func (r *recorder) CloseSockets(e ownership.CloseSockets) {
	r.mu.Lock()
	r.closeSockets = append(r.closeSockets, e)
	r.mu.Unlock()
	r.hit("CloseSockets")
}

func (r *recorder) Take(e ownership.Take) {
	r.mu.Lock()
	r.takes = append(r.takes, e)
	r.mu.Unlock()
}

func (r *recorder) Drained() {
	r.mu.Lock()
	r.drained++
	r.mu.Unlock()
}

func (r *recorder) DrainChanged(ownership.DrainChanged) {}
func (r *recorder) MoveRequests(ownership.MoveRequests) {}

func (r *recorder) LeaseChanged(e ownership.LeaseChanged) {
	r.mu.Lock()
	r.leases = append(r.leases, e)
	r.mu.Unlock()
	r.hit("LeaseChanged")
}

func (r *recorder) Abandoned(a ownership.Actor, gen ownership.Generation) {
	r.mu.Lock()
	r.abandoned = append(r.abandoned, fmt.Sprintf("%s@%d", a, gen))
	r.mu.Unlock()
}

func (r *recorder) Exit(e ownership.Exit) {
	r.mu.Lock()
	r.exits = append(r.exits, e)
	r.mu.Unlock()
}

func (r *recorder) snapshot() recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorder{
		stopActing:   append([]ownership.StopActing(nil), r.stopActing...),
		closeSockets: append([]ownership.CloseSockets(nil), r.closeSockets...),
		takes:        append([]ownership.Take(nil), r.takes...),
		drained:      r.drained,
		leases:       append([]ownership.LeaseChanged(nil), r.leases...),
		abandoned:    append([]string(nil), r.abandoned...),
		exits:        append([]ownership.Exit(nil), r.exits...),
	}
}

// checkedBucket wraps a bucket: it fails the test if two calls on one key
// overlap (the keeper must answer a request only once its call returned,
// and the Core never sends two for one key), and it can hold the calls on
// chosen keys until released.
type checkedBucket struct {
	ownership.Bucket
	t *testing.T

	mu       sync.Mutex
	inFlight map[string]bool
	blocked  map[string]chan struct{} // key → closed when released
	entered  map[string]chan struct{} // key → closed when a call on it started
	puts     map[string]int
	// loseReply, when set, is asked about every put; true applies the put
	// and answers it with an unknown outcome, as when a reply is lost.
	loseReply func(key string, body []byte) bool
	// failGet, when set, is asked about every get; true answers it with an
	// unknown outcome without reading.
	failGet func(key string) bool
}

func newChecked(t *testing.T, b ownership.Bucket) *checkedBucket {
	return &checkedBucket{Bucket: b, t: t, inFlight: map[string]bool{},
		blocked: map[string]chan struct{}{}, entered: map[string]chan struct{}{}, puts: map[string]int{}}
}

// block holds every call on key until the returned release is called; the
// other channel is closed once a call on key has started.
func (c *checkedBucket) block(key string) (entered <-chan struct{}, release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gate, in := make(chan struct{}), make(chan struct{})
	c.blocked[key], c.entered[key] = gate, in
	var once sync.Once
	return in, func() { once.Do(func() { close(gate) }) }
}

func (c *checkedBucket) enter(ctx context.Context, key string) (leave func(), err error) {
	c.mu.Lock()
	if c.inFlight[key] {
		c.t.Errorf("two bucket calls on %q at once", key)
	}
	c.inFlight[key] = true
	gate, in := c.blocked[key], c.entered[key]
	if in != nil {
		select {
		case <-in:
		default:
			close(in)
		}
	}
	c.mu.Unlock()
	leave = func() {
		c.mu.Lock()
		c.inFlight[key] = false
		c.mu.Unlock()
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			leave()
			return nil, fmt.Errorf("checked bucket: %q held: %w: %w", key, ownership.ErrUnknownOutcome, ctx.Err())
		}
	}
	return leave, nil
}

func (c *checkedBucket) Get(ctx context.Context, key string) (ownership.Object, error) {
	leave, err := c.enter(ctx, key)
	if err != nil {
		return ownership.Object{}, err
	}
	defer leave()
	c.mu.Lock()
	fail := c.failGet != nil && c.failGet(key)
	c.mu.Unlock()
	if fail {
		return ownership.Object{}, fmt.Errorf("checked bucket: get %q: no answer: %w", key, ownership.ErrUnknownOutcome)
	}
	return c.Bucket.Get(ctx, key)
}

func (c *checkedBucket) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	leave, err := c.enter(ctx, key)
	if err != nil {
		return "", err
	}
	defer leave()
	c.mu.Lock()
	c.puts[key]++
	lose := c.loseReply != nil && c.loseReply(key, body)
	c.mu.Unlock()
	etag, err := c.Bucket.Put(ctx, key, body, cond)
	if lose {
		return "", fmt.Errorf("checked bucket: put %q: reply lost (the put returned %v): %w", key, err, ownership.ErrUnknownOutcome)
	}
	return etag, err
}

func (c *checkedBucket) Delete(ctx context.Context, key string, cond ownership.Condition) error {
	leave, err := c.enter(ctx, key)
	if err != nil {
		return err
	}
	defer leave()
	return c.Bucket.Delete(ctx, key, cond)
}

func (c *checkedBucket) List(ctx context.Context, prefix, startAfter string, limit int) (ownership.ListPage, error) {
	leave, err := c.enter(ctx, "list "+prefix+" "+startAfter)
	if err != nil {
		return ownership.ListPage{}, err
	}
	defer leave()
	return c.Bucket.List(ctx, prefix, startAfter, limit)
}

func (c *checkedBucket) putCount(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.puts[key]
}

// readRecord reads an ownership record; ok is false when it is absent.
func readRecord(t *testing.T, b ownership.Bucket, a ownership.Actor) (rec ownership.Record, ok bool) {
	t.Helper()
	obj, err := b.Get(context.Background(), ownership.OwnerKey(a))
	if errors.Is(err, ownership.ErrNotFound) {
		return ownership.Record{}, false
	}
	if err != nil {
		t.Fatalf("get record of %s: %v", a, err)
	}
	rec, err = ownership.DecodeRecord(obj.Body)
	if err != nil {
		t.Fatalf("record of %s: %v", a, err)
	}
	return rec, true
}

func readLease(t *testing.T, b ownership.Bucket, n string) (ownership.Lease, ownership.ETag) {
	t.Helper()
	obj, err := b.Get(context.Background(), ownership.NodeKey(ownership.NodeID(n)))
	if err != nil {
		t.Fatalf("get lease of %s: %v", n, err)
	}
	l, err := ownership.DecodeLease(obj.Body)
	if err != nil {
		t.Fatalf("lease of %s: %v", n, err)
	}
	return l, obj.ETag
}

// allRecords lists every ownership record in b.
func allRecords(t *testing.T, b ownership.Bucket) map[string]ownership.Record {
	t.Helper()
	out := map[string]ownership.Record{}
	after := ""
	for {
		page, err := b.List(context.Background(), ownership.OwnersPrefix, after, 0)
		if err != nil {
			t.Fatalf("list records: %v", err)
		}
		for _, e := range page.Entries {
			obj, err := b.Get(context.Background(), e.Key)
			if err != nil {
				t.Fatalf("get %s: %v", e.Key, err)
			}
			rec, err := ownership.DecodeRecord(obj.Body)
			if err != nil {
				t.Fatalf("record %s: %v", e.Key, err)
			}
			out[e.Key] = rec
		}
		if !page.Truncated || len(page.Entries) == 0 {
			return out
		}
		after = page.Entries[len(page.Entries)-1].Key
	}
}

// wantFree fails the test if a record is held.
func wantFree(t *testing.T, b ownership.Bucket, a ownership.Actor) ownership.Record {
	t.Helper()
	rec, ok := readRecord(t, b, a)
	if !ok {
		t.Fatalf("record of %s: absent, want free", a)
	}
	if rec.Held {
		t.Fatalf("record of %s: held by %s/%s at generation %d, want free", a, rec.Node, rec.Instance, rec.Generation)
	}
	return rec
}

// metricValue returns the value of the counter, gauge or histogram count
// with the given name and labels (all of them), or -1 if there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	if len(m.GetLabel()) != len(want) {
		return false
	}
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

// faultless reads a memstore's state as it is, past its faults.
type faultless struct{ s *memstore.Store }

func (f faultless) Get(_ context.Context, key string) (obj ownership.Object, err error) {
	f.s.Inspect(func(st *memstore.State) { obj, err = st.Get(key) })
	return obj, err
}

func (f faultless) Put(_ context.Context, key string, body []byte, cond ownership.Condition) (etag ownership.ETag, err error) {
	f.s.Inspect(func(st *memstore.State) { etag, err = st.Put(key, body, cond) })
	return etag, err
}

func (f faultless) Delete(_ context.Context, key string, cond ownership.Condition) (err error) {
	f.s.Inspect(func(st *memstore.State) { err = st.Delete(key, cond) })
	return err
}

func (f faultless) List(_ context.Context, prefix, startAfter string, limit int) (page ownership.ListPage, err error) {
	f.s.Inspect(func(st *memstore.State) { page, err = st.List(prefix, startAfter, limit) })
	return page, err
}
