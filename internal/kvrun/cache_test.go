package kvrun

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// held is the sum of what c's kept items are charged, walking its list.
func held(c *Cache) (bytes int64, items int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for it := c.lru.next; it != &c.lru; it = it.next {
		bytes += it.size
		items++
	}
	return bytes, items
}

func TestCacheBound(t *testing.T) {
	const max = 10_000
	c := NewCache(max)
	rng := rand.New(rand.NewPCG(*seedFlag, 2))
	for i := range 5000 {
		k := cacheKey{run: fmt.Sprint("r", rng.IntN(20)), off: rng.Int64N(50)}
		if c.get(k) == nil {
			c.add(k, i, rng.Int64N(3000))
		}
		s := c.Stats()
		b, n := held(c)
		if s.Bytes > max || s.Bytes != b || s.Items != n || n != len(c.items) {
			t.Fatalf("after %d steps: stats %+v; the list holds %d bytes in %d items, the map %d", i, s, b, n, len(c.items))
		}
	}
	s := c.Stats()
	if s.Evictions == 0 || s.Hits == 0 || s.Misses == 0 {
		t.Errorf("stats %+v: want hits, misses and evictions", s)
	}
}

func TestCacheEviction(t *testing.T) {
	const size = 1000
	c := NewCache(2 * (size + itemOverhead))
	a, b, d, e := cacheKey{"r", 0}, cacheKey{"r", 1}, cacheKey{"r", 2}, cacheKey{"s", 0}
	c.add(a, "a", size)
	c.add(b, "b", size)
	if c.get(a) != "a" { // a is now the most recently used
		t.Fatal("a not kept")
	}
	c.add(d, "d", size)
	if c.get(b) != nil || c.get(a) != "a" || c.get(d) != "d" {
		t.Errorf("adding d to a cache full of b and a (used last): want b out")
	}
	c.add(e, "e", 3*size) // larger than the bound: not kept, nothing dropped
	if c.get(e) != nil || c.get(a) != "a" || c.get(d) != "d" {
		t.Errorf("an item larger than the bound was kept, or dropped others")
	}
	c.add(a, "again", size) // a second add of a key keeps the first
	if c.get(a) != "a" {
		t.Error("a second add replaced the first")
	}
	if s := c.Stats(); s.Evictions != 1 || s.Items != 2 || s.Bytes != 2*(size+itemOverhead) {
		t.Errorf("stats %+v", s)
	}
	var nilCache *Cache
	nilCache.add(a, "a", 1)
	if nilCache.get(a) != nil || nilCache.Stats() != (CacheStats{}) {
		t.Error("a nil cache kept something")
	}
}

// bigRun is a run of about 8 MiB in 16 KiB blocks.
func bigRun(t testing.TB) ([]Entry, []byte, Meta) {
	var es []Entry
	for i := range 64_000 {
		es = append(es, Entry{Key: fmt.Sprintf("user/%08d/profile", i), Value: val(100, byte(i))})
	}
	data, m := build(t, Options{}, es)
	return es, data, m
}

// TestCacheCharge: what the cache is charged covers the bytes it keeps.
func TestCacheCharge(t *testing.T) {
	ctx := context.Background()
	_, data, m := bigRun(t)
	c := NewCache(1 << 30)
	r := Open("r", m, (&object{data: data}).fetch, c)
	if _, err := collect(r.Iter(ctx, IterOptions{})); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Get(ctx, m.MinKey); !ok || err != nil {
		t.Fatal(ok, err)
	}
	s := c.Stats()
	if s.Bytes < m.Size-footerLen {
		t.Errorf("a cache holding all of a run of %d bytes is charged %d", m.Size, s.Bytes)
	}
	if s.Bytes > 2*m.Size {
		t.Errorf("a cache holding all of a run of %d bytes is charged %d", m.Size, s.Bytes)
	}
}

// TestFetches counts the ranged reads: a Get reads at most the index (with
// the filter) and one block when cold, nothing when warm; a short
// iteration reads a block or two whatever the run's size.
func TestFetches(t *testing.T) {
	ctx := context.Background()
	es, data, m := bigRun(t)
	obj := &object{data: data}
	r := Open("r", m, obj.fetch, NewCache(64<<20))
	bothSpan := span{m.IndexOff, m.IndexLen + m.FilterLen}
	indexSpan := span{m.IndexOff, m.IndexLen}

	key := es[len(es)/2].Key
	if _, ok, err := r.Get(ctx, key); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if f := obj.count(); len(f) != 2 || f[0] != bothSpan || f[1].n > 2*DefaultBlockSize {
		t.Errorf("cold Get: fetches %v, want the index and filter %v and one block", f, bothSpan)
	}
	if _, ok, err := r.Get(ctx, key); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if f := obj.count(); len(f) != 0 {
		t.Errorf("warm Get: fetches %v", f)
	}
	if _, ok, _ := r.Get(ctx, es[10].Key); !ok {
		t.Fatal("absent")
	}
	if f := obj.count(); len(f) != 1 {
		t.Errorf("Get in another block, index warm: fetches %v, want one block", f)
	}
	for _, k := range []string{"a", "zzz", es[0].Key[:5]} {
		r.Get(ctx, k)
	}
	if f := obj.count(); len(f) != 0 {
		t.Errorf("Get of keys outside the run's range: fetches %v", f)
	}
	// Absent keys inside the range: the filter keeps most from a block.
	const absent = 2000
	for i := range absent {
		if _, ok, _ := r.Get(ctx, fmt.Sprintf("user/%08d/profilf", i*31)); ok {
			t.Fatal("found an absent key")
		}
	}
	if f := obj.count(); len(f) > absent*3/100 {
		t.Errorf("%d Gets of absent keys read %d blocks", absent, len(f))
	}

	for _, opt := range []IterOptions{{}, {Reverse: true}, {Start: es[30_000].Key}, {End: es[30_000].Key, Reverse: true}, {Prefix: "user/0004"}, {Prefix: "user/0004", Reverse: true}} {
		cold := Open(fmt.Sprint("cold", fmtOpt(opt)), m, obj.fetch, NewCache(64<<20))
		it := cold.Iter(ctx, opt)
		if f := obj.count(); len(f) != 0 {
			t.Errorf("Iter(%s) read %v before Next", fmtOpt(opt), f)
		}
		want := window(es, opt)[:10]
		var got []Entry
		for range 10 {
			e, ok := it.Next()
			if !ok {
				t.Fatalf("Iter(%s): %v", fmtOpt(opt), it.Err())
			}
			got = append(got, e)
		}
		if !sameEntries(got, want) {
			t.Errorf("Iter(%s): %s, want %s", fmtOpt(opt), describe(got), describe(want))
		}
		if f := obj.count(); len(f) < 2 || len(f) > 3 || f[0] != indexSpan {
			t.Errorf("10 entries of Iter(%s) over a run of %d bytes: fetches %v, want the index %v and a block or two", fmtOpt(opt), m.Size, f, indexSpan)
		}
		// A Get after it reads the filter alone, then perhaps a block.
		k := want[0].Key
		if _, ok, err := cold.Get(ctx, k); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if f := obj.count(); len(f) != 1 || f[0] != (span{m.FilterOff, m.FilterLen}) {
			t.Errorf("Get(%q) in the first block iterated: fetches %v, want the filter alone", k, f)
		}
	}
	for _, opt := range []IterOptions{{End: "a"}, {Start: "zzz"}, {Prefix: "x"}, {Start: "b", End: "a"}} {
		if got, err := collect(r.Iter(ctx, opt)); len(got) != 0 || err != nil {
			t.Errorf("Iter(%s): %s, %v", fmtOpt(opt), describe(got), err)
		}
		if f := obj.count(); len(f) != 0 {
			t.Errorf("Iter(%s) outside the run's range: fetches %v", fmtOpt(opt), f)
		}
	}
}

// TestConcurrentReaders reads several runs from many goroutines through
// one cache too small for all of them (run with -race).
func TestConcurrentReaders(t *testing.T) {
	ctx := context.Background()
	type run struct {
		es []Entry
		r  *Reader
	}
	c := NewCache(256 << 10)
	var runs []run
	for i := range 4 {
		rng := rand.New(rand.NewPCG(*seedFlag, uint64(10+i)))
		es := randEntries(rng, 2000)
		data, m := build(t, Options{BlockSize: 1 << 10}, es)
		runs = append(runs, run{es, Open(fmt.Sprint("run", i), m, (&object{data: data}).fetch, c)})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(*seedFlag, uint64(100+g)))
			for range 300 {
				ru := runs[rng.IntN(len(runs))]
				if len(ru.es) == 0 {
					continue
				}
				e := ru.es[rng.IntN(len(ru.es))]
				if rng.IntN(4) == 0 {
					opt := IterOptions{Start: e.Key, Reverse: rng.IntN(2) == 0}
					got, err := collect(ru.r.Iter(ctx, opt))
					if err != nil || !sameEntries(got, window(ru.es, opt)) {
						errs <- fmt.Errorf("Iter(%s): %v", fmtOpt(opt), err)
						return
					}
					continue
				}
				got, ok, err := ru.r.Get(ctx, e.Key)
				if err != nil || !ok || !sameEntries([]Entry{got}, []Entry{e}) {
					errs <- fmt.Errorf("Get(%q): %s %v %v", e.Key, describe([]Entry{got}), ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := c.Stats(); s.Bytes > 256<<10 || s.Evictions == 0 {
		t.Errorf("stats %+v", s)
	}
}
