package actorstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/kvrun"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Reading an actor's storage without a hold, for an operator's tools
// (`wasmkeep actors`): ReadActor reads the state object once and the
// manifests it lists, and the Snapshot it returns reads the runs that
// head lists, with the same code a resident actor reads them with. Runs
// are immutable, so a Snapshot is one consistent version of the actor's
// storage, the one the state object held when it was read, for as long
// as its runs are there. Nothing is written, nothing is sealed, and no
// node is asked anything: a node may hold the actor meanwhile, and a
// Snapshot taken of a live actor is the version it had committed when the
// state object was read.
//
// A node that holds the actor may merge its runs and delete those the
// head it replaced listed: a Snapshot that then reads one finds it gone.
// That is damage only if the state object still lists it; if the object
// has changed, the read fails with ErrStateChanged, and a new Snapshot
// reads the newer version.

// ErrStateChanged: a Snapshot's read found a run or manifest its head
// lists gone, and the state object has changed since the Snapshot read
// it (a node holding the actor merged its runs and deleted the old ones).
// Reading the actor again gives a newer Snapshot.
var ErrStateChanged = errors.New("the actor's state changed while it was read")

// snapshotReadTimeout bounds each read of a Snapshot; the caller's
// context bounds them all.
const snapshotReadTimeout = time.Minute

// snapshotCache bounds the blocks a Snapshot keeps decoded.
const snapshotCache = 16 << 20

// Snapshot is one version of an actor's storage, read from the bucket
// without a hold. Its methods only read, and are for one goroutine at a
// time.
type Snapshot struct {
	actor  ownership.Actor
	b      ownership.Bucket
	found  bool
	etag   ownership.ETag
	bytes  int // of the state object
	st     *State
	header ownership.StateHeader
}

// ReadActor reads actor a's state object from b, and the manifests it
// lists. An actor with no state object (it never wrote, or it does not
// exist) gives an empty Snapshot whose Exists is false. A state object
// that cannot be read or decoded, or a manifest it lists that is gone or
// damaged while the object has not changed, is a *DamagedError; a
// manifest gone while the object changed is ErrStateChanged; a bucket
// that does not answer gives its error.
func ReadActor(ctx context.Context, b ownership.Bucket, a ownership.Actor) (*Snapshot, error) {
	key := StateKey(a)
	obj, err := b.Get(ctx, key)
	switch ownership.OutcomeOf(err) {
	case ownership.Landed:
	case ownership.NotFound:
		return &Snapshot{actor: a, b: b, st: NewState(ownership.StateHeader{})}, nil
	case ownership.Damaged:
		return nil, &DamagedError{Actor: a, Key: key, Err: err}
	default:
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	st, _, err := DecodeStateObject(obj.Body)
	if err != nil {
		return nil, &DamagedError{Actor: a, Key: key, Err: err}
	}
	s := &Snapshot{actor: a, b: b, found: true, etag: obj.ETag, bytes: len(obj.Body), st: st, header: st.StateHeader}
	o := RunOpener{b: b, c: kvrun.NewCache(snapshotCache), timeout: snapshotReadTimeout, part: DefaultRunPart, reads: &IOCounts{}}
	if err := st.LoadManifests(ctx, a, o); err != nil {
		return nil, s.fault(ctx, err)
	}
	st.OpenRuns(a, o)
	return s, nil
}

// fault words err, a read of the Snapshot's runs or manifests that
// failed: damage (a listed object gone, or bytes that do not decode) is
// a *DamagedError if the state object is still the version read, and
// ErrStateChanged if it is not; any other error is the bucket's.
func (s *Snapshot) fault(ctx context.Context, err error) error {
	if !errors.Is(err, ownership.ErrDamaged) {
		return err
	}
	obj, gerr := s.b.Get(ctx, StateKey(s.actor))
	switch ownership.OutcomeOf(gerr) {
	case ownership.Landed:
		if obj.ETag == s.etag {
			return &DamagedError{Actor: s.actor, Key: StateKey(s.actor), Err: err}
		}
	case ownership.NotFound:
	default:
		return fmt.Errorf("%w (and the state object could not be read again to tell whether it changed: %w)", err, gerr)
	}
	return fmt.Errorf("%w: %w", ErrStateChanged, err)
}

// Actor is the actor the Snapshot is of.
func (s *Snapshot) Actor() ownership.Actor { return s.actor }

// Exists says whether the actor has a state object.
func (s *Snapshot) Exists() bool { return s.found }

// Header is the state object's header: the generation of the hold that
// last wrote or sealed it, and its count of writes.
func (s *Snapshot) Header() ownership.StateHeader { return s.header }

// ETag is the version of the state object read.
func (s *Snapshot) ETag() ownership.ETag { return s.etag }

// Size is the actor's keys plus values, in bytes, as its head counts
// them (the node's keys included): what counts against its bound.
func (s *Snapshot) Size() int { return s.st.size }

// Objects counts the objects the Snapshot is made of: the state object,
// and the run parts and manifests it lists.
func (s *Snapshot) Objects() int {
	if !s.found {
		return 0
	}
	n := 1
	for _, r := range s.st.runs {
		n += len(r.parts)
		if r.man != nil {
			n++
		}
	}
	return n
}

// Get returns the value under key, node keys included; ok is false when
// there is none.
func (s *Snapshot) Get(ctx context.Context, key string) (v []byte, ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, isFault := p.(ReadFault)
			if !isFault {
				panic(p)
			}
			v, ok, err = nil, false, s.fault(ctx, f.err)
		}
	}()
	v, ok = s.st.get(ctx, key)
	return slices.Clone(v), ok, nil
}

// List returns the entries of the window opt selects, in order, Limit
// included: the class's keys, and with nodeKeys those under
// actors.NodePrefix as well (the pages of its SQL database, the event
// keys it remembers).
func (s *Snapshot) List(ctx context.Context, opt actors.ListOptions, nodeKeys bool) ([]actors.Entry, error) {
	if opt.Limit < 0 {
		return nil, fmt.Errorf("list: negative limit %d", opt.Limit)
	}
	if !nodeKeys && opt.Start < "\x01" {
		opt.Start = "\x01" // the first key past every node key
	}
	var out []actors.Entry
	err := s.each(ctx, opt, func(key string, value []byte) error {
		out = append(out, actors.Entry{Key: key, Value: slices.Clone(value)})
		if opt.Limit > 0 && len(out) == opt.Limit {
			return errStop
		}
		return nil
	})
	return out, err
}

// Each calls fn with every entry of the actor's storage, node keys
// included, in ascending key order, reading the runs as it goes; value
// is valid only during the call. An error of fn ends it and is returned.
func (s *Snapshot) Each(ctx context.Context, fn func(key string, value []byte) error) error {
	return s.each(ctx, actors.ListOptions{}, fn)
}

var errStop = errors.New("stop")

func (s *Snapshot) each(ctx context.Context, opt actors.ListOptions, fn func(key string, value []byte) error) error {
	m := s.st.iter(ctx, opt)
	for {
		e, ok := m.Next()
		if !ok {
			break
		}
		if e.Tombstone {
			continue
		}
		if err := fn(e.Key, e.Value); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
	}
	if err := m.Err(); err != nil {
		return s.fault(ctx, fmt.Errorf("list runs: %w", err))
	}
	return nil
}

// ErrNoSQLDatabase: the actor has no SQL database (its class never ran
// SQL, or its database was removed by DeleteAll).
var ErrNoSQLDatabase = errors.New("no SQL database")

// ErrNotRead: a statement given to Snapshot.Query would write.
var ErrNotRead = errors.New("not a read")

// snapshotRowsMax bounds the rows one Query returns, in bytes.
const snapshotRowsMax = 256 << 20

// Query runs query, one statement that only reads, on the actor's SQL
// database as the Snapshot holds it, and returns its rows. The database
// is opened read-only (SQLite's mode=ro) over the Snapshot's pages, read
// into memory first, with the authorizer a class's connection has (no
// ATTACH, no transaction, only the PRAGMAs that read); a statement that
// would write (stmt_readonly) is refused before it runs, with an error
// that wraps ErrNotRead and says why: nothing here may change an actor's
// database, which only its class writes, in its events, under a hold.
func (s *Snapshot) Query(ctx context.Context, query string) (*actors.SQLRows, error) {
	pages := map[string][]byte{}
	err := s.each(ctx, actors.ListOptions{Prefix: sqlPagePrefix}, func(key string, value []byte) error {
		pages[key] = slices.Clone(value)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(pages) == 0 {
		return nil, fmt.Errorf("actor %s: %w (its class never used SQL, or a DeleteAll removed it)", s.actor, ErrNoSQLDatabase)
	}
	c, err := openSQLMode(&pageSet{pages: pages}, true)
	if err != nil {
		return nil, err
	}
	defer c.close()
	c.conn.SetInterrupt(ctx)
	stmt, tail, err := c.conn.Prepare(query)
	switch {
	case err != nil && c.denied != "":
		return nil, fmt.Errorf("%s: %w", c.denied, err)
	case err != nil:
		return nil, err
	case stmt == nil:
		return nil, errors.New("no statement")
	}
	defer stmt.Close()
	if tail != "" {
		next, _, err := c.conn.Prepare(tail)
		if next != nil || err != nil {
			next.Close()
			return nil, fmt.Errorf("one statement at a time: %q follows the first", tail)
		}
	}
	if !stmt.ReadOnly() {
		return nil, fmt.Errorf("refusing %.64q: %w: it would write the database, and this reads a snapshot of it "+
			"from the bucket, without a hold; an actor's database is written only by its class, in its events", query, ErrNotRead)
	}
	rows, err := readRows(stmt, snapshotRowsMax)
	if err != nil {
		if c.denied != "" {
			return nil, fmt.Errorf("%s: %w", c.denied, err)
		}
		return nil, err
	}
	return rows, nil
}

// pageSet is the node keys of an SQL database, in memory, as a
// nodeStorage that refuses every write.
type pageSet struct{ pages map[string][]byte }

func (p *pageSet) nodeGet(key string) ([]byte, bool) {
	v, ok := p.pages[key]
	return v, ok
}

var errReadOnly = errors.New("read-only snapshot")

func (p *pageSet) nodePut(string, []byte) error { return errReadOnly }

func (p *pageSet) nodeDelete(string) {}

func (p *pageSet) nodeList(opt actors.ListOptions) []actors.Entry {
	var out []actors.Entry
	for k, v := range p.pages {
		if includes(opt, k) {
			out = append(out, actors.Entry{Key: k, Value: v})
		}
	}
	slices.SortFunc(out, func(a, b actors.Entry) int {
		if opt.Reverse {
			a, b = b, a
		}
		return strings.Compare(a.Key, b.Key)
	})
	if opt.Limit > 0 && len(out) > opt.Limit {
		out = out[:opt.Limit]
	}
	return out
}

// EncodeFormat1 is a state object's payload as actors stored it before
// runs (format 1): the pairs alone. A head of this format is still read;
// tests write one with it.
func EncodeFormat1(kv map[string][]byte) []byte { return encodePairs(kv) }

// HeadInfo is what a state object's head lists, for tools and tests
// that look at the layout.
type HeadInfo struct {
	Format    int      // 1 (pairs alone) or 2 (runs)
	Runs      int      // the runs it lists
	Listed    []string // the keys of the run objects it lists: parts and manifests
	Manifests []string // those of the manifests alone
	Garbage   []string // those of the garbage it lists
}

// HeadOf reads a state object, and the manifests it lists from b, as a
// HeadInfo.
func HeadOf(ctx context.Context, b ownership.Bucket, a ownership.Actor, body []byte) (HeadInfo, error) {
	s, p, err := DecodeStateObject(body)
	if err != nil {
		return HeadInfo{}, err
	}
	if err := s.LoadManifests(ctx, a, RunOpener{b: b, timeout: time.Minute, reads: &IOCounts{}}); err != nil {
		return HeadInfo{}, err
	}
	h := HeadInfo{Format: 1, Runs: len(s.runs)}
	if string(p[:min(len(p), len(headMagic))]) == headMagic {
		h.Format = 2
	}
	for _, r := range s.runs {
		for _, pt := range r.parts {
			h.Listed = append(h.Listed, ownership.RunKey(a, pt.gen, pt.n))
		}
		if r.man != nil {
			key := ownership.RunKey(a, r.man.gen, r.man.n)
			h.Listed, h.Manifests = append(h.Listed, key), append(h.Manifests, key)
		}
	}
	for _, g := range s.garbage {
		h.Garbage = append(h.Garbage, ownership.RunKey(a, g.gen, g.n))
	}
	return h, nil
}
