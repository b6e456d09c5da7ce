package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// node runs a real Core against a bucket, synchronously: every request is
// carried out at once and its reply fed back, at the node's own time.
type node struct {
	t      *testing.T
	core   *ownership.Core
	b      ownership.Bucket
	now    time.Time
	ref    uint64
	grants map[uint64]ownership.Generation
	exits  []ownership.Exit
}

func startNode(t *testing.T, b ownership.Bucket, name string, now time.Time) *node {
	t.Helper()
	cfg := ownership.DefaultConfig(ownership.NodeID(name), ownership.InstanceID(name+"-i1"))
	cfg.Addr = name + ".test:7000"
	core, err := ownership.NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, core: core, b: b, now: now, grants: map[uint64]ownership.Generation{}}
	n.step(ownership.Start{})
	if !n.core.LeaseValid(n.now) {
		t.Fatalf("node %s did not take its lease", name)
	}
	return n
}

func (n *node) step(in ownership.Input) {
	queue := []ownership.Input{in}
	for len(queue) > 0 {
		in, queue = queue[0], queue[1:]
		for _, e := range n.core.Step(n.now, in) {
			switch e := e.(type) {
			case ownership.Request:
				queue = append(queue, n.exec(e))
			case ownership.Grant:
				n.grants[e.Ref] = e.Gen
			case ownership.StopActing:
				// As a shell does once the stopped instance has ended.
				queue = append(queue, ownership.Idle{Actor: e.Actor, Gen: e.Gen})
			case ownership.Exit:
				n.exits = append(n.exits, e)
			}
		}
	}
}

func (n *node) exec(r ownership.Request) ownership.Reply {
	return keeper.Execute(context.Background(), n.b, r)
}

func (n *node) acquire(a ownership.Actor) ownership.Generation {
	n.t.Helper()
	n.ref++
	n.step(ownership.Acquire{Actor: a, Ref: n.ref})
	gen, ok := n.grants[n.ref]
	if !ok {
		n.t.Fatalf("acquire %s: not granted", a)
	}
	return gen
}

// advance moves the node's clock and ticks it, as its timer would.
func (n *node) advance(d time.Duration) {
	n.now = n.now.Add(d)
	n.step(ownership.Tick{})
}

func room(name string) ownership.Actor { return ownership.Actor{Class: "room", Name: name} }

func put(t *testing.T, b ownership.Bucket, key string, body []byte) {
	t.Helper()
	if _, err := b.Put(context.Background(), key, body, ownership.Always()); err != nil {
		t.Fatal(err)
	}
}

// cluster writes a small cluster's state into b: n1 live with one live
// hold, one parked record and one free record; n2 stopped cleanly; a record
// naming n3, which has no lease; an unreadable record and lease.
func writeCluster(t *testing.T, b ownership.Bucket) {
	t.Helper()
	n1 := startNode(t, b, "n1", t0)
	n2 := startNode(t, b, "n2", t0)
	gen := n1.acquire(room("a"))
	n1.step(ownership.Idle{Actor: room("a"), Gen: gen}) // released: free
	n1.acquire(room("b"))                               // live
	gen = n1.acquire(room("c"))
	n1.step(ownership.SocketOpened{Actor: room("c")})
	n1.step(ownership.Idle{Actor: room("c"), Gen: gen}) // parked: held
	n1.advance(2500 * time.Millisecond)                 // a renewal publishes the counts

	n2.acquire(room("d"))
	n2.now = n1.now
	n2.step(ownership.Stop{}) // releases d, then the lease
	if len(n2.exits) != 1 || !n2.exits[0].Clean {
		t.Fatalf("n2's stop: %+v", n2.exits)
	}

	put(t, b, ownership.OwnerKey(room("e")), ownership.EncodeRecord(ownership.Record{
		Class: "room", Name: "e", Node: "n3", Instance: "n3-i9", Generation: 4, Held: true, Nonce: "hand"}))
	put(t, b, "owners/junk/x", []byte("not a record"))
	put(t, b, ownership.NodeKey("bad"), []byte("wk1 lease what"))
}

func TestReadStatus(t *testing.T) {
	for _, store := range []struct {
		name string
		open func(t *testing.T) ownership.Bucket
	}{
		{"memory", func(*testing.T) ownership.Bucket { return memstore.New(memstore.Faults{}) }},
		{"directory", func(t *testing.T) ownership.Bucket {
			s, err := dirstore.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		t.Run(store.name, func(t *testing.T) {
			b := store.open(t)
			writeCluster(t, b)
			readAt := t0.Add(4 * time.Second)
			st, err := cluster.ReadStatus(t.Context(), b, readAt)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range st.Nodes {
				s := fmt.Sprintf("%s held=%d ended=%d free=%d", n.Node, n.RecordsHeld, n.RecordsHeldEnded, n.RecordsFree)
				if l := n.Lease; l != nil {
					s += fmt.Sprintf(" lease=%s/%s addr=%s published=%d/%d age=%v ttl=%v",
						l.Instance, l.State, l.Addr, l.Held, l.Parked, time.Duration(l.Age), time.Duration(l.TTL))
				}
				got = append(got, s)
			}
			want := []string{
				"n1 held=2 ended=0 free=1 lease=n1-i1/live addr=n1.test:7000 published=1/1 age=1.5s ttl=10s",
				"n2 held=0 ended=0 free=1 lease=n2-i1/released addr=n2.test:7000 published=0/0 age=1.5s ttl=10s",
				"n3 held=1 ended=0 free=0",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("nodes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if st.Held != 3 || st.Free != 2 {
				t.Errorf("totals: %d held, %d free; want 3 and 2", st.Held, st.Free)
			}
			if len(st.Unreadable) != 2 || st.Unreadable[0].Key != "nodes/bad" || st.Unreadable[1].Key != "owners/junk/x" ||
				!strings.Contains(st.Unreadable[1].Err, "not a wasmkeep record") {
				t.Errorf("unreadable: %+v", st.Unreadable)
			}
			if w := st.Nodes[0].Lease.WrittenAt; !w.Equal(t0.Add(2500 * time.Millisecond)) {
				t.Errorf("written at %v", w)
			}
		})
	}
}

// TestReadStatusPages: more records than one listing page holds.
func TestReadStatusPages(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	const n = ownership.DefaultListLimit + 5
	for i := range n {
		a := room(fmt.Sprintf("r%04d", i))
		put(t, b, ownership.OwnerKey(a), ownership.EncodeRecord(ownership.Record{
			Class: a.Class, Name: a.Name, Node: "n1", Instance: "i", Generation: 1, Held: i%2 == 0, Nonce: "x"}))
	}
	st, err := cluster.ReadStatus(t.Context(), b, t0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Held+st.Free != n || len(st.Nodes) != 1 || st.Nodes[0].Lease != nil || st.Nodes[0].RecordsHeld != (n+1)/2 {
		t.Errorf("status over %d records: %d held, %d free, nodes %+v", n, st.Held, st.Free, st.Nodes)
	}
}

// failing fails the calls its fields say.
type failing struct {
	ownership.Bucket
	list, get, put error
	beforePut      func() // runs before a put reaches the bucket
}

func (f *failing) List(ctx context.Context, prefix, after string, limit int) (ownership.ListPage, error) {
	if f.list != nil {
		return ownership.ListPage{}, f.list
	}
	return f.Bucket.List(ctx, prefix, after, limit)
}

func (f *failing) Get(ctx context.Context, key string) (ownership.Object, error) {
	if f.get != nil && strings.HasPrefix(key, ownership.OwnersPrefix) {
		return ownership.Object{}, f.get
	}
	return f.Bucket.Get(ctx, key)
}

func (f *failing) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	if f.beforePut != nil {
		f.beforePut()
	}
	if f.put != nil {
		return "", f.put
	}
	return f.Bucket.Put(ctx, key, body, cond)
}

func TestReadStatusFailures(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	writeCluster(t, b)

	_, err := cluster.ReadStatus(t.Context(), &failing{Bucket: b, list: ownership.ErrUnknownOutcome}, t0)
	if !errors.Is(err, ownership.ErrUnknownOutcome) {
		t.Errorf("a failed listing: %v, want the error", err)
	}

	// Reads that fail are named, not fatal.
	st, err := cluster.ReadStatus(t.Context(), &failing{Bucket: b, get: fmt.Errorf("denied: %w", ownership.ErrUnknownOutcome)}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unreadable) != 7 || st.Held+st.Free != 0 || len(st.Nodes) != 2 {
		t.Errorf("with every record read failing: %+v", st)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := cluster.ReadStatus(ctx, b, t0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestFence(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	n1 := startNode(t, b, "n1", t0)
	gen := n1.acquire(room("a"))
	n2 := startNode(t, b, "n2", t0)
	n2.step(ownership.Stop{})

	before, _ := b.Get(t.Context(), ownership.NodeKey("n1"))
	f, err := cluster.Fence(t.Context(), b, "n1", "op-fence-1")
	if err != nil {
		t.Fatal(err)
	}
	if f.Prior != before.ETag || f.After.State != ownership.LeaseFenced || f.After.Seq != f.Before.Seq+1 ||
		f.After.Nonce != "op-fence-1" || f.After.Instance != "n1-i1" || f.After.WrittenAt != f.Before.WrittenAt {
		t.Errorf("fence: %+v", f)
	}
	after, _ := b.Get(t.Context(), ownership.NodeKey("n1"))
	if l, err := ownership.DecodeLease(after.Body); err != nil || l != f.After || after.ETag != f.ETag {
		t.Errorf("stored lease %+v (%v), want %+v", l, err, f.After)
	}

	st, err := cluster.ReadStatus(t.Context(), b, t0)
	if err != nil || st.Nodes[0].RecordsHeld != 1 || st.Nodes[0].RecordsHeldEnded != 1 {
		t.Errorf("status after the fence: %+v, %v; want n1's held record counted as ended", st.Nodes, err)
	}

	// The fenced node finds out at its next renewal, and stops acting.
	n1.advance(2500 * time.Millisecond)
	if len(n1.exits) != 1 || n1.exits[0].Clean || !strings.Contains(n1.exits[0].Reason, "fenced") {
		t.Errorf("n1 after the fence: exits %+v", n1.exits)
	}
	if n1.core.MayAct(room("a"), gen, n1.now) {
		t.Error("n1 may still act")
	}

	for _, tt := range []struct {
		node ownership.NodeID
		want error
	}{
		{"n1", cluster.ErrAlreadyFenced},
		{"n2", cluster.ErrReleased},
		{"n9", cluster.ErrUnknownNode},
	} {
		if _, err := cluster.Fence(t.Context(), b, tt.node, "op-fence-2"); !errors.Is(err, tt.want) {
			t.Errorf("fence %s: %v, want %v", tt.node, err, tt.want)
		}
	}
	if _, err := cluster.Fence(t.Context(), b, "no/such node", "x"); err == nil {
		t.Error("fence of an invalid node id succeeded")
	}
	put(t, b, ownership.NodeKey("bad"), []byte("wk1 lease what"))
	if _, err := cluster.Fence(t.Context(), b, "bad", "x"); !errors.Is(err, ownership.ErrUnreadable) {
		t.Errorf("fence of an unreadable lease: %v", err)
	}
}

func TestFenceRaces(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	n1 := startNode(t, b, "n1", t0)

	// The node renews between the fence's read and its write.
	renew := &failing{Bucket: b, beforePut: func() { n1.advance(2500 * time.Millisecond) }}
	if _, err := cluster.Fence(t.Context(), renew, "n1", "x"); !errors.Is(err, cluster.ErrChanged) {
		t.Errorf("fence racing a renewal: %v, want ErrChanged", err)
	}
	if l, _ := b.Get(t.Context(), ownership.NodeKey("n1")); strings.Contains(string(l.Body), "fenced") {
		t.Error("the refused fence was written")
	}

	// No answer: what was sent is reported with the unknown outcome.
	lost := &failing{Bucket: b, put: fmt.Errorf("timeout: %w", ownership.ErrUnknownOutcome)}
	f, err := cluster.Fence(t.Context(), lost, "n1", "x")
	if !errors.Is(err, ownership.ErrUnknownOutcome) || f.After.State != ownership.LeaseFenced {
		t.Errorf("fence without answer: %+v, %v", f, err)
	}
}

// TestReadStatusEndedInstance: records held by an earlier instance of a
// node are told apart from those of its current instance.
func TestReadStatusEndedInstance(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	old := startNode(t, b, "n1", t0)
	old.acquire(room("a"))
	old.acquire(room("b"))
	// The process dies; a new instance starts after its lease stood still.
	cfg := ownership.DefaultConfig("n1", "n1-i2")
	core, err := ownership.NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fresh := &node{t: t, core: core, b: b, now: t0, grants: map[uint64]ownership.Generation{}}
	fresh.step(ownership.Start{})
	for range 8 {
		fresh.advance(2500 * time.Millisecond) // watching the old lease for ttl + grace
	}
	if !fresh.core.LeaseValid(fresh.now) {
		t.Fatal("the new instance did not take the lease over")
	}
	fresh.acquire(room("a"))

	st, err := cluster.ReadStatus(t.Context(), b, fresh.now)
	if err != nil {
		t.Fatal(err)
	}
	n := st.Nodes[0]
	if n.Lease.Instance != "n1-i2" || n.RecordsHeld != 2 || n.RecordsHeldEnded != 1 {
		t.Errorf("n1: %+v, lease %+v; want 2 held, 1 of them by the ended instance", n, *n.Lease)
	}
}
