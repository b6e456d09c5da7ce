package kvrun

import (
	"context"
	"errors"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// FuzzRun decodes arbitrary bytes as a run, as a node reading a damaged
// object would: ReadMeta, then Open, Iter and Get. Nothing may panic;
// every error wraps ErrDamaged; what Iter yields is in order.
func FuzzRun(f *testing.F) {
	// Small seeds: the fuzzer mutates and minimises whole inputs.
	for _, es := range shapes() {
		data, _ := build(f, Options{BlockSize: 64}, es)
		if len(data) < 16<<10 {
			key := "k"
			if len(es) > 0 {
				key = es[len(es)/2].Key
			}
			f.Add(data, key)
		}
	}
	f.Add([]byte(footerMagic), "")
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		ctx := context.Background()
		obj := &object{data: data}
		m, err := ReadMeta(ctx, int64(len(data)), obj.fetch)
		if err != nil {
			if !errors.Is(err, ownership.ErrDamaged) {
				t.Fatalf("ReadMeta: %v", err)
			}
			return
		}
		enc, err := m.MarshalBinary()
		var dec Meta
		if err != nil || dec.UnmarshalBinary(enc) != nil || dec != m {
			t.Fatalf("meta %+v through its encoding: %+v, %v", m, dec, err)
		}
		r := Open("fuzz", m, obj.fetch, NewCache(1<<20))
		var keys []string
		for _, opt := range []IterOptions{{}, {Reverse: true}, {Start: key}, {End: key, Reverse: true}, {Prefix: key}} {
			it := r.Iter(ctx, opt)
			prev, n := "", 0
			for e, ok := it.Next(); ok; e, ok = it.Next() {
				if n > 0 && (!opt.Reverse && e.Key <= prev || opt.Reverse && e.Key >= prev) {
					t.Fatalf("Iter(%s): %q after %q", fmtOpt(opt), e.Key, prev)
				}
				if e.Tombstone && e.Value != nil {
					t.Fatalf("Iter(%s): tombstone %q with a value", fmtOpt(opt), e.Key)
				}
				prev, n = e.Key, n+1
				if len(keys) < 64 {
					keys = append(keys, e.Key)
				}
			}
			if err := it.Err(); err != nil && !errors.Is(err, ownership.ErrDamaged) {
				t.Fatalf("Iter(%s): %v", fmtOpt(opt), err)
			}
		}
		for _, k := range append(keys, key) {
			if _, _, err := r.Get(ctx, k); err != nil && !errors.Is(err, ownership.ErrDamaged) {
				t.Fatalf("Get(%q): %v", k, err)
			}
		}
	})
}

// FuzzDecode hands arbitrary bytes to the block and index decoders as if
// their checksums had matched, which random damage does not reach: they
// must refuse what is not well formed without panicking.
func FuzzDecode(f *testing.F) {
	// Seeds: each of the first few blocks of small runs, with the bounds
	// its run's index gives it, so that they decode before the fuzzer
	// mutates them; and the index.
	for _, es := range shapes() {
		data, m := build(f, Options{BlockSize: 64}, es)
		if len(data) >= 16<<10 {
			continue
		}
		idx := data[m.IndexOff : m.FilterOff-4]
		ix, err := parseIndex(idx, m)
		if err != nil || len(ix.keys) == 0 {
			f.Add([]byte{}, "", "", "", true, idx)
			continue
		}
		for b := range min(len(ix.keys), 4) {
			after := ""
			if b > 0 {
				after = ix.keys[b-1]
			}
			blk := data[ix.offs[b]:ix.offs[b+1]]
			if _, err := decodeBlock(blk, after, ix.keys[b], b == 0, ix.minKey); err != nil {
				f.Fatalf("seed block %d: %v", b, err)
			}
			f.Add(blk, after, ix.minKey, ix.keys[b], b == 0, idx)
		}
	}
	f.Fuzz(func(t *testing.T, blk []byte, after, first, last string, isFirst bool, idx []byte) {
		if b, err := decodeBlock(blk, after, last, isFirst, first); err == nil {
			if len(b.ents) == 0 || b.ents[0].Key <= after || b.ents[len(b.ents)-1].Key != last || isFirst && b.ents[0].Key != first {
				t.Fatalf("a block of %d entries decoded outside its bounds (after %q, first %q, last %q)", len(b.ents), after, first, last)
			}
			for i := 1; i < len(b.ents); i++ {
				if b.ents[i].Key <= b.ents[i-1].Key {
					t.Fatalf("block keys out of order: %q after %q", b.ents[i].Key, b.ents[i-1].Key)
				}
			}
		}
		for _, entries := range []int64{0, 1, 1 << 20} {
			m := Meta{Entries: entries, IndexOff: int64(len(blk))}
			if ix, err := parseIndex(idx, m); err == nil {
				if ix.offs[len(ix.keys)] != m.IndexOff {
					t.Fatalf("index of blocks ending at %d, want %d", ix.offs[len(ix.keys)], m.IndexOff)
				}
			}
		}
	})
}
