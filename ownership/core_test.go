package ownership_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// harness drives one Core by hand over a memstore.State: requests are
// answered at once, unless the script holds them.
type harness struct {
	t       *testing.T
	core    *ownership.Core
	bucket  *memstore.State
	now     time.Time
	effects []ownership.Effect
	held    []ownership.Request // requests the script has not answered
	hold    bool
	refs    uint64
	// faults answers every request on a key with an outcome instead of
	// the bucket (Damaged, BucketDamaged), as a store that found damage.
	faults map[string]ownership.Outcome
	// nextSweep is when advance sends the next Sweep.
	nextSweep time.Time
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, nil) }

func newHarnessWith(t *testing.T, tune func(*ownership.Config)) *harness {
	cfg := ownership.DefaultConfig("n1", "n1.a")
	if tune != nil {
		tune(&cfg)
	}
	core, err := ownership.NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, core: core, bucket: memstore.NewState(), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.step(ownership.Start{})
	if !core.LeaseValid(h.now) {
		t.Fatal("no valid lease after start")
	}
	return h
}

func (h *harness) step(in ownership.Input) {
	queue := []ownership.Input{in}
	for len(queue) > 0 {
		in, queue = queue[0], queue[1:]
		for _, e := range h.core.Step(h.now, in) {
			h.effects = append(h.effects, e)
			if r, ok := e.(ownership.Request); ok {
				if h.hold {
					h.held = append(h.held, r)
					continue
				}
				queue = append(queue, h.answer(r))
			}
		}
	}
}

func (h *harness) answer(r ownership.Request) ownership.Reply {
	if o, ok := h.faults[r.Key]; ok {
		return ownership.Reply{ID: r.ID, Outcome: o, Err: fmt.Errorf("test store: %s %q: %s", r.Op, r.Key, o)}
	}
	return keeper.Execute(context.Background(), h.bucket.Bucket(), r)
}

// advance moves the clock in steps of at most a tenth of a second, and
// sends a Sweep every sweep period, as the sweeper does.
func (h *harness) advance(d time.Duration) {
	period := h.core.Config().SweepPeriod
	for end := h.now.Add(d); h.now.Before(end); {
		h.now = h.now.Add(min(100*time.Millisecond, end.Sub(h.now)))
		if h.nextSweep.IsZero() {
			h.nextSweep = h.now.Add(period)
		}
		if !h.now.Before(h.nextSweep) {
			h.nextSweep = h.nextSweep.Add(period)
			h.step(ownership.Sweep{})
			continue
		}
		h.step(ownership.Tick{})
	}
}

func (h *harness) acquire(a ownership.Actor) ownership.Effect {
	h.refs++
	ref := h.refs
	h.effects = nil
	h.step(ownership.Acquire{Actor: a, Ref: ref})
	for _, e := range h.effects {
		switch e := e.(type) {
		case ownership.Grant:
			if e.Ref == ref {
				return e
			}
		case ownership.Route:
			if e.Ref == ref {
				return e
			}
		case ownership.Refuse:
			if e.Ref == ref {
				return e
			}
		}
	}
	h.t.Fatalf("no answer to acquire %d of %s", ref, a)
	return nil
}

func (h *harness) record(a ownership.Actor) ownership.Record {
	o, err := h.bucket.Get(ownership.OwnerKey(a))
	if err != nil {
		h.t.Fatalf("record of %s: %v", a, err)
	}
	r, err := ownership.DecodeRecord(o.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) saw(want ownership.Effect) bool {
	for _, e := range h.effects {
		if fmt.Sprint(e) == fmt.Sprint(want) {
			return true
		}
	}
	return false
}

var room = ownership.Actor{Class: "room", Name: "lobby"}

func mustGrant(t *testing.T, e ownership.Effect, gen ownership.Generation) {
	t.Helper()
	g, ok := e.(ownership.Grant)
	if !ok || g.Gen != gen {
		t.Fatalf("got %#v, want a grant at generation %d", e, gen)
	}
}

func TestParkAndWake(t *testing.T) {
	h := newHarness(t)
	mustGrant(t, h.acquire(room), 1)
	h.step(ownership.SocketOpened{Actor: room})
	before := h.record(room)
	h.step(ownership.Idle{Actor: room, Gen: 1})
	if _, ok := h.core.Parked(room); !ok {
		t.Fatal("idle with an open socket did not park")
	}
	if after := h.record(room); after != before {
		t.Fatalf("parking wrote the record: %+v -> %+v", before, after)
	}
	if h.core.MayAct(room, 1, h.now) {
		t.Fatal("a parked hold may act")
	}
	mustGrant(t, h.acquire(room), 2) // a wake is an acquisition at a new generation
	if _, ok := h.core.Parked(room); ok {
		t.Fatal("the wake kept the parked entry")
	}
	h.step(ownership.Idle{Actor: room, Gen: 2})
	h.step(ownership.SocketGone{Actor: room})
	if r := h.record(room); r.Held || r.Generation != 2 {
		t.Fatalf("after the last socket: record %+v, want free at generation 2", r)
	}
}

func TestIdleWithoutSocketsReleases(t *testing.T) {
	h := newHarness(t)
	mustGrant(t, h.acquire(room), 1)
	h.step(ownership.Idle{Actor: room, Gen: 1})
	if r := h.record(room); r.Held || r.Generation != 1 {
		t.Fatalf("record %+v, want free at generation 1 (a release keeps the generation)", r)
	}
	if h.core.Tracks(room) {
		t.Fatal("the core still tracks a released actor")
	}
}

func TestLapseReleasesParkedRecords(t *testing.T) {
	h := newHarness(t)
	mustGrant(t, h.acquire(room), 1)
	h.step(ownership.SocketOpened{Actor: room})
	h.step(ownership.Idle{Actor: room, Gen: 1})
	h.hold, h.effects = true, nil // the bucket stops answering
	h.advance(9 * time.Second)
	if h.core.LeaseValid(h.now) {
		t.Fatal("the lease is still valid with no renewal acknowledged for ttl minus safety")
	}
	if !h.saw(ownership.CloseSockets{All: true, Code: 1012, Reason: "lapse"}) {
		t.Fatal("the lapse did not close every socket with 1012")
	}
	if _, ok := h.core.Parked(room); ok || !h.core.Tracks(room) {
		t.Fatal("the lapse should move the parked record to the pending releases")
	}
	// The bucket answers again: every held request gets no answer (unknown),
	// then the retries land.
	h.hold = false
	for _, r := range h.held {
		h.step(ownership.Reply{ID: r.ID, Outcome: ownership.Unknown})
	}
	h.held = nil
	h.advance(10 * time.Second)
	if r := h.record(room); r.Held {
		t.Fatalf("record %+v still held after the lapse's release", r)
	}
	if !h.core.LeaseValid(h.now) {
		t.Fatal("the lease did not become valid again once renewals landed")
	}
}

func TestRefusedReleaseRereads(t *testing.T) {
	h := newHarness(t)
	mustGrant(t, h.acquire(room), 1)
	h.hold = true
	h.step(ownership.Idle{Actor: room, Gen: 1})
	if len(h.held) != 1 || h.held[0].Op != ownership.OpPut {
		t.Fatalf("want one release in flight, got %v", h.held)
	}
	// A 409 that applied nothing: the record still names us at generation 1.
	rel := h.held[0]
	h.held, h.hold = nil, false
	h.step(ownership.Reply{ID: rel.ID, Outcome: ownership.Refused})
	h.advance(time.Second)
	if r := h.record(room); r.Held {
		t.Fatalf("a refused release ended without a re-read: record %+v still held", r)
	}
}

// pump answers held requests until none is left: truthfully, except that
// writes for which lose says true get no answer and do not land (yet).
func (h *harness) pump(lose func(ownership.Request) bool) (lost []ownership.Request) {
	h.hold = true
	for len(h.held) > 0 {
		r := h.held[0]
		h.held = h.held[1:]
		if lose(r) {
			lost = append(lost, r)
			h.step(ownership.Reply{ID: r.ID, Outcome: ownership.Unknown})
			continue
		}
		h.step(h.answer(r))
	}
	return lost
}

func TestResolverWatchesAnUnchangedRecord(t *testing.T) {
	h := newHarness(t)
	ownerWrite := func(r ownership.Request) bool { return r.Op == ownership.OpPut && r.Key == ownership.OwnerKey(room) }
	h.hold = true
	h.refs++
	h.step(ownership.Acquire{Actor: room, Ref: h.refs})
	lost := h.pump(ownerWrite) // every acquisition write goes unanswered and does not land
	if len(lost) == 0 {
		t.Fatal("the acquisition wrote nothing")
	}
	for range 30 { // let the acquisition give up and the resolver read a few times
		h.now = h.now.Add(500 * time.Millisecond)
		h.step(ownership.Tick{})
		lost = append(lost, h.pump(ownerWrite)...)
	}
	if !h.core.Tracks(room) {
		t.Fatal("the resolver stopped watching an unchanged record before its watch ran out")
	}
	// The first write lands now, late; nothing else of ours ever will.
	if late := h.answer(lost[0]); late.Outcome != ownership.Landed {
		t.Fatalf("the late create did not land: %v", late.Err)
	}
	for range 60 {
		h.now = h.now.Add(500 * time.Millisecond)
		h.step(ownership.Tick{})
		h.pump(func(ownership.Request) bool { return false })
	}
	if r := h.record(room); r.Held {
		t.Fatalf("a late-landing acquisition leaked: %+v (the resolver must keep watching an unchanged record)", r)
	}
	if h.core.Tracks(room) {
		t.Fatal("the core still tracks the room after the resolver released it")
	}
}

func countOf(effects []ownership.Effect, name string) int {
	n := 0
	for _, e := range effects {
		if c, ok := e.(ownership.Count); ok && c.Name == name {
			n += int(c.Add)
		}
	}
	return n
}

func reportsAbout(effects []ownership.Effect, key string) int {
	n := 0
	for _, e := range effects {
		if r, ok := e.(ownership.Report); ok && r.Key == key {
			n++
		}
	}
	return n
}

// TestSweepPassesOverUnreadableRecords: the re-read of parked records counts
// an unreadable record, reports it once, keeps the parked entry (it proves
// nothing), and goes on with the records after it.
func TestSweepPassesOverUnreadableRecords(t *testing.T) {
	h := newHarness(t)
	rooms := []ownership.Actor{{Class: "room", Name: "a"}, {Class: "room", Name: "b"}, {Class: "room", Name: "c"}}
	for _, r := range rooms {
		mustGrant(t, h.acquire(r), 1)
		h.step(ownership.SocketOpened{Actor: r})
		h.step(ownership.Idle{Actor: r, Gen: 1})
	}
	// Room a's record becomes garbage; room c's moves to another node behind
	// our back.
	if _, err := h.bucket.Put(ownership.OwnerKey(rooms[0]), []byte("\x00garbage"), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	moved := ownership.Record{Class: "room", Name: "c", Node: "n2", Instance: "n2.x", Generation: 5, Held: true, Nonce: "z"}
	if _, err := h.bucket.Put(ownership.OwnerKey(rooms[2]), ownership.EncodeRecord(moved), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	h.effects = nil
	cfg := h.core.Config()
	h.advance(time.Duration(cfg.RereadEvery)*cfg.SweepPeriod + time.Second)
	if got := countOf(h.effects, ownership.MetricSweepUnreadable); got != 1 {
		t.Fatalf("unreadable records counted %d times in one re-read pass, want 1", got)
	}
	if got := reportsAbout(h.effects, ownership.OwnerKey(rooms[0])); got != 1 {
		t.Fatalf("the unreadable record was reported %d times, want once", got)
	}
	if _, ok := h.core.Parked(rooms[0]); !ok {
		t.Fatal("an unreadable record dropped the parked entry; it proves nothing")
	}
	if _, ok := h.core.Parked(rooms[1]); !ok {
		t.Fatal("the room after the unreadable one lost its parked entry")
	}
	if _, ok := h.core.Parked(rooms[2]); ok {
		t.Fatal("the re-read kept a parked entry whose record names another holder")
	}
	h.effects = nil
	h.advance(time.Duration(cfg.RereadEvery) * cfg.SweepPeriod)
	if got := reportsAbout(h.effects, ownership.OwnerKey(rooms[0])); got != 0 {
		t.Fatalf("the unreadable record was reported again (%d)", got)
	}
}

// TestMembershipPassesOverUnreadableLeases: a garbage lease record among the
// nodes is reported, and the peers after it are still read and routed to.
func TestMembershipPassesOverUnreadableLeases(t *testing.T) {
	h := newHarness(t)
	if _, err := h.bucket.Put(ownership.NodeKey("m0"), []byte("not a lease"), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	peer := ownership.Lease{Node: "n9", Instance: "n9.a", Addr: "10.0.0.9:8080", TTLMilli: 10000, State: ownership.LeaseLive, Seq: 1, Nonce: "q"}
	if _, err := h.bucket.Put(ownership.NodeKey("n9"), ownership.EncodeLease(peer), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	other := ownership.Actor{Class: "room", Name: "theirs"}
	rec := ownership.Record{Class: "room", Name: "theirs", Node: "n9", Instance: "n9.a", Generation: 3, Held: true, Nonce: "r"}
	if _, err := h.bucket.Put(ownership.OwnerKey(other), ownership.EncodeRecord(rec), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	h.effects = nil
	h.advance(3 * time.Second) // a listing and the reads it starts
	if got := reportsAbout(h.effects, ownership.NodeKey("m0")); got != 1 {
		t.Fatalf("the unreadable lease was reported %d times, want once", got)
	}
	if r, ok := h.acquire(other).(ownership.Route); !ok || r.Node != "n9" || r.Addr != "10.0.0.9:8080" {
		t.Fatalf("an actor held by the live peer after the unreadable lease: %#v, want a route to n9", h.acquire(other))
	}
}

// TestSweepRereadsInBatchesAndResumes: each re-read pass reads at most
// SweepBatch parked records, the next pass goes on where the last stopped
// (wrapping around), and a pass cut short by a read without answer starts
// the next one at the first record it did not read.
func TestSweepRereadsInBatchesAndResumes(t *testing.T) {
	h := newHarnessWith(t, func(c *ownership.Config) { c.SweepBatch, c.RereadEvery = 3, 1 })
	var rooms []ownership.Actor
	for i := range 7 {
		r := ownership.Actor{Class: "room", Name: fmt.Sprintf("r%d", i)}
		rooms = append(rooms, r)
		mustGrant(t, h.acquire(r), 1)
		h.step(ownership.SocketOpened{Actor: r})
		h.step(ownership.Idle{Actor: r, Gen: 1})
	}
	period := h.core.Config().SweepPeriod
	// pass runs one sweep pass and returns the parked records it read; a
	// read of the room named lose goes unanswered.
	pass := func(lose string) []string {
		t.Helper()
		var read []string
		h.hold, h.held, h.effects = true, nil, nil
		for end := h.now.Add(period); h.now.Before(end); { // renewals keep landing meanwhile
			h.now = h.now.Add(100 * time.Millisecond)
			if h.now.Equal(end) {
				h.step(ownership.Sweep{}) // the sweeper's timer
			} else {
				h.step(ownership.Tick{})
			}
			h.pump(func(r ownership.Request) bool {
				if r.Op != ownership.OpGet || !strings.HasPrefix(r.Key, ownership.OwnersPrefix) {
					return false
				}
				name := r.Key[strings.LastIndexByte(r.Key, '/')+1:]
				read = append(read, name)
				return name == lose
			})
		}
		h.hold = false
		return read
	}
	want := func(got []string, names ...string) {
		t.Helper()
		if strings.Join(got, " ") != strings.Join(names, " ") {
			t.Fatalf("the pass read %v, want %v", got, names)
		}
	}
	want(pass(""), "r0", "r1", "r2")
	want(pass(""), "r3", "r4", "r5")
	want(pass("r0"), "r6", "r0", "r1") // wraps around; r0 goes unanswered
	want(pass(""), "r0", "r1", "r2")   // starts again at the first record not read
	for _, r := range rooms {
		if _, ok := h.core.Parked(r); !ok {
			t.Fatalf("%s lost its parked entry to a re-read that matched", r)
		}
	}
}

// TestRefusalsAfterExitSayDraining: once the Core has exited (a clean
// stop here), an acquisition is refused as by a node that takes no actor
// any more: draining, so that the caller asks a peer.
func TestRefusalsAfterExitSayDraining(t *testing.T) {
	h := newHarness(t)
	mustGrant(t, h.acquire(room), 1)
	h.step(ownership.Idle{Actor: room, Gen: 1})
	h.step(ownership.Stop{})
	if st := h.core.Status(h.now); st.Phase != "exited" {
		t.Fatalf("phase after a stop with nothing held: %q, want exited", st.Phase)
	}
	r, ok := h.acquire(room).(ownership.Refuse)
	if !ok || !r.Draining || !strings.Contains(r.Reason, "node stopped") || r.RetryAfter <= 0 {
		t.Fatalf("acquire after the exit: %+v; want a draining refusal with a retry time", r)
	}
}

// TestDrainRequestInTheListing: a drain request beside the node's lease
// is seen with the membership listing: the node drains (stuck and
// serving, alone), and serves again once the request is gone.
func TestDrainRequestInTheListing(t *testing.T) {
	h := newHarness(t)
	period := h.core.Config().LeasePeriod
	b := h.bucket.Bucket()
	if _, err := b.Put(context.Background(), ownership.DrainRequestKey("n1"), []byte("{}"), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	h.advance(2 * period)
	if st := h.core.Status(h.now); !st.Draining || !st.DrainStuck {
		t.Fatalf("after the request: %+v", st)
	}
	mustGrant(t, h.acquire(room), 1) // stuck: it serves
	if err := b.Delete(context.Background(), ownership.DrainRequestKey("n1"), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	h.advance(2 * period)
	if st := h.core.Status(h.now); st.Draining {
		t.Fatalf("after the request was deleted: %+v", st)
	}
}

// requests lists the requests among the effects since the last acquire, as
// "OP kind" (owners, actors, nodes).
func (h *harness) requests() []string {
	var out []string
	for _, e := range h.effects {
		if r, ok := e.(ownership.Request); ok {
			kind, _, _ := strings.Cut(r.Key, "/")
			out = append(out, r.Op.String()+" "+kind)
		}
	}
	return out
}

// parkRoom grants the room, opens a socket and parks it; the room's state
// holds what a commit of the hold at generation 1 wrote.
func parkRoom(h *harness) {
	h.t.Helper()
	mustGrant(h.t, h.acquire(room), 1)
	if _, err := h.bucket.Put(ownership.StateKey(room), ownership.EncodeState(ownership.StateHeader{Gen: 1, Seq: 1}, []byte("7")), ownership.IfAbsent()); err != nil {
		h.t.Fatal(err)
	}
	h.step(ownership.SocketOpened{Actor: room})
	h.step(ownership.Idle{Actor: room, Gen: 1})
	if _, ok := h.core.Parked(room); !ok {
		h.t.Fatal("idle with an open socket did not park")
	}
}

// A wake of a room parked here writes the record over the version its
// parked hold knows, without reading it, after the seal; the grant carries
// the state as sealed, which is the object's current version.
func TestWakeWritesTheRecordUnread(t *testing.T) {
	h := newHarness(t)
	parkRoom(h)
	g, ok := h.acquire(room).(ownership.Grant)
	if !ok || g.Gen != 2 {
		t.Fatalf("wake: got %#v, want a grant at generation 2", g)
	}
	if got, want := strings.Join(h.requests(), ", "), "get actors, put actors, put owners"; got != want {
		t.Fatalf("a wake's requests: %s, want %s", got, want)
	}
	if r := h.record(room); !r.Held || r.Generation != 2 {
		t.Fatalf("record after the wake: %+v", r)
	}
	obj, err := h.bucket.Get(ownership.StateKey(room))
	if err != nil {
		t.Fatal(err)
	}
	if g.State == nil || g.State.Gen != 2 || g.State.ETag != obj.ETag || string(g.State.Body) != string(obj.Body) {
		t.Fatalf("the grant's state %+v is not the sealed object %q at %s", g.State, obj.Body, obj.ETag)
	}
	hdr, payload, err := ownership.DecodeState(g.State.Body)
	if err != nil || hdr.Gen != 2 || string(payload) != "7" {
		t.Fatalf("sealed state: %+v %q %v", hdr, payload, err)
	}
}

// A wake whose record moved after all (rewritten here behind the core's
// back, as nothing in a cluster does while the lease is live) is refused
// the unread write, and then reads the record and acquires as any other.
func TestWakeWithAMovedRecordReads(t *testing.T) {
	h := newHarness(t)
	parkRoom(h)
	key := ownership.OwnerKey(room)
	obj, err := h.bucket.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.bucket.Put(key, obj.Body, ownership.IfMatch(obj.ETag)); err != nil {
		t.Fatal(err)
	}
	g, ok := h.acquire(room).(ownership.Grant)
	if !ok || g.Gen != 2 {
		t.Fatalf("wake: got %#v, want a grant at generation 2", g)
	}
	reqs := strings.Join(h.requests(), ", ")
	if reqs != "get actors, put actors, put owners, get owners, get actors, put actors, put owners" {
		t.Fatalf("a wake over a moved record: %s, want the unread write refused, then the record read", reqs)
	}
	if r := h.record(room); !r.Held || r.Generation != 2 || r.Node != "n1" {
		t.Fatalf("record after the wake: %+v", r)
	}
	if g.State == nil || g.State.Gen != 2 {
		t.Fatalf("the grant carries no state sealed at generation 2: %+v", g.State)
	}
}
