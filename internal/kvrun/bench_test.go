package kvrun

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// benchEntries returns about 100 MiB of entries: keys of 26 bytes under
// a few prefixes, values of 100 bytes (sharing one buffer).
func benchEntries() []Entry {
	const total = 100 << 20
	const vlen = 100
	vals := val(1<<20, 7)
	var es []Entry
	for n, i := 0, 0; n < total; i++ {
		k := fmt.Sprintf("user/%010d/profile", i)
		off := (i * 131) % (len(vals) - vlen)
		es = append(es, Entry{Key: k, Value: vals[off : off+vlen : off+vlen]})
		n += len(k) + vlen
	}
	return es
}

// benchRun is the run of benchEntries, and some of its keys: the entries
// themselves are not kept, so that the benchmarks' heap is mostly the run
// and the cache, as on a node.
type benchRun struct {
	keys []string // every 50th key, in order
	data []byte
	m    Meta
}

var benchRunOnce = sync.OnceValue(func() benchRun {
	es := benchEntries()
	w := NewWriter(Options{})
	for _, e := range es {
		if err := w.Add(e); err != nil {
			panic(err)
		}
	}
	data, m, err := w.Finish()
	if err != nil {
		panic(err)
	}
	var keys []string
	for i := 0; i < len(es); i += 50 {
		keys = append(keys, es[i].Key)
	}
	return benchRun{keys, data, m}
})

// fetch serves ranged reads from the run in memory, copying as a reply
// from the bucket would.
func (br benchRun) fetch(_ context.Context, off, n int64) ([]byte, error) {
	b := make([]byte, n)
	copy(b, br.data[off:off+n])
	return b, nil
}

func BenchmarkBuild(b *testing.B) {
	es := benchEntries()
	var size int64
	for _, e := range es {
		size += int64(len(e.Key) + len(e.Value))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		w := NewWriter(Options{})
		for _, e := range es {
			if err := w.Add(e); err != nil {
				b.Fatal(err)
			}
		}
		data, m, err := w.Finish()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(data))/float64(size), "run/input")
		b.ReportMetric(float64(m.IndexLen+m.FilterLen), "index+filter-bytes")
	}
}

// BenchmarkGet reads keys of the 100 MiB run: cold (nothing cached: the
// index with the filter and a block fetched and decoded), with the index
// cached but not the block, warm (both cached), and absent keys the
// filter turns away.
func BenchmarkGet(b *testing.B) {
	br := benchRunOnce()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	key := func() string { return br.keys[rng.IntN(len(br.keys))] }
	get := func(b *testing.B, r *Reader, k string, want bool) {
		if _, ok, err := r.Get(ctx, k); ok != want || err != nil {
			b.Fatalf("Get(%q): %v %v", k, ok, err)
		}
	}
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			get(b, Open(fmt.Sprint(i), br.m, br.fetch, NewCache(64<<20)), key(), true)
		}
	})
	b.Run("index-cached", func(b *testing.B) {
		c := NewCache(64 << 20)
		r := Open("r", br.m, br.fetch, c)
		get(b, r, key(), true)
		ixSize := c.Stats().Bytes
		// Room for the index and a block or two: every other block is out.
		r = Open("r", br.m, br.fetch, NewCache(ixSize+64<<10))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			get(b, r, key(), true)
		}
		if s := r.cache.Stats(); s.Misses < int64(b.N)*99/100 {
			b.Fatalf("stats %+v over %d Gets: blocks were cached", s, b.N)
		}
	})
	b.Run("warm", func(b *testing.B) {
		r := Open("r", br.m, br.fetch, NewCache(256<<20))
		keys := make([]string, 1000)
		for i := range keys {
			keys[i] = key()
			get(b, r, keys[i], true)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			get(b, r, keys[i%len(keys)], true)
		}
	})
	b.Run("absent", func(b *testing.B) {
		r := Open("r", br.m, br.fetch, NewCache(256<<20))
		get(b, r, key(), true)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r.Get(ctx, br.keys[i%len(br.keys)]+"\x00")
		}
	})
}

// BenchmarkIter reads 100 entries from a random start of the 100 MiB run,
// ascending and descending, cold and warm.
func BenchmarkIter(b *testing.B) {
	br := benchRunOnce()
	ctx := context.Background()
	for _, reverse := range []bool{false, true} {
		for _, cold := range []bool{true, false} {
			b.Run(fmt.Sprintf("reverse=%t/cold=%t", reverse, cold), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(2, 2))
				c := NewCache(256 << 20)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					id := "r"
					if cold {
						id, c = fmt.Sprint(i), NewCache(64<<20)
					}
					opt := IterOptions{Reverse: reverse}
					start := br.keys[rng.IntN(len(br.keys)-4)+2]
					if reverse {
						opt.End = start
					} else {
						opt.Start = start
					}
					it := Open(id, br.m, br.fetch, c).Iter(ctx, opt)
					for range 100 {
						if _, ok := it.Next(); !ok {
							b.Fatal(it.Err())
						}
					}
				}
			})
		}
	}
}

// BenchmarkDecodeBlock decodes one data block of the 100 MiB run.
func BenchmarkDecodeBlock(b *testing.B) {
	br := benchRunOnce()
	ix, err := decodeIndex(br.data[br.m.IndexOff:br.m.FilterOff], br.m)
	if err != nil {
		b.Fatal(err)
	}
	i := len(ix.keys) / 2
	raw := br.data[ix.offs[i]:ix.offs[i+1]]
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		blk, err := decodeBlock(raw, ix.keys[i-1], ix.keys[i], false, "")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(blk.ents)), "entries")
	}
}
