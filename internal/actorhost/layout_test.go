package actorhost_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/internal/s3test"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
	"github.com/wasmkeep/wasmkeep/ownership/s3store"
)

// The four properties of docs/PROTOCOL.md §6 for the layout of a head over
// runs (layout.go), each on every store: the directory store, the memory
// store (with faults where the test needs them) and versitygw. The
// simulation checks properties 1 and 2 under lost and late writes, and
// the seal has its own tests in ownership.

// bulk is a class that writes many keys at once. POST ?n=N&size=S&from=F
// puts keys k<F>..k<F+N-1>, each a value of S bytes that names it and
// tag; GET /<key> reads one (404 when absent); GET ?list[&start=&limit=]
// lists the keys, one a line; DELETE removes every key; PUT /<key> puts
// the body; DELETE /<key> removes it.
type bulk struct{}

func bulkValue(key, tag string, size int) []byte {
	v := []byte(key + "=" + tag + ";")
	return bytes.Repeat(v, size/len(v)+1)[:size]
}

func (bulk) Handle(_ context.Context, r *actors.Request, st actors.Storage) (*actors.Response, error) {
	key := strings.TrimPrefix(r.Path, "/")
	switch {
	case r.Method == http.MethodPost:
		n, _ := strconv.Atoi(r.Query.Get("n"))
		size, _ := strconv.Atoi(r.Query.Get("size"))
		from, _ := strconv.Atoi(r.Query.Get("from"))
		for i := from; i < from+n; i++ {
			k := fmt.Sprintf("k%07d", i)
			if err := st.Put(k, bulkValue(k, r.Query.Get("tag"), size)); err != nil {
				return nil, err
			}
		}
		return actors.Text(http.StatusOK, "ok"), nil
	case r.Method == http.MethodGet && key == "":
		limit, _ := strconv.Atoi(r.Query.Get("limit"))
		es, err := st.List(actors.ListOptions{Start: r.Query.Get("start"), Limit: limit, Reverse: r.Query.Has("reverse")})
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, e := range es {
			fmt.Fprintf(&b, "%s %d\n", e.Key, len(e.Value))
		}
		return actors.Text(http.StatusOK, b.String()), nil
	case r.Method == http.MethodGet:
		v, ok := st.Get(key)
		if !ok {
			return actors.Text(http.StatusNotFound, ""), nil
		}
		return &actors.Response{Status: http.StatusOK, Body: v}, nil
	case r.Method == http.MethodPut:
		return actors.Text(http.StatusOK, ""), st.Put(key, r.Body)
	case r.Method == http.MethodDelete && key == "":
		return actors.Text(http.StatusOK, ""), actors.DeleteAll(st)
	case r.Method == http.MethodDelete:
		st.Delete(key)
		return actors.Text(http.StatusOK, ""), nil
	}
	return actors.Text(http.StatusMethodNotAllowed, ""), nil
}

var bulkActor = ownership.Actor{Class: "bulk", Name: "b"}

// bulkPart is the run part size of bulk hosts: small, so that the tests'
// merges cut runs of more than one part, listed through manifests.
const bulkPart = 16 << 10

func bulkHost(t *testing.T, b ownership.Bucket) *actorhost.Host {
	t.Helper()
	return bulkHostOf(t, b, nil)
}

// bulkHostOf is bulkHost with the keeper o (a fake one that lets every
// hold act when nil).
func bulkHostOf(t *testing.T, b ownership.Bucket, o actorhost.Keeper) *actorhost.Host {
	t.Helper()
	reg := actors.BuiltIn()
	if err := reg.Register("bulk", bulk{}); err != nil {
		t.Fatal(err)
	}
	return hostOf(t, actorhost.Config{Bucket: b, Registry: reg, RunPart: bulkPart, Keeper: o})
}

// moveOn hibernates h's actors and returns another host on b, for the
// hold at the next generation.
func moveOn(t *testing.T, h *actorhost.Host, b ownership.Bucket, gen ownership.Generation) (*actorhost.Host, ownership.Generation) {
	t.Helper()
	awaitMerges(t, h)
	if err := h.HibernateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	return bulkHost(t, b), gen + 1
}

// awaitMerges waits for the merges under way on h to end. A test that
// hibernates its actors to look at what merges did waits for them first:
// a merge under way is cancelled by the hibernation, and on a loaded
// machine the merges a test's writes called for may all still be under way
// (two layout tests failed so, one run in six, with another test suite
// loading the machine).
func awaitMerges(t *testing.T, h *actorhost.Host) {
	t.Helper()
	if err := h.AwaitMerges(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// send delivers one request to the bulk actor at gen and returns its
// answer; a delivery that fails fails the test. remove sends a DELETE and
// wants it answered 200.
func send(t *testing.T, h *actorhost.Host, gen ownership.Generation, method, path, query string, body []byte) *actors.Response {
	t.Helper()
	r := &actors.Request{Method: method, Path: path, Header: http.Header{}, Body: body}
	r.Query = map[string][]string{}
	for kv := range strings.SplitSeq(query, "&") {
		if k, v, _ := strings.Cut(kv, "="); k != "" {
			r.Query.Set(k, v)
		}
	}
	resp, err := h.Deliver(t.Context(), bulkActor, gen, r)
	if err != nil {
		t.Fatalf("%s %s?%s at %d: %v", method, path, query, gen, err)
	}
	return resp
}

func remove(t *testing.T, h *actorhost.Host, gen ownership.Generation, path string) {
	t.Helper()
	if r := send(t, h, gen, http.MethodDelete, path, "", nil); r.Status != http.StatusOK {
		t.Fatalf("DELETE %q at %d: %d %s", path, gen, r.Status, r.Body)
	}
}

// model is what the bulk actor should hold: key to value.
type model map[string][]byte

func (m model) fill(t *testing.T, h *actorhost.Host, gen ownership.Generation, from, n, size int, tag string) {
	t.Helper()
	if r := send(t, h, gen, http.MethodPost, "", fmt.Sprintf("n=%d&size=%d&from=%d&tag=%s", n, size, from, tag), nil); r.Status != http.StatusOK {
		t.Fatalf("fill: %d %s", r.Status, r.Body)
	}
	m.add(from, n, size, tag)
}

// add records what a fill of n keys from from put.
func (m model) add(from, n, size int, tag string) {
	for i := from; i < from+n; i++ {
		k := fmt.Sprintf("k%07d", i)
		m[k] = bulkValue(k, tag, size)
	}
}

// check reads every key of m and a few absent ones, and lists the actor,
// and wants them as m says.
func (m model) check(t *testing.T, h *actorhost.Host, gen ownership.Generation) {
	t.Helper()
	var want strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&want, "%s %d\n", k, len(m[k]))
		if r := send(t, h, gen, http.MethodGet, "/"+k, "", nil); r.Status != http.StatusOK || !bytes.Equal(r.Body, m[k]) {
			t.Fatalf("GET %s at %d: %d, %d bytes %.40q; want %d bytes %.40q", k, gen, r.Status, len(r.Body), r.Body, len(m[k]), m[k])
		}
	}
	if r := send(t, h, gen, http.MethodGet, "/k9999999", "", nil); r.Status != http.StatusNotFound {
		t.Fatalf("GET of an absent key: %d %.40q", r.Status, r.Body)
	}
	if r := send(t, h, gen, http.MethodGet, "", "list", nil); string(r.Body) != want.String() {
		t.Fatalf("list at %d: %d lines, want %d", gen, strings.Count(string(r.Body), "\n"), len(m))
	}
}

// stores runs f on every store, each subtest with a fresh bucket.
func stores(t *testing.T, f func(t *testing.T, b ownership.Bucket)) {
	t.Run("memory", func(t *testing.T) { f(t, memstore.New(memstore.Faults{})) })
	t.Run("directory", func(t *testing.T) {
		d, err := dirstore.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		f(t, d)
	})
	t.Run("versitygw", func(t *testing.T) {
		if testing.Short() {
			t.Skip("versitygw: not in -short")
		}
		srv := s3test.Start(t)
		s, err := s3store.New(t.Context(), srv.Config("layout/"))
		if err != nil {
			t.Fatal(err)
		}
		f(t, s)
	})
}

// objects lists the keys under prefix.
func objects(t *testing.T, b ownership.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	after := ""
	for {
		page, err := b.List(t.Context(), prefix, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			keys = append(keys, e.Key)
			after = e.Key
		}
		if !page.Truncated || len(page.Entries) == 0 {
			return keys
		}
	}
}

// head reads the bulk actor's head.
func head(t *testing.T, b ownership.Bucket) actorhost.Head {
	t.Helper()
	obj, err := b.Get(t.Context(), actorstore.StateKey(bulkActor))
	if err != nil {
		t.Fatal(err)
	}
	h, err := actorhost.HeadOf(t.Context(), b, bulkActor, obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Property 1: every acknowledged write survives the hold moving on, over
// many flushes and merges of runs, overwrites, deletes and a DeleteAll,
// and a hold that follows at a later generation on another host reads
// exactly what was acknowledged.
func TestLayoutAcknowledgedWritesSurvive(t *testing.T) {
	stores(t, func(t *testing.T, b ownership.Bucket) {
		m := model{}
		gen := ownership.Generation(1)
		h := bulkHost(t, b)
		var runWrites int64 // flushes and merges, on every host
		for i := range 24 {
			m.fill(t, h, gen, i*10, 20, 300, "a"+strconv.Itoa(i)) // overlapping: half overwrites
			if i%5 == 4 {
				k := fmt.Sprintf("k%07d", i*3)
				remove(t, h, gen, "/"+k)
				delete(m, k)
			}
			if i%8 == 7 { // the hold moves on: another host, a later generation
				m.check(t, h, gen)
				runWrites += h.StorageStats().RunWrites
				h, gen = moveOn(t, h, b, gen)
			}
		}
		m.check(t, h, gen)
		runWrites += h.StorageStats().RunWrites
		// The oldest run is of several parts by now, listed through its
		// manifest, which every move above read.
		if hd := head(t, b); len(hd.Listed) == 0 || runWrites <= int64(len(hd.Listed)) || len(hd.Manifests) == 0 {
			t.Fatalf("the head lists %d run objects (%d manifests) of %d written: the test wrote too little to flush, merge and cut", len(hd.Listed), len(hd.Manifests), runWrites)
		}
		remove(t, h, gen, "")
		m = model{}
		m.fill(t, h, gen, 5, 3, 10, "after")
		gen++
		h = bulkHost(t, b)
		m.check(t, h, gen)
	})
}

// Property 2: a run that a superseded hold writes, landing after a later
// hold took over, is never read: the head the later hold reads does not
// list it. A later hold's merge then sweeps it away.
func TestLayoutSupersededRunNeverRead(t *testing.T) {
	stores(t, func(t *testing.T, b ownership.Bucket) {
		m := model{}
		old := bulkHost(t, b)
		m.fill(t, old, 1, 0, 20, 300, "old")
		newer := bulkHost(t, b)
		m.check(t, newer, 2)
		// The old hold's late run: the same keys, other values, named by
		// its generation, landing now.
		sb := memstore.New(memstore.Faults{})
		stale := bulkHost(t, sb)
		staleModel := model{}
		staleModel.fill(t, stale, 1, 0, 40, 300, "stale")
		if err := stale.HibernateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
		late := ownership.RunKey(bulkActor, 1, 4242)
		runBody := onlyRun(t, sb)
		if _, err := b.Put(t.Context(), late, runBody, ownership.IfAbsent()); err != nil {
			t.Fatal(err)
		}
		m.check(t, newer, 2)
		// A wake reads only what the head lists (a later host's, at the
		// end, reads what was acknowledged): the head does not list the
		// late run.
		if slices.Contains(head(t, b).Listed, late) {
			t.Fatalf("the head lists the superseded hold's late run %s", late)
		}
		// Enough writes at generation 2 for a merge, whose sweep deletes
		// the late run.
		for i := range 12 {
			m.fill(t, newer, 2, 100+i*20, 20, 300, "new")
		}
		m.check(t, newer, 2)
		awaitMerges(t, newer)
		if err := newer.HibernateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
		m.check(t, bulkHost(t, b), 3)
		if slices.Contains(objects(t, b, ownership.RunsPrefix(bulkActor)), late) {
			t.Fatalf("the superseded hold's run %s is still there after merges", late)
		}
	})
}

// onlyRun returns the bytes of the first run object that b holds for the
// bulk actor.
func onlyRun(t *testing.T, b ownership.Bucket) []byte {
	t.Helper()
	keys := objects(t, b, ownership.RunsPrefix(bulkActor))
	if len(keys) == 0 {
		t.Fatal("no run written")
	}
	obj, err := b.Get(t.Context(), keys[0])
	if err != nil {
		t.Fatal(err)
	}
	return obj.Body
}

// Property 3: what merges replaced, what a DeleteAll dropped and what
// superseded holds left is deleted: once the last head's garbage is
// collected, the actor's runs are exactly those its head lists.
func TestLayoutNothingLeftBehind(t *testing.T) {
	stores(t, func(t *testing.T, b ownership.Bucket) {
		m := model{}
		gen := ownership.Generation(1)
		h := bulkHost(t, b)
		for i := range 30 {
			m.fill(t, h, gen, i*20, 20, 300, "x")
			if i == 15 {
				remove(t, h, gen, "")
				m = model{}
			}
			if i%10 == 9 {
				h, gen = moveOn(t, h, b, gen)
			}
			if i == 10 {
				// What a superseded hold left: a run and a manifest of
				// generation 1 that landed after its last head, which no
				// head lists.
				for _, n := range []uint64{4242, 4243} {
					if _, err := b.Put(t.Context(), ownership.RunKey(bulkActor, 1, n), []byte("late"), ownership.IfAbsent()); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		// One more small commit: it deletes what the last head lists as
		// garbage.
		m.fill(t, h, gen, 0, 1, 10, "last")
		m.fill(t, h, gen, 1, 1, 10, "last")
		m.check(t, h, gen)
		awaitMerges(t, h)
		if err := h.HibernateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The head may still name garbage whose delete landed after it
		// (a merge's own commit comes last): the next commit drops the
		// names. The bucket holds what the head lists, and nothing else.
		hd := head(t, b)
		have := objects(t, b, ownership.RunsPrefix(bulkActor))
		slices.Sort(hd.Listed)
		if !slices.Equal(have, hd.Listed) || len(hd.Manifests) == 0 {
			t.Fatalf("runs in the bucket %v; the head lists %v (manifests %v), garbage %v", have, hd.Listed, hd.Manifests, hd.Garbage)
		}
	})
}

// The deletes of garbage do not hold back the answers of events: with
// every delete of a run stuck, events that follow a merge are answered,
// and once the deletes go through the bucket holds what the head lists.
func TestGarbageDeletesDoNotHoldAnswers(t *testing.T) {
	g := &deleteGate{Bucket: memstore.New(memstore.Faults{}), blocked: make(chan struct{}), open: make(chan struct{})}
	defer g.release()
	h := bulkHost(t, g)
	m := model{}
	for i := 0; ; i++ {
		m.fill(t, h, 1, i*20, 20, 300, "g")
		select {
		case <-g.blocked:
		default:
			if i == 100 {
				t.Fatal("100 commits and no delete of garbage")
			}
			continue
		}
		break
	}
	// Events after the merge, in a goroutine: a test's goroutine must not
	// wait for what may never come.
	answered := make(chan error, 1)
	go func() {
		for i := range 5 {
			r := &actors.Request{Method: http.MethodPost, Header: http.Header{},
				Query: url.Values{"n": {"20"}, "size": {"300"}, "from": {strconv.Itoa(10000 + i*20)}, "tag": {"after"}}}
			if resp, err := h.Deliver(context.Background(), bulkActor, 1, r); err != nil || resp.Status != http.StatusOK {
				answered <- fmt.Errorf("fill %d: %v %v", i, resp, err)
				return
			}
		}
		answered <- nil
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("events were not answered while the deletes of garbage were stuck")
	}
	m.add(10000, 100, 300, "after")
	g.release()
	m.check(t, h, 1)
	if err := h.HibernateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	hd := head(t, g)
	have := objects(t, g, ownership.RunsPrefix(bulkActor))
	slices.Sort(hd.Listed)
	if !slices.Equal(have, hd.Listed) {
		t.Fatalf("runs in the bucket %v; the head lists %v, garbage %v", have, hd.Listed, hd.Garbage)
	}
}

// deleteGate holds every delete of the bulk actor's runs until released.
type deleteGate struct {
	ownership.Bucket
	blocked, open chan struct{}
	stop, opened  sync.Once
}

func (g *deleteGate) release() { g.opened.Do(func() { close(g.open) }) }

func (g *deleteGate) Delete(ctx context.Context, key string, cond ownership.Condition) error {
	if strings.HasPrefix(key, ownership.RunsPrefix(bulkActor)) {
		g.stop.Do(func() { close(g.blocked) })
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Bucket.Delete(ctx, key, cond)
}

// Property 4: the reads after a wake are bounded by the runs the head
// lists, not by the actor's size or history: the head's read, then for
// one key at most an index and a block of each run (the bloom filter
// comes with the index).
func TestLayoutWakeReadsAreBounded(t *testing.T) {
	stores(t, func(t *testing.T, b ownership.Bucket) {
		h := bulkHost(t, b)
		for i := range 40 {
			m := model{}
			m.fill(t, h, 1, i*50, 50, 1000, "w")
		}
		if err := h.HibernateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
		hd := head(t, b)
		woken := bulkHost(t, b)
		r := send(t, woken, 2, http.MethodGet, "/k0000007", "", nil)
		if want := bulkValue("k0000007", "w", 1000); r.Status != http.StatusOK || !bytes.Equal(r.Body, want) {
			t.Fatalf("GET after the wake: %d %.40q", r.Status, r.Body)
		}
		// The woken host's own counts: the head, the manifest of each run
		// of more than one part, and at most an index and a block of each
		// run, however many parts it has.
		st := woken.StorageStats()
		if len(hd.Manifests) == 0 || len(hd.Listed) < 2*hd.Runs {
			t.Fatalf("the head lists %d runs in %d objects, %d of them manifests: the test wrote too little to cut runs into parts", hd.Runs, len(hd.Listed), len(hd.Manifests))
		}
		if st.HeadReads != 1 || st.ManifestReads != int64(len(hd.Manifests)) || st.RunReads > int64(2*hd.Runs) || st.Cache.Misses < st.RunReads {
			t.Fatalf("a wake and one read of a 2 MB actor in %d runs, %d manifests: %+v; want 1 head read, %d manifest reads and at most %d ranged reads, each after a cache miss",
				hd.Runs, len(hd.Manifests), st, len(hd.Manifests), 2*hd.Runs)
		}
		// Again: from the node's block cache.
		send(t, woken, 2, http.MethodGet, "/k0000007", "", nil)
		if again := woken.StorageStats(); again.RunReads != st.RunReads || again.HeadReads != 1 || again.ManifestReads != st.ManifestReads {
			t.Fatalf("a second read of the same key: %+v, want no more reads than %+v", again, st)
		}
	})
}

// An actor stored before runs (format 1) is read, and its next commit
// writes it in format 2.
func TestLayoutReadsFormat1(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	kv := map[string][]byte{"k0000001": []byte("one"), "k0000002": []byte("two")}
	body := ownership.EncodeState(ownership.StateHeader{Gen: 1, Seq: 3}, actorhost.EncodeFormat1(kv))
	if _, err := b.Put(t.Context(), actorstore.StateKey(bulkActor), body, ownership.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	h := bulkHost(t, b)
	m := model(kv)
	m.check(t, h, 2)
	if f := head(t, b).Format; f != 1 {
		t.Fatalf("a read alone rewrote the head: format %d", f)
	}
	m.fill(t, h, 2, 3, 1, 5, "new")
	if f := head(t, b).Format; f != 2 {
		t.Fatalf("the commit after a format 1 head wrote format %d, want 2", f)
	}
	m.check(t, bulkHost(t, b), 3)
}

// oneRun returns an in-memory bucket where the bulk actor, hibernated,
// lists one run, and that run's key.
func oneRun(t *testing.T) (*memstore.Store, []string) {
	t.Helper()
	inner := memstore.New(memstore.Faults{})
	h := bulkHost(t, inner)
	m := model{}
	m.fill(t, h, 1, 0, 20, 300, "r")
	if err := h.HibernateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	listed := head(t, inner).Listed
	if len(listed) != 1 {
		t.Fatalf("runs %v, want one", listed)
	}
	return inner, listed
}

// A run that cannot be read fails the event as unavailable, never as a
// missing key; one the head lists but the bucket lost is damage.
func TestLayoutRunReadFailures(t *testing.T) {
	inner, listed := oneRun(t)
	fb := &readFailBucket{Bucket: inner, key: listed[0]}
	h2 := bulkHost(t, fb)
	r := &actors.Request{Method: http.MethodGet, Path: "/k0000003", Header: http.Header{}}
	if _, err := h2.Deliver(t.Context(), bulkActor, 2, r); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("a read of a run that fails: %v, want unavailable", err)
	}
	// A class that recovers the read's panic and answers 200 all the same
	// does not get its answer out: the event fails.
	reg := actors.BuiltIn()
	if err := reg.Register("bulk", actors.ClassFunc(func(_ context.Context, r *actors.Request, st actors.Storage) (resp *actors.Response, err error) {
		defer func() {
			if recover() != nil {
				resp, err = actors.Text(http.StatusOK, "nothing to see"), nil
			}
		}()
		st.Get("k0000003")
		return actors.Text(http.StatusOK, "read"), nil
	})); err != nil {
		t.Fatal(err)
	}
	hs := newHost(t, fb, &fakeKeeper{}, reg)
	if resp, err := hs.Deliver(t.Context(), bulkActor, 2, r); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("a read failure the class swallowed: %v %v, want unavailable", resp, err)
	}
	if err := inner.Delete(t.Context(), listed[0], ownership.Always()); err != nil {
		t.Fatal(err)
	}
	h3 := bulkHost(t, inner)
	var de *actorhost.DamagedError
	if _, err := h3.Deliver(t.Context(), bulkActor, 3, r); !errors.As(err, &de) {
		t.Fatalf("a read of a listed run that is gone: %v, want damaged", err)
	}
}

// A run that the hold's head lists and the bucket no longer holds is not
// damage once the hold has ended: a later holder's merge deletes what its
// own head no longer lists, and a node that lost the actor (stopped, then
// fenced) may still be running an event on the head it read. The event
// fails as unavailable, and the keeper is not told of damage.
func TestLayoutRunGoneAfterTheHoldEnded(t *testing.T) {
	inner, listed := oneRun(t)
	o := &fakeKeeper{}
	h2 := bulkHostOf(t, inner, o)
	// The wake at generation 2 reads the head, not the run.
	if r := send(t, h2, 2, http.MethodPut, "/fresh", "", []byte("v")); r.Status != http.StatusOK {
		t.Fatalf("PUT at 2: %d %s", r.Status, r.Body)
	}
	// A later holder took over and merged the run away.
	o.revoke(2)
	if err := inner.Delete(t.Context(), listed[0], ownership.Always()); err != nil {
		t.Fatal(err)
	}
	r := &actors.Request{Method: http.MethodGet, Path: "/k0000003", Header: http.Header{}}
	_, err := h2.Deliver(t.Context(), bulkActor, 2, r)
	notDamage(t, "a read of a run gone after the hold ended", err, o)
}

// notDamage wants err to refuse an event of a hold that ended as
// unavailable, not as damage, and o, its keeper, told of no damage.
func notDamage(t *testing.T, what string, err error, o *fakeKeeper) {
	t.Helper()
	var de *actorhost.DamagedError
	if errors.As(err, &de) || !errors.Is(err, actors.ErrUnavailable) || !strings.Contains(err.Error(), "hold ended") {
		t.Fatalf("%s: %v, want unavailable", what, err)
	}
	o.mu.Lock()
	told := o.damaged
	o.mu.Unlock()
	if len(told) != 0 {
		t.Fatalf("%s: the keeper was told of damage: %q", what, told)
	}
}

// A manifest whose read fails fails the load as unavailable; one the head
// lists but the bucket lost is damage, and the head is left as it is.
func TestLayoutManifestReadFailures(t *testing.T) {
	stores(t, func(t *testing.T, inner ownership.Bucket) {
		h := bulkHost(t, inner)
		m := model{}
		for i := range 16 {
			m.fill(t, h, 1, i*20, 20, 1000, "man")
		}
		// The sixteenth run starts a merge, whose parts get a manifest: a
		// stop cuts a merge under way short, so it is waited for.
		awaitMerges(t, h)
		if err := h.HibernateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
		hd := head(t, inner)
		if len(hd.Manifests) == 0 {
			t.Fatalf("the head lists no manifest: %+v", hd)
		}
		fb := &readFailBucket{Bucket: inner, key: hd.Manifests[0]}
		r := &actors.Request{Method: http.MethodGet, Path: "/k0000003", Header: http.Header{}}
		if _, err := bulkHost(t, fb).Deliver(t.Context(), bulkActor, 2, r); !errors.Is(err, actors.ErrUnavailable) {
			t.Fatalf("a wake whose manifest read fails: %v, want unavailable", err)
		}
		m.check(t, bulkHost(t, inner), 3)
		before, err := inner.Get(t.Context(), actorstore.StateKey(bulkActor))
		if err != nil {
			t.Fatal(err)
		}
		if err := inner.Delete(t.Context(), hd.Manifests[0], ownership.Always()); err != nil {
			t.Fatal(err)
		}
		// A hold that has ended by the time its load finds the manifest
		// gone does not call that damage (a later holder may have merged
		// it away): the event is refused as not run.
		ended := &fakeKeeper{}
		// The hold ends as the load reads the manifest.
		eb := &onReadBucket{Bucket: inner, key: hd.Manifests[0], read: func() { ended.revoke(4) }}
		hEnded := bulkHostOf(t, eb, ended)
		_, err = hEnded.Deliver(t.Context(), bulkActor, 4, r)
		notDamage(t, "a wake of an ended hold whose listed manifest is gone", err, ended)
		var de *actorhost.DamagedError
		if _, err := bulkHost(t, inner).Deliver(t.Context(), bulkActor, 4, r); !errors.As(err, &de) || !strings.Contains(err.Error(), "manifest") {
			t.Fatalf("a wake whose listed manifest is gone: %v, want damaged, naming the manifest", err)
		}
		// The load's fence restamped the head (no seal came with the
		// grant), and nothing else was written: it lists what it listed.
		after, err := inner.Get(t.Context(), actorstore.StateKey(bulkActor))
		if err != nil {
			t.Fatal(err)
		}
		_, was, _ := ownership.DecodeState(before.Body)
		_, is, err := ownership.DecodeState(after.Body)
		if err != nil || !bytes.Equal(is, was) {
			t.Fatalf("the damaged actor's head was written over: %v", err)
		}
	})
}

// readFailBucket fails every read of one key with an unknown outcome.
type readFailBucket struct {
	ownership.Bucket
	key string
}

func (b *readFailBucket) Get(ctx context.Context, key string) (ownership.Object, error) {
	if key == b.key {
		return ownership.Object{}, fmt.Errorf("get %s: %w", key, ownership.ErrUnknownOutcome)
	}
	return b.Bucket.Get(ctx, key)
}

// onReadBucket calls read before each read of one key.
type onReadBucket struct {
	ownership.Bucket
	key  string
	read func()
}

func (b *onReadBucket) Get(ctx context.Context, key string) (ownership.Object, error) {
	if key == b.key {
		b.read()
	}
	return b.Bucket.Get(ctx, key)
}

// Property 1 with faults: over a store that loses requests and replies,
// answers 503 and lands writes late, every write the actor acknowledged
// is read back, and a write whose event failed is either all there or
// not at all (its commit's outcome was unknown).
func TestLayoutAcknowledgedWritesSurviveFaults(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			b := memstore.New(memstore.Faults{Seed: seed, LoseRequest: 0.03, LoseReply: 0.03, LandLate: 0.03,
				UnavailableApplied: 0.02, UnavailableNotApplied: 0.02})
			may := map[string][][]byte{} // key: the values it may hold (nil: absent)
			var ranges [][2]int          // event i's keys: from, n
			gen := ownership.Generation(1)
			h := bulkHost(t, b)
			for i := range 60 {
				tag := "f" + strconv.Itoa(i)
				from, n := (i*7)%200, 20
				ranges = append(ranges, [2]int{from, n})
				q := fmt.Sprintf("n=%d&size=300&from=%d&tag=%s", n, from, tag)
				r := &actors.Request{Method: http.MethodPost, Header: http.Header{}, Query: map[string][]string{}}
				for kv := range strings.SplitSeq(q, "&") {
					k, v, _ := strings.Cut(kv, "=")
					r.Query.Set(k, v)
				}
				resp, err := h.Deliver(t.Context(), bulkActor, gen, r)
				ok := err == nil && resp.Status == http.StatusOK
				for j := from; j < from+n; j++ {
					k := fmt.Sprintf("k%07d", j)
					v := bulkValue(k, tag, 300)
					switch vals, seen := may[k]; {
					case ok:
						may[k] = [][]byte{v}
					case !seen:
						may[k] = [][]byte{nil, v} // absent, or the write landed
					default:
						may[k] = append(vals, v)
					}
				}
				if i%20 == 19 {
					h.HibernateAll(context.Background()) // a commit in flight may fail: its events were not acknowledged
					gen++
					h = bulkHost(t, b)
				}
			}
			b.Settle()
			check := bulkHost(t, b)
			gen++
			wrote := map[string]int{} // key: the event whose value it holds (-1: none)
			for k, vals := range may {
				var got *actors.Response
				for try := 0; try < 50 && got == nil; try++ {
					r := &actors.Request{Method: http.MethodGet, Path: "/" + k, Header: http.Header{}}
					if resp, err := check.Deliver(t.Context(), bulkActor, gen, r); err == nil {
						got = resp
					}
				}
				if got == nil {
					t.Fatalf("GET %s failed 50 times", k)
				}
				held := got.Body
				if got.Status == http.StatusNotFound {
					held = nil
				}
				if got.Status != http.StatusOK && got.Status != http.StatusNotFound ||
					!slices.ContainsFunc(vals, func(v []byte) bool { return (v == nil) == (held == nil) && bytes.Equal(v, held) }) {
					t.Fatalf("%s holds %d %.40q, want one of %d values, the acknowledged last", k, got.Status, got.Body, len(vals))
				}
				wrote[k] = -1
				if held != nil {
					_, tag, _ := strings.Cut(string(held[:bytes.IndexByte(held, ';')]), "=")
					wrote[k], _ = strconv.Atoi(strings.TrimPrefix(tag, "f"))
				}
			}
			// An event's writes are all there or not at all: once one key
			// holds event i's value, event i landed, and every key it
			// wrote holds its value or a later event's.
			for i, r := range ranges {
				keys := make([]string, r[1])
				landed := false
				for j := range keys {
					keys[j] = fmt.Sprintf("k%07d", r[0]+j)
					landed = landed || wrote[keys[j]] == i
				}
				for _, k := range keys {
					if landed && wrote[k] < i {
						t.Fatalf("event %d landed (a key holds its value), yet %s holds event %d's", i, k, wrote[k])
					}
				}
			}
		})
	}
}
