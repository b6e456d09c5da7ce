package actorstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/kvrun"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// An actor's storage in the bucket (RATIONALE: "Why an actor's storage is
// a small head over immutable runs"):
//
//   - its state object (ownership.StateKey), the head: the ownership
//     header, the total size of the actor's keys and values, the runs it
//     lists (newest first), the runs it no longer lists whose deletion has
//     not landed yet (garbage), and the writes newer than every run (the
//     memory table: puts, and deletes of keys a run may hold), sorted;
//   - its runs (ownership.RunKey): immutable sorted tables of entries
//     (internal/kvrun), each written once, If-None-Match, before the head
//     that lists it, and named by the writing hold's generation. A run
//     may be cut into parts, each such an object; the head lists a run
//     of one part with the part's range and index, and a run of more
//     through its manifest: an object named like a part, written once
//     before the first head that lists it, that lists the parts. So a
//     head stays small however large the actor's oldest runs grow, and a
//     load reads one manifest per run of more than one part.
//
// A commit rewrites the head, If-Match as before; once its memory table
// passes flushAt bytes, the commit first writes the table as a new run,
// and the head it writes lists that run instead. Runs of similar size are
// merged in the background (compact.go). So a commit writes about the
// head's size plus, on average, what the event changed, whatever the
// actor holds; and a read touches the head (in memory while the actor is
// resident), then at most one index and one block of each run, through
// the node's block cache.
//
// The seal (ownership/seal.go) restamps the head only, and since the head
// is the one object written conditionally, it seals the runs as well: a
// run that a superseded hold wrote is listed by no head a later hold
// reads.
//
// A head written before runs existed (format 1: the pairs alone) is read
// as a memory table and written in this format by the actor's next
// commit. A run listed through its manifest is written as a run of no
// parts followed by the manifest's name, which a node that predates
// manifests refuses as damage ("a run of no parts"), and never reads as
// something else; such a node reads every other head. A head written
// before manifests lists every part of every run: it is read, and the
// next commit writes a manifest for each run of more than one part and
// lists that instead.

// flushAt is the size of the memory table past which a commit writes it
// as a run: the head every commit rewrites stays about this small. Half
// of it is what a commit rewrites of the table on average, against one
// more level of runs, each byte's one more rewrite by merges, for each
// halving (RATIONALE: at 2 KiB a put of a new key to an actor of 100 MiB
// cost 4,252 bytes, at 1 KiB 3,875).
const flushAt = 1 << 10

// headMagic begins a head's payload in format 2. A format 1 payload
// begins with a key's length, never 0, or is empty. manifestMagic begins
// a manifest.
const (
	headMagic     = "\x00wk2"
	manifestMagic = "\x00wkm"
)

// memEntry is one write of the memory table: a value, or a delete (del)
// of a key that a run may hold. ver is the working version that wrote it.
type memEntry struct {
	v   []byte
	del bool
	ver uint64
}

// Run is one sorted run a head lists: one part or more, each an object,
// with disjoint key ranges in ascending order (a merge cuts its output
// into parts of Config.RunPart bytes, so that no object, and nothing a
// node holds while it writes one, grows with the actor).
type Run struct {
	parts []*part
	// man names the manifest that lists the parts of a run of more than
	// one: nil until the commit that writes it lands (a merge's output,
	// or a run a head listed part by part).
	man *RunName
	// listed is the parts' count and bytes as a decoded head lists them
	// with its manifest, which a load checks the manifest against.
	listed struct {
		parts int
		size  int64
	}
}

// part is one run object.
type part struct {
	gen  ownership.Generation
	n    uint64
	meta kvrun.Meta
	r    *kvrun.Reader // opened when the state is; nil in a decoded head
}

func (p *part) name() RunName { return RunName{p.gen, p.n} }

// listsManifest says a head lists r through its manifest: it has more
// than one part, or a manifest whose parts are not read yet.
func (r *Run) listsManifest() bool { return len(r.parts) > 1 || r.man != nil }

// shape is r's count of parts and their bytes, as its parts say or, until
// its manifest is read, as the head listed them.
func (r *Run) shape() (int, int64) {
	if r.parts == nil {
		return r.listed.parts, r.listed.size
	}
	return len(r.parts), r.size()
}

func (r *Run) size() int64 {
	var n int64
	for _, p := range r.parts {
		n += p.meta.Size
	}
	return n
}

// find returns the part whose range holds key, or nil.
func (r *Run) find(key string) *part {
	i, _ := slices.BinarySearchFunc(r.parts, key, func(p *part, k string) int { return strings.Compare(p.meta.MaxKey, k) })
	if i == len(r.parts) || key < r.parts[i].meta.MinKey {
		return nil
	}
	return r.parts[i]
}

// RunName names a run object without its contents.
type RunName struct {
	gen ownership.Generation
	n   uint64
}

// State is an actor's storage as a hold sees it: the head's contents,
// plus the writes of events whose commit has not landed yet (in mem, at
// versions past the durable one).
type State struct {
	ownership.StateHeader
	size     int // keys plus values of every live entry
	mem      map[string]memEntry
	memBytes int    // keys plus values in mem, deletes included
	runs     []*Run // newest first
	// garbage is the run objects no longer listed whose delete has not
	// landed: the head lists them, so that whoever holds it next deletes
	// them if this hold cannot.
	garbage []RunName
	// clearedAt is the version of the last DeleteAll: a run built from
	// the memory table before it is garbage once written.
	clearedAt uint64
	// flushing says a commit in flight writes the memory table as a run:
	// until it lands, a delete must stay in the table as a tombstone, or
	// the run would bring the key back.
	flushing bool
}

// NewState is the state of an actor that has no storage yet, under the
// ownership header h.
func NewState(h ownership.StateHeader) *State {
	return &State{StateHeader: h, mem: map[string]memEntry{}}
}

// stateOfMap is a state that holds kv in its memory table.
func stateOfMap(kv map[string][]byte) *State {
	s := NewState(ownership.StateHeader{})
	for k, v := range kv {
		s.mem[k] = memEntry{v: v}
		s.size += len(k) + len(v)
	}
	s.memBytes = s.size
	return s
}

// DefaultRunPart is the size of the parts a merge cuts its output into
// unless Config says otherwise, so that no object, and nothing a node
// holds while it writes one, grows with the actor. A run of more than one
// part is listed through its manifest (layout.go), so smaller parts cost
// a head nothing, but they cost a merge more requests; larger ones cost
// the first read of each more on a store that checks an object whole
// then (the directory store, at its first range read of an object).
const DefaultRunPart = 8 << 20

// IOCounts counts the bucket calls of actors' storage.
type IOCounts struct {
	Heads, Manifests, Runs, RunBytes atomic.Int64
	// writes and the bytes of their bodies: heads (commits) and runs
	// (flushes, merges and manifests)
	HeadWrites, HeadBytes, RunWrites, RunWriteBytes atomic.Int64
	// stalls: commits held back for a merge (resident.go, stalled)
	Stalls atomic.Int64
}

// NewRunOpener is what reads and writes the runs of actors in b, through
// the cache c, each bucket call bounded by timeout, cutting merges into
// parts of about part bytes, and counting in reads.
func NewRunOpener(b ownership.Bucket, c *kvrun.Cache, timeout time.Duration, part int, reads *IOCounts) RunOpener {
	return RunOpener{b: b, c: c, timeout: timeout, part: part, reads: reads}
}

// ReadFault carries a failed storage read out of a class's code: Storage's
// reads have no error result, and a read that failed must not look like a
// missing key. The event fails with err (resident.go recovers it).
// It is an error too, for code that recovers panics into errors on the
// way (a wasm host's call into its guest).
type ReadFault struct{ err error }

func (f ReadFault) Error() string { return "storage read failed: " + f.err.Error() }
func (f ReadFault) Unwrap() error { return f.err }

// get returns the value under key, not copied, or panics with a readFault.
func (s *State) get(ctx context.Context, key string) ([]byte, bool) {
	if e, ok := s.mem[key]; ok {
		return e.v, !e.del
	}
	for _, r := range s.runs {
		p := r.find(key)
		if p == nil {
			continue
		}
		e, ok, err := p.r.Get(ctx, key)
		if err != nil {
			panic(ReadFault{fmt.Errorf("read run %s: %w", ownership.RunName(p.gen, p.n), err)})
		}
		if ok {
			return e.Value, !e.Tombstone
		}
	}
	return nil, false
}

// entries lists the live entries of the window opt selects (Limit
// included), in order, values not copied; writes (sorted by key, deletes
// as tombstones) come first, and cleared hides everything below them.
// It panics with a readFault when a run cannot be read.
func (s *State) entries(ctx context.Context, opt actors.ListOptions, writes []kvrun.Entry, cleared bool) []actors.Entry {
	io := kvrun.IterOptions{Prefix: opt.Prefix, Start: opt.Start, End: opt.End, Reverse: opt.Reverse}
	its := []kvrun.Iterator{kvrun.IterSlice(writes, io)}
	if !cleared {
		its = append(its, kvrun.IterSlice(s.memEntries(opt), io))
		for _, r := range s.runs {
			its = append(its, r.iter(ctx, io))
		}
	}
	m := kvrun.Merge(opt.Reverse, its...)
	var out []actors.Entry
	for opt.Limit == 0 || len(out) < opt.Limit {
		e, ok := m.Next()
		if !ok {
			break
		}
		if !e.Tombstone {
			out = append(out, actors.Entry{Key: e.Key, Value: e.Value})
		}
	}
	if err := m.Err(); err != nil {
		panic(ReadFault{fmt.Errorf("list runs: %w", err)})
	}
	return out
}

// iter yields the entries of the window opt selects (Limit aside), the
// memory table's over the runs', deletes as tombstones, reading the runs
// as it goes (entries does the same with an event's writes on top).
func (s *State) iter(ctx context.Context, opt actors.ListOptions) kvrun.Iterator {
	io := kvrun.IterOptions{Prefix: opt.Prefix, Start: opt.Start, End: opt.End, Reverse: opt.Reverse}
	its := []kvrun.Iterator{kvrun.IterSlice(s.memEntries(opt), io)}
	for _, r := range s.runs {
		its = append(its, r.iter(ctx, io))
	}
	return kvrun.Merge(opt.Reverse, its...)
}

// memEntries returns the memory table's entries in opt's window, sorted
// ascending.
func (s *State) memEntries(opt actors.ListOptions) []kvrun.Entry {
	var es []kvrun.Entry
	for k, e := range s.mem {
		if includes(opt, k) {
			es = append(es, kvrun.Entry{Key: k, Value: e.v, Tombstone: e.del})
		}
	}
	slices.SortFunc(es, func(a, b kvrun.Entry) int { return strings.Compare(a.Key, b.Key) })
	return es
}

// Apply makes an event's writes part of the state at version ver.
func (s *State) Apply(t *Txn, ver uint64) {
	if t.cleared {
		s.clear(ver)
	}
	for k, v := range t.writes {
		s.put(k, v, ver)
	}
	s.size = t.size
}

// put sets key to v (nil: deletes it) in the memory table.
func (s *State) put(key string, v []byte, ver uint64) {
	if old, ok := s.mem[key]; ok {
		s.memBytes -= len(key) + len(old.v)
	}
	if v == nil && len(s.runs) == 0 && !s.flushing {
		delete(s.mem, key) // no run can hold it
		return
	}
	s.mem[key] = memEntry{v: v, del: v == nil, ver: ver}
	s.memBytes += len(key) + len(v)
}

// clear empties the state at version ver: its runs become garbage.
func (s *State) clear(ver uint64) {
	for _, r := range s.runs {
		s.Drop(r)
	}
	s.runs, s.mem, s.memBytes, s.size, s.clearedAt = nil, map[string]memEntry{}, 0, 0, ver
}

// Drop makes r's parts, and its manifest, garbage.
func (s *State) Drop(r *Run) {
	for _, p := range r.parts {
		s.garbage = append(s.garbage, p.name())
	}
	if r.man != nil {
		s.garbage = append(s.garbage, *r.man)
	}
}

// OpenRuns gives every part a reader.
func (s *State) OpenRuns(a ownership.Actor, o RunOpener) {
	for _, r := range s.runs {
		for _, p := range r.parts {
			if p.r == nil {
				p.r = o.open(a, p)
			}
		}
	}
}

// RunOpener is what a reader of run parts reads with.
type RunOpener struct {
	b       ownership.Bucket
	c       *kvrun.Cache
	timeout time.Duration // of each read
	part    int           // Config.RunPart, for merges
	reads   *IOCounts
}

// wroteRun counts a run written.
func (o RunOpener) wroteRun(n int) {
	o.reads.RunWrites.Add(1)
	o.reads.RunWriteBytes.Add(int64(n))
}

// open gives p a reader.
func (o RunOpener) open(a ownership.Actor, p *part) *kvrun.Reader {
	key := ownership.RunKey(a, p.gen, p.n)
	return kvrun.Open(key, p.meta, func(ctx context.Context, off, n int64) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		o.reads.Runs.Add(1)
		obj, err := ownership.ReadRange(ctx, o.b, key, off, n)
		o.reads.RunBytes.Add(int64(len(obj.Body)))
		if err != nil {
			if errors.Is(err, ownership.ErrNotFound) {
				// A run the head lists is never deleted: its absence is
				// damage, not a missing key.
				return nil, fmt.Errorf("%w: run %s listed by the head is missing", ownership.ErrDamaged, key)
			}
			return nil, err
		}
		return obj.Body, nil
	}, o.c)
}

// iter iterates the run's parts that the window can reach, one after the
// other, each opened when reached.
func (r *Run) iter(ctx context.Context, opt kvrun.IterOptions) kvrun.Iterator {
	var ps []*part
	for _, p := range r.parts {
		if (opt.End == "" || p.meta.MinKey < opt.End) && (opt.Start == "" || p.meta.MaxKey >= opt.Start) {
			ps = append(ps, p)
		}
	}
	if opt.Reverse {
		slices.Reverse(ps)
	}
	return &chain{ctx: ctx, opt: opt, parts: ps}
}

// chain iterates parts one after the other.
type chain struct {
	ctx   context.Context
	opt   kvrun.IterOptions
	parts []*part
	cur   kvrun.Iterator
	err   error
}

func (c *chain) Next() (kvrun.Entry, bool) {
	for c.err == nil {
		if c.cur == nil {
			if len(c.parts) == 0 {
				return kvrun.Entry{}, false
			}
			c.cur, c.parts = c.parts[0].r.Iter(c.ctx, c.opt), c.parts[1:]
		}
		if e, ok := c.cur.Next(); ok {
			return e, true
		}
		c.err, c.cur = c.cur.Err(), nil
	}
	return kvrun.Entry{}, false
}

func (c *chain) Err() error { return c.err }

// Head is what one commit writes: the state object's payload, and the
// objects to write before it: the run, if the memory table is flushed,
// and the manifests of runs of more than one part that have none yet.
type Head struct {
	payload   []byte
	flush     *Run   // the new run (one part), listed first in payload
	body      []byte // its part's bytes
	manifests []manifest
	upto      uint64 // the working version the commit covers
}

// manifest is one manifest a commit writes before its head.
type manifest struct {
	r    *Run
	name RunName
	body []byte
}

// EncodeHead gives the head of the state at version ver for the hold at
// gen. With a memory table past flushAt, the table becomes a new run (the
// caller writes it first), named by gen and a random number, so that no
// two attempts ever name the same run, whatever a hold remembers; the
// head then lists it and holds no memory table. A run of more than one
// part without a manifest gets one, named the same way, which the caller
// writes before the head too.
func (s *State) EncodeHead(gen ownership.Generation, ver uint64) (Head, error) {
	h := Head{upto: ver}
	runs := s.runs
	flushed := s.memBytes > flushAt
	if flushed {
		var err error
		if h.flush, h.body, err = s.flushMem(gen); err != nil {
			return Head{}, err
		}
		runs = append([]*Run{h.flush}, runs...)
		s.flushing = true
	}
	n := len(headMagic) + 2*binary.MaxVarintLen64
	for _, r := range runs {
		if r.listsManifest() {
			n += 5 * binary.MaxVarintLen64
			if r.man == nil {
				m := manifest{r: r, name: RunName{gen, rand.Uint64()}}
				var err error
				if m.body, err = appendManifest(nil, r.parts); err != nil {
					return Head{}, err
				}
				h.manifests = append(h.manifests, m)
			}
			continue
		}
		n += 5*binary.MaxVarintLen64 + len(r.parts[0].meta.MinKey) + len(r.parts[0].meta.MaxKey) + 16*binary.MaxVarintLen64
	}
	n += len(s.garbage) * 2 * binary.MaxVarintLen64
	if !flushed {
		n += s.memBytes + len(s.mem)*(1+2*binary.MaxVarintLen32)
	}
	b := make([]byte, 0, n)
	b = append(b, headMagic...)
	b = binary.AppendUvarint(b, uint64(s.size))
	b = binary.AppendUvarint(b, uint64(len(runs)))
	for _, r := range runs {
		if !r.listsManifest() {
			var err error
			if b, err = appendParts(b, r.parts); err != nil {
				return Head{}, err
			}
			continue
		}
		// A run through its manifest: no parts, then the manifest's
		// name, and the parts' count and bytes.
		man := r.man
		if man == nil {
			man = &h.manifests[slices.IndexFunc(h.manifests, func(m manifest) bool { return m.r == r })].name
		}
		nparts, size := r.shape()
		b = append(b, 0)
		b = binary.AppendUvarint(b, uint64(man.gen))
		b = binary.AppendUvarint(b, man.n)
		b = binary.AppendUvarint(b, uint64(nparts))
		b = binary.AppendUvarint(b, uint64(size))
	}
	b = binary.AppendUvarint(b, uint64(len(s.garbage)))
	for _, g := range s.garbage {
		b = binary.AppendUvarint(b, uint64(g.gen))
		b = binary.AppendUvarint(b, g.n)
	}
	if !flushed {
		b = s.appendMem(b)
	}
	h.payload = b
	return h, nil
}

// appendParts appends a count of parts, then each part's name and meta.
func appendParts(b []byte, parts []*part) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(parts)))
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(p.gen))
		b = binary.AppendUvarint(b, p.n)
		at := len(b)
		b = append(b, 0) // the meta's length, one byte if it fits
		var err error
		if b, err = p.meta.AppendBinary(b); err != nil {
			return nil, err
		}
		b = fixLength(b, at)
	}
	return b, nil
}

// appendManifest appends a manifest of parts: manifestMagic, the parts
// (appendParts), and a CRC-32C of what precedes it, little-endian.
func appendManifest(b []byte, parts []*part) ([]byte, error) {
	start := len(b)
	b = append(b, manifestMagic...)
	b, err := appendParts(b, parts)
	if err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli)), nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// decodeManifest reads a manifest. Every error matches
// ownership.ErrDamaged.
func decodeManifest(body []byte) ([]*part, error) {
	n := len(body) - 4
	if n < len(manifestMagic) || string(body[:len(manifestMagic)]) != manifestMagic {
		return nil, fmt.Errorf("%w: not a manifest", ownership.ErrDamaged)
	}
	if crc32.Checksum(body[:n], castagnoli) != binary.LittleEndian.Uint32(body[n:]) {
		return nil, fmt.Errorf("%w: manifest checksum mismatch", ownership.ErrDamaged)
	}
	d := decoder{p: body[len(manifestMagic):n]}
	parts := d.parts(d.count())
	if d.err == nil && len(d.p) > 0 {
		d.fail("%d bytes past the manifest's parts", len(d.p))
	}
	if d.err == nil && len(parts) < 2 {
		d.fail("a manifest of %d parts", len(parts))
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode manifest: %w: %w", ownership.ErrDamaged, d.err)
	}
	return parts, nil
}

// LoadManifests reads the manifest of each run that a decoded head lists
// through one, and gives the run its parts: one read for each. A manifest
// that is missing, or that lists other than what the head says, is
// damage (an error that matches ownership.ErrDamaged); a read that fails
// is returned as it is.
func (s *State) LoadManifests(ctx context.Context, a ownership.Actor, o RunOpener) error {
	for _, r := range s.runs {
		if r.man == nil || r.parts != nil {
			continue
		}
		key := ownership.RunKey(a, r.man.gen, r.man.n)
		rctx, cancel := context.WithTimeout(ctx, o.timeout)
		o.reads.Manifests.Add(1)
		obj, err := o.b.Get(rctx, key)
		cancel()
		if errors.Is(err, ownership.ErrNotFound) {
			return fmt.Errorf("%w: manifest %s listed by the head is missing", ownership.ErrDamaged, key)
		}
		if err != nil {
			return fmt.Errorf("read manifest %s: %w", key, err)
		}
		parts, err := decodeManifest(obj.Body)
		if err != nil {
			return fmt.Errorf("manifest %s: %w", key, err)
		}
		got := &Run{parts: parts}
		if len(parts) != r.listed.parts || got.size() != r.listed.size {
			return fmt.Errorf("%w: manifest %s lists %d parts of %d bytes, the head %d of %d",
				ownership.ErrDamaged, key, len(parts), got.size(), r.listed.parts, r.listed.size)
		}
		r.parts = parts
	}
	return nil
}

// fixLength makes b[at], a one-byte placeholder, the uvarint length of
// what follows it, moving that when the length takes more bytes.
func fixLength(b []byte, at int) []byte {
	n := uint64(len(b) - at - 1)
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	var l [binary.MaxVarintLen64]byte
	w := binary.PutUvarint(l[:], n)
	b = append(b, l[1:w]...)
	copy(b[at+w:], b[at+1:len(b)-(w-1)])
	copy(b[at:], l[:w])
	return b
}

// appendMem appends the memory table's entries in key order.
func (s *State) appendMem(b []byte) []byte {
	keys := make([]string, 0, len(s.mem))
	for k := range s.mem {
		keys = append(keys, k)
	}
	if len(keys) > 1 {
		slices.Sort(keys)
	}
	for _, k := range keys {
		e := s.mem[k]
		if e.del {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		if !e.del {
			b = binary.AppendUvarint(b, uint64(len(e.v)))
			b = append(b, e.v...)
		}
	}
	return b
}

// flushMem builds the memory table as a run of one part.
func (s *State) flushMem(gen ownership.Generation) (*Run, []byte, error) {
	w := kvrun.NewWriter(kvrun.Options{})
	for _, e := range s.memEntries(actors.ListOptions{}) {
		if err := w.Add(e); err != nil {
			return nil, nil, fmt.Errorf("build run: %w", err)
		}
	}
	body, meta, err := w.Finish()
	if err != nil {
		return nil, nil, fmt.Errorf("build run: %w", err)
	}
	return &Run{parts: []*part{{gen: gen, n: rand.Uint64(), meta: meta}}}, body, nil
}

// Landed records that head h, and the run it flushed, are durable: the
// memory table's entries it covered move to that run.
func (s *State) Landed(h Head, seq uint64) {
	s.Seq = seq
	for _, m := range h.manifests {
		if slices.Contains(s.runs, m.r) {
			m.r.man = &m.name
		} else {
			// The run left the state meanwhile (a merge, a DeleteAll).
			s.garbage = append(s.garbage, m.name)
		}
	}
	if h.flush == nil {
		return
	}
	s.flushing = false
	if s.clearedAt > h.upto {
		// A DeleteAll after the commit's version: the new run holds what
		// it cleared.
		s.Drop(h.flush)
		return
	}
	for k, e := range s.mem {
		if e.ver <= h.upto {
			s.memBytes -= len(k) + len(e.v)
			delete(s.mem, k)
		}
	}
	s.runs = append([]*Run{h.flush}, s.runs...)
}

// Collected forgets the garbage whose delete landed.
func (s *State) Collected(done []RunName) {
	if len(done) == 0 {
		return
	}
	var left []RunName
	for _, g := range s.garbage {
		if !slices.Contains(done, g) {
			left = append(left, g)
		}
	}
	s.garbage = left
}

// decodeHead reads a state object's payload, in either format. Every
// error matches ownership.ErrDamaged.
func decodeHead(h ownership.StateHeader, p []byte) (*State, error) {
	if !strings.HasPrefix(string(p), headMagic) {
		kv, err := decodePairs(p)
		if err != nil {
			return nil, err
		}
		s := stateOfMap(kv)
		s.StateHeader = h
		return s, nil
	}
	s := NewState(h)
	d := decoder{p: p[len(headMagic):]}
	s.size = int(d.uvarint())
	nruns := d.count()
	for range nruns {
		r := &Run{}
		nparts := d.count()
		if nparts > 0 {
			r.parts = d.parts(nparts)
		} else { // a run through its manifest
			r.man = &RunName{ownership.Generation(d.uvarint()), d.uvarint()}
			r.listed.parts, r.listed.size = int(d.uvarint()), int64(d.uvarint())
			if d.err == nil && r.listed.parts < 2 {
				d.fail("a manifest of %d parts", r.listed.parts)
			}
		}
		s.runs = append(s.runs, r)
	}
	ngarbage := d.count()
	for range ngarbage {
		s.garbage = append(s.garbage, RunName{ownership.Generation(d.uvarint()), d.uvarint()})
	}
	for d.err == nil && len(d.p) > 0 {
		kind := d.p[0]
		d.p = d.p[1:]
		k := string(d.field())
		switch kind {
		case 0:
			v := d.field()
			s.mem[k] = memEntry{v: v}
			s.memBytes += len(k) + len(v)
		case 1:
			s.mem[k] = memEntry{del: true}
			s.memBytes += len(k)
		default:
			d.fail("unknown entry kind %d", kind)
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode actor state: %w: %w", ownership.ErrDamaged, d.err)
	}
	return s, nil
}

// parts reads n parts (appendParts after the count), in ascending and
// disjoint key ranges.
func (d *decoder) parts(n int) []*part {
	var parts []*part
	for range n {
		p := &part{gen: ownership.Generation(d.uvarint()), n: d.uvarint()}
		if err := p.meta.UnmarshalBinary(d.field()); err != nil && d.err == nil {
			d.err = err
		}
		if k := len(parts); k > 0 && d.err == nil && parts[k-1].meta.MaxKey >= p.meta.MinKey {
			d.fail("parts of a run overlap")
		}
		parts = append(parts, p)
	}
	return parts
}

// decoder reads a head's fields; the first error sticks.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.fail("truncated number")
		return 0
	}
	d.p = d.p[n:]
	return v
}

// count reads a count of items, each at least one byte long.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.p)) {
		d.fail("count %d past the head's end", n)
		return 0
	}
	return int(n)
}

func (d *decoder) field() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.p)) {
		d.fail("field of %d bytes past the head's end", n)
		return nil
	}
	f := d.p[:n:n]
	d.p = d.p[n:]
	return f
}

// Stalls reports whether the state lists maxRuns runs or more and its
// memory table is past flushAt, but under maxMem: then a commit may wait
// for the merge under way rather than flush one more run.
func (s *State) Stalls(maxRuns, maxMem int) bool {
	return len(s.runs) >= maxRuns && s.memBytes > flushAt && s.memBytes < maxMem
}

// Garbage is a copy of the state's garbage: the runs it no longer
// lists whose deletion has not landed yet.
func (s *State) Garbage() []RunName { return slices.Clone(s.garbage) }

// Payload is the head's payload: what the state object holds after the
// ownership header.
func (h Head) Payload() []byte { return h.payload }

// PutRuns writes what the head lists that is not in the bucket yet, each
// If-None-Match, before the head itself may be written: the run it
// flushes, then its new manifests.
func (h Head) PutRuns(ctx context.Context, b ownership.Bucket, o RunOpener, a ownership.Actor) error {
	var err error
	if h.flush != nil {
		p := h.flush.parts[0]
		o.wroteRun(len(h.body))
		_, err = b.Put(ctx, ownership.RunKey(a, p.gen, p.n), h.body, ownership.IfAbsent())
	}
	for _, m := range h.manifests {
		if err != nil {
			break
		}
		o.wroteRun(len(m.body))
		_, err = b.Put(ctx, ownership.RunKey(a, m.name.gen, m.name.n), m.body, ownership.IfAbsent())
	}
	return err
}

// OpenFlushed opens the run the head flushed, if any, once the head has
// landed.
func (h Head) OpenFlushed(o RunOpener, a ownership.Actor) {
	if f := h.flush; f != nil {
		f.parts[0].r = o.open(a, f.parts[0])
	}
}
