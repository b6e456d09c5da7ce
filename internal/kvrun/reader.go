package kvrun

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"unsafe"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Fetch reads n bytes of a run object from offset off: a ranged read. It
// returns exactly n bytes, or an error; fewer bytes (the object is
// shorter) are reported as damage. The Reader keeps the slice it returns,
// which must not change afterwards. It may be called from several
// goroutines at once.
type Fetch func(ctx context.Context, off, n int64) ([]byte, error)

// Reader reads one run through a Fetch and a Cache. It holds nothing of
// the run itself: what it decodes lives in the Cache, so that the Cache's
// bound is the bound of all runs' memory. A Reader may be used from
// several goroutines at once.
type Reader struct {
	id    string
	m     Meta
	fetch Fetch
	cache *Cache
	err   error // m is invalid
}

// Open returns a Reader of the run id that m describes, reading through
// fetch, and keeping what it decodes in c (nil: it keeps nothing, and
// every read fetches). It reads nothing yet. An invalid m makes every read
// fail with an error wrapping ownership.ErrDamaged.
//
// Invariant: id names one run's bytes, forever, among all the runs that
// share c (the run's bucket key does, since runs are never rewritten).
func Open(id string, m Meta, fetch Fetch, c *Cache) *Reader {
	r := &Reader{id: id, m: m, fetch: fetch, cache: c}
	if err := m.check(); err != nil {
		r.err = fmt.Errorf("run %q: %w: meta: %w", id, ownership.ErrDamaged, err)
	}
	return r
}

// Meta returns the Meta the Reader was opened with.
func (r *Reader) Meta() Meta { return r.m }

// Get returns the entry under key, a tombstone included, and whether the
// run holds one. It reads the filter and the index (together in one fetch
// when neither is cached), then, if the filter does not rule the key out,
// one block (unless cached); a key outside [MinKey, MaxKey] reads nothing.
func (r *Reader) Get(ctx context.Context, key string) (Entry, bool, error) {
	if r.err != nil {
		return Entry{}, false, r.err
	}
	if r.m.Entries == 0 || key < r.m.MinKey || key > r.m.MaxKey {
		return Entry{}, false, nil
	}
	ix, f, err := r.indexAndFilter(ctx)
	if err != nil {
		return Entry{}, false, err
	}
	if !f.mayContain(hashKey(key)) {
		return Entry{}, false, nil
	}
	// The block to look in is the first whose last key is not below key;
	// there is one, since key <= MaxKey, the last block's last key.
	b := sort.SearchStrings(ix.keys, key)
	blk, err := r.block(ctx, ix, b)
	if err != nil {
		return Entry{}, false, err
	}
	if i := blk.search(key); i < len(blk.ents) && blk.ents[i].Key == key {
		return blk.ents[i], true, nil
	}
	return Entry{}, false, nil
}

// Iter iterates the entries in the window opt selects, tombstones
// included. It reads nothing until the first Next, then the index (not
// the filter), then one block at a time as the iteration reaches it:
// stopping after a few entries costs a block or two whatever the run's
// size. An Iterator keeps the block it is in, cached or not.
func (r *Reader) Iter(ctx context.Context, opt IterOptions) Iterator {
	lo, hi, empty := opt.bounds()
	it := &runIter{r: r, ctx: ctx, lo: lo, hi: hi, reverse: opt.Reverse}
	if r.err == nil && (empty || r.m.Entries == 0 || hi != "" && hi <= r.m.MinKey || lo > r.m.MaxKey) {
		it.done = true
	}
	return it
}

// The cache keeps a run's index under its offset, and its filter under
// the filter's.
func (r *Reader) indexKey() cacheKey  { return cacheKey{run: r.id, off: r.m.IndexOff} }
func (r *Reader) filterKey() cacheKey { return cacheKey{run: r.id, off: r.m.FilterOff} }

// index returns the run's decoded index.
func (r *Reader) index(ctx context.Context) (*index, error) {
	if ix, ok := r.cache.get(r.indexKey()).(*index); ok {
		return ix, nil
	}
	raw, err := read(ctx, r.fetch, r.m.IndexOff, r.m.IndexLen)
	if err != nil {
		return nil, fmt.Errorf("run %q: index: %w", r.id, err)
	}
	return r.decodeIndex(raw)
}

// indexAndFilter returns the run's decoded index and filter, fetching
// whichever the cache lacks, both in one read if it lacks both.
func (r *Reader) indexAndFilter(ctx context.Context) (*index, *filter, error) {
	ix, _ := r.cache.get(r.indexKey()).(*index)
	f, _ := r.cache.get(r.filterKey()).(*filter)
	var err error
	switch {
	case ix != nil && f != nil:
		return ix, f, nil
	case ix != nil:
		var raw []byte
		if raw, err = read(ctx, r.fetch, r.m.FilterOff, r.m.FilterLen); err != nil {
			return nil, nil, fmt.Errorf("run %q: filter: %w", r.id, err)
		}
		f, err = r.decodeFilter(raw, int64(cap(raw)))
	case f != nil:
		ix, err = r.index(ctx)
	default:
		var raw []byte
		if raw, err = read(ctx, r.fetch, r.m.IndexOff, r.m.IndexLen+r.m.FilterLen); err != nil {
			return nil, nil, fmt.Errorf("run %q: index and filter: %w", r.id, err)
		}
		if ix, err = r.decodeIndex(raw[:r.m.IndexLen]); err == nil {
			// The filter's bits keep all of raw.
			f, err = r.decodeFilter(raw[r.m.IndexLen:], int64(cap(raw)))
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return ix, f, nil
}

// decodeIndex decodes and caches the index region raw.
func (r *Reader) decodeIndex(raw []byte) (*index, error) {
	ix, err := decodeIndex(raw, r.m)
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", r.id, err)
	}
	if ix.minKey != r.m.MinKey || ix.maxKey() != r.m.MaxKey {
		return nil, fmt.Errorf("run %q: %w: index holds keys %.64q to %.64q, meta %.64q to %.64q",
			r.id, ownership.ErrDamaged, ix.minKey, ix.maxKey(), r.m.MinKey, r.m.MaxKey)
	}
	r.cache.add(r.indexKey(), ix, ix.size)
	return ix, nil
}

// decodeFilter decodes and caches the filter region raw, which keeps
// kept bytes.
func (r *Reader) decodeFilter(raw []byte, kept int64) (*filter, error) {
	f, err := decodeFilter(raw, r.m)
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", r.id, err)
	}
	f.size = int64(unsafe.Sizeof(*f)) + kept
	r.cache.add(r.filterKey(), f, f.size)
	return f, nil
}

// block returns data block b of the run ix indexes.
func (r *Reader) block(ctx context.Context, ix *index, b int) (*block, error) {
	off := ix.offs[b]
	k := cacheKey{run: r.id, off: off}
	if blk, ok := r.cache.get(k).(*block); ok {
		return blk, nil
	}
	raw, err := read(ctx, r.fetch, off, ix.offs[b+1]-off)
	if err != nil {
		return nil, fmt.Errorf("run %q: block %d: %w", r.id, b, err)
	}
	if got := checksum(raw); got != ix.crcs[b] {
		return nil, fmt.Errorf("run %q: block %d at %d: %w: checksum %08x, want %08x", r.id, b, off, ownership.ErrDamaged, got, ix.crcs[b])
	}
	after := ""
	if b > 0 {
		after = ix.keys[b-1]
	}
	blk, err := decodeBlock(raw, after, ix.keys[b], b == 0, ix.minKey)
	if err != nil {
		return nil, fmt.Errorf("run %q: block %d at %d: %w: %s", r.id, b, off, ownership.ErrDamaged, err)
	}
	r.cache.add(k, blk, blk.size)
	return blk, nil
}

// index is a run's decoded index.
type index struct {
	minKey string
	keys   []string // the last key of each block, ascending
	offs   []int64  // block b is [offs[b], offs[b+1]); len(keys)+1 of them
	crcs   []uint32 // each block's CRC-32C
	size   int64    // what the cache is charged
}

func (ix *index) maxKey() string {
	if len(ix.keys) == 0 {
		return ""
	}
	return ix.keys[len(ix.keys)-1]
}

// decodeIndex decodes the index region of the run m describes, and checks
// it against m's layout (not its keys). Every error wraps
// ownership.ErrDamaged. The index keeps nothing of ir.
func decodeIndex(ir []byte, m Meta) (*index, error) {
	if got, want := checksum(ir[:len(ir)-4]), binary.LittleEndian.Uint32(ir[len(ir)-4:]); got != want {
		return nil, fmt.Errorf("index at %d: %w: checksum %08x, want %08x", m.IndexOff, ownership.ErrDamaged, got, want)
	}
	ix, err := parseIndex(ir[:len(ir)-4], m)
	if err != nil {
		return nil, fmt.Errorf("index at %d: %w: %s", m.IndexOff, ownership.ErrDamaged, err)
	}
	return ix, nil
}

// decodeFilter decodes the filter region of the run m describes. Every
// error wraps ownership.ErrDamaged. The filter's bits alias fr.
func decodeFilter(fr []byte, m Meta) (*filter, error) {
	if got, want := checksum(fr[:len(fr)-4]), binary.LittleEndian.Uint32(fr[len(fr)-4:]); got != want {
		return nil, fmt.Errorf("filter at %d: %w: checksum %08x, want %08x", m.FilterOff, ownership.ErrDamaged, got, want)
	}
	bits, k := fr[:len(fr)-5], int(fr[len(fr)-5])
	if k < 1 || k > maxProbes || len(bits)%filterLine != 0 || (len(bits) == 0) != (m.Entries == 0) {
		return nil, fmt.Errorf("filter at %d: %w: %d probes over %d bytes for %d entries", m.FilterOff, ownership.ErrDamaged, k, len(bits), m.Entries)
	}
	return &filter{bits: bits, k: k}, nil
}

// parseIndex decodes the index region without its CRC; ix.size is then
// what the decoded parts take.
func parseIndex(p []byte, m Meta) (*index, error) {
	d := decoder{b: p}
	n := d.uvarint()
	minKey := d.bytes(d.uvarint())
	// Invariant: an index entry takes at least 7 bytes (three uvarints, a
	// byte of key, the CRC), so n is bounded before anything is sized by it.
	switch {
	case d.bad:
		return nil, fmt.Errorf("no header")
	case n > uint64(len(d.b))/7 || n > uint64(m.Entries):
		return nil, fmt.Errorf("%d blocks in %d bytes for %d entries", n, len(d.b), m.Entries)
	case (n == 0) != (m.Entries == 0) || (n == 0) != (len(minKey) == 0) || len(minKey) > MaxKeyLen:
		return nil, fmt.Errorf("%d blocks, first key of %d bytes, for %d entries", n, len(minKey), m.Entries)
	}
	ix := &index{
		keys: make([]string, n),
		offs: make([]int64, n+1),
		crcs: make([]uint32, n),
	}
	var sb strings.Builder
	sb.Grow(len(minKey) + len(d.b))
	sb.Write(minKey)
	ends := make([]int, n+1) // key i is sb's [ends[i], ends[i+1]), after minKey
	ends[0] = len(minKey)
	prevStart, prevEnd := 0, len(minKey)
	for i := range n {
		shared, suffix := d.uvarint(), d.bytes(d.uvarint())
		blen := d.uvarint()
		crc := d.uint32()
		klen := shared + uint64(len(suffix))
		switch {
		case d.bad:
			return nil, fmt.Errorf("block %d: entry cut short", i)
		// Only block 0's last key may equal the key before it (the first
		// key, in a block of one entry).
		case shared > uint64(prevEnd-prevStart) || klen > MaxKeyLen || len(suffix) == 0 && i > 0:
			return nil, fmt.Errorf("block %d: key of %d+%d bytes after one of %d", i, shared, len(suffix), prevEnd-prevStart)
		case blen == 0 || blen > maxBlockLen || int64(blen) > m.IndexOff-ix.offs[i]:
			return nil, fmt.Errorf("block %d: %d bytes at %d of %d", i, blen, ix.offs[i], m.IndexOff)
		}
		s := sb.String()
		sb.WriteString(s[prevStart : prevStart+int(shared)])
		sb.Write(suffix)
		prevStart, prevEnd = prevEnd, sb.Len()
		ends[i+1] = prevEnd
		ix.offs[i+1] = ix.offs[i] + int64(blen)
		ix.crcs[i] = crc
	}
	if len(d.b) > 0 {
		return nil, fmt.Errorf("%d bytes after the last block", len(d.b))
	}
	if ix.offs[n] != m.IndexOff {
		return nil, fmt.Errorf("blocks end at %d, index at %d", ix.offs[n], m.IndexOff)
	}
	s := sb.String()
	ix.minKey = s[:len(minKey)]
	for i := range n {
		ix.keys[i] = s[ends[i]:ends[i+1]]
		if i == 0 && ix.keys[0] < ix.minKey || i > 0 && ix.keys[i] <= ix.keys[i-1] {
			return nil, fmt.Errorf("block %d: last key %.64q out of order", i, ix.keys[i])
		}
	}
	ix.size = int64(unsafe.Sizeof(*ix)) + int64(sb.Cap()) +
		int64(n)*int64(unsafe.Sizeof("")+unsafe.Sizeof(int64(0))+unsafe.Sizeof(uint32(0))) + 8
	return ix, nil
}
