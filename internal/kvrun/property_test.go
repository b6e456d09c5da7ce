package kvrun

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

var seedFlag = flag.Uint64("kvrun.seed", 1, "first seed of the property tests")

// alphabet makes keys that share prefixes, are prefixes of each other,
// and hold 0x00 and 0xff.
const alphabet = "\x00\x01ab\xfe\xff"

func randKey(rng *rand.Rand) string {
	b := make([]byte, 1+rng.IntN(5))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// randEntries returns up to n entries in key order, a fifth of them
// tombstones, some values large enough for a block of their own.
func randEntries(rng *rand.Rand, n int) []Entry {
	keys := map[string]bool{}
	for range rng.IntN(n + 1) {
		keys[randKey(rng)] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	es := make([]Entry, len(sorted))
	for i, k := range sorted {
		switch r := rng.IntN(100); {
		case r < 20:
			es[i] = Entry{Key: k, Tombstone: true}
		case r < 22:
			es[i] = Entry{Key: k, Value: val(rng.IntN(MaxValueLen+1), byte(i))}
		default:
			es[i] = Entry{Key: k, Value: val(rng.IntN(40), byte(i))}
		}
	}
	return es
}

func randOptions(rng *rand.Rand) Options {
	return Options{BlockSize: []int{1, 64, 512, 0}[rng.IntN(4)], BitsPerKey: rng.IntN(12)}
}

// randIterOptions sets each of Prefix, Start, End and Reverse as the bits
// of combo ask, to keys near those of es.
func randIterOptions(rng *rand.Rand, es []Entry, combo int) IterOptions {
	near := func() string {
		if len(es) > 0 && rng.IntN(2) == 0 {
			return es[rng.IntN(len(es))].Key
		}
		return randKey(rng)
	}
	var o IterOptions
	if combo&1 != 0 {
		p := near()
		o.Prefix = p[:1+rng.IntN(len(p))]
	}
	if combo&2 != 0 {
		o.Start = near()
	}
	if combo&4 != 0 {
		o.End = near()
	}
	o.Reverse = combo&8 != 0
	return o
}

// window is the reference: the entries of es (sorted) that opt selects,
// in its order.
func window(es []Entry, opt IterOptions) []Entry {
	var out []Entry
	for _, e := range es {
		if strings.HasPrefix(e.Key, opt.Prefix) && (opt.Start == "" || e.Key >= opt.Start) && (opt.End == "" || e.Key < opt.End) {
			out = append(out, e)
		}
	}
	if opt.Reverse {
		slices.Reverse(out)
	}
	return out
}

func fmtOpt(o IterOptions) string {
	return fmt.Sprintf("{Prefix:%q Start:%q End:%q Reverse:%t}", o.Prefix, o.Start, o.End, o.Reverse)
}

func replay(t *testing.T, seed uint64) string {
	return fmt.Sprintf("seed %d; replay: go test ./internal/kvrun -run '^%s$' -kvrun.seed=%d -count=1", seed, strings.Split(t.Name(), "/")[0], seed)
}

func TestIterProperty(t *testing.T) {
	ctx := context.Background()
	cache := NewCache(8 << 20)
	for i := range uint64(200) {
		seed := *seedFlag + i
		rng := rand.New(rand.NewPCG(seed, 0))
		es := randEntries(rng, 300)
		opt := randOptions(rng)
		data, m := build(t, opt, es)
		r := Open(fmt.Sprint("run", seed), m, (&object{data: data}).fetch, cache)
		for combo := range 16 {
			for range 4 {
				io := randIterOptions(rng, es, combo)
				want := window(es, io)
				got, err := collect(r.Iter(ctx, io))
				if err != nil || !sameEntries(got, want) {
					t.Fatalf("%s\nrun %+v of %s\nIter(%s): %v\n got %s\nwant %s", replay(t, seed), opt, describe(es), fmtOpt(io), err, describe(got), describe(want))
				}
				got, _ = collect(IterSlice(es, io))
				if !sameEntries(got, want) {
					t.Fatalf("%s\nIterSlice(%s, %s)\n got %s\nwant %s", replay(t, seed), describe(es), fmtOpt(io), describe(got), describe(want))
				}
			}
		}
	}
}

func TestMergeProperty(t *testing.T) {
	ctx := context.Background()
	cache := NewCache(8 << 20)
	for i := range uint64(200) {
		seed := *seedFlag + i
		rng := rand.New(rand.NewPCG(seed, 1))
		// Newest first; each source a run or a table in memory.
		srcs := make([][]Entry, 1+rng.IntN(4))
		readers := make([]*Reader, len(srcs))
		for j := range srcs {
			srcs[j] = randEntries(rng, 60)
			if rng.IntN(3) > 0 {
				data, m := build(t, randOptions(rng), srcs[j])
				readers[j] = Open(fmt.Sprintf("run%d.%d", seed, j), m, (&object{data: data}).fetch, cache)
			}
		}
		var union []Entry
		seen := map[string]bool{}
		for _, src := range srcs {
			for _, e := range src {
				if !seen[e.Key] {
					seen[e.Key] = true
					union = append(union, e)
				}
			}
		}
		slices.SortFunc(union, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
		for combo := range 16 {
			io := randIterOptions(rng, union, combo)
			its := make([]Iterator, len(srcs))
			for j := range srcs {
				if readers[j] != nil {
					its[j] = readers[j].Iter(ctx, io)
				} else {
					its[j] = IterSlice(srcs[j], io)
				}
			}
			want := window(union, io)
			got, err := collect(Merge(io.Reverse, its...))
			if err != nil || !sameEntries(got, want) {
				var b strings.Builder
				for j, src := range srcs {
					fmt.Fprintf(&b, "source %d (run %t): %s\n", j, readers[j] != nil, describe(src))
				}
				t.Fatalf("%s\n%sMerge(%s): %v\n got %s\nwant %s", replay(t, seed), b.String(), fmtOpt(io), err, describe(got), describe(want))
			}
		}
	}
}

func TestMergeOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reverse bool
		input   []Entry
	}{
		{"descending input to an ascending merge", false, []Entry{{Key: "b"}, {Key: "a"}}},
		{"ascending input to a descending merge", true, []Entry{{Key: "a"}, {Key: "b"}}},
		{"a key twice", false, []Entry{{Key: "a"}, {Key: "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// IterSlice yields its slice as it is; reverse flips it.
			in := &sliceIter{es: tc.input}
			got, err := collect(Merge(tc.reverse, in, IterSlice([]Entry{{Key: "c"}}, IterOptions{})))
			if err == nil {
				t.Fatalf("merged %s without an error", describe(got))
			}
		})
	}
	if got, err := collect(Merge(false)); len(got) != 0 || err != nil {
		t.Errorf("merge of nothing: %s, %v", describe(got), err)
	}
}

// TestMergeStopsAtError: a newer run whose second block is damaged stops
// the merge before the older source's entry in that block's range, which
// the damaged block might hide.
func TestMergeStopsAtError(t *testing.T) {
	ctx := context.Background()
	newer := []Entry{{Key: "a", Value: []byte("new")}, {Key: "c", Tombstone: true}}
	older := []Entry{{Key: "a", Value: []byte("old")}, {Key: "b", Value: []byte("old")}, {Key: "c", Value: []byte("old")}}
	data, m := build(t, Options{BlockSize: 1}, newer)
	ix, err := decodeIndex(data[m.IndexOff:m.FilterOff], m)
	if err != nil {
		t.Fatal(err)
	}
	data[ix.offs[1]] ^= 1
	r := Open("newer", m, (&object{data: data}).fetch, nil)
	got, err := collect(Merge(false, r.Iter(ctx, IterOptions{}), IterSlice(older, IterOptions{})))
	if !errors.Is(err, ownership.ErrDamaged) {
		t.Fatalf("merge over a damaged run: %v", err)
	}
	if want := newer[:1]; !sameEntries(got, want) {
		t.Errorf("merge over a damaged run yielded %s, want %s", describe(got), describe(want))
	}
}
