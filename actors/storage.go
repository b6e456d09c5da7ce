package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmkeep/wasmkeep/actors/kvrun"
)

// Storage is an actor's durable key-value store, seen from one event: reads
// see the event's own writes, and the writes commit together at the end of
// the event. What can be built from its methods is a function over it
// (GetMany, DeleteAll), so that a test's fake or a wrapper implements only
// these.
type Storage interface {
	// Get returns the value under key, and whether there is one.
	Get(key string) ([]byte, bool)
	// Put sets key to value. It fails with an error wrapping ErrLimit when
	// the key, the value or the actor's whole state would be too large.
	Put(key string, value []byte) error
	// Delete removes key; a missing key is not an error.
	Delete(key string)
	// List returns the entries in the window opt describes, in byte order
	// of their keys (descending if opt.Reverse), values copied. It fails
	// only for invalid options (a negative limit).
	List(opt ListOptions) ([]Entry, error)
	// Batch applies ops in order, all or nothing. Before applying any, it
	// checks each op against the storage limits in the state the earlier
	// ops leave, as Put would (a delete's key too must be non-empty and at
	// most MaxKeyLen), and the count of ops against MaxBatchOps. If one is
	// refused, it fails with an error wrapping ErrLimit that names the op's
	// index, and the storage is as before the call.
	Batch(ops ...Op) error
}

// GetMany returns the values under keys, by key; a key without a value is
// not in the map. Like Get it sees the event's own writes, and the values
// are copies.
func GetMany(st Storage, keys ...string) map[string][]byte {
	vals := make(map[string][]byte, len(keys))
	for _, k := range keys {
		if v, ok := st.Get(k); ok {
			vals[k] = v
		}
	}
	return vals
}

// DeleteAll removes every key of the actor, the event's own writes so far
// included; writes after it start from an empty storage. Like every write
// it commits with the event's others or not at all: an event that fails or
// rolls back after it leaves every key as it was. It fails only if st's
// List does.
func DeleteAll(st Storage) error {
	if t, ok := st.(*txn); ok {
		t.deleteAll()
		return nil
	}
	entries, err := st.List(ListOptions{})
	if err != nil {
		return fmt.Errorf("delete all: %w", err)
	}
	for _, e := range entries {
		st.Delete(e.Key)
	}
	return nil
}

// ListOptions selects the entries List returns: the keys that start with
// Prefix, from Start (inclusive) to End (exclusive), in byte order; an
// empty Start or End leaves that side unbounded.
type ListOptions struct {
	Prefix string
	Start  string
	End    string
	// Limit bounds the number of entries returned; 0 means no bound. With
	// Reverse, they are the last Limit keys of the window, descending.
	Limit   int
	Reverse bool
}

// Entry is one key and its value.
type Entry struct {
	Key   string
	Value []byte
}

// Op is one write of a Batch: Put Key to Value, or Delete Key (Value is
// then ignored).
type Op struct {
	Key    string
	Value  []byte
	Delete bool
}

// Storage limits.
const (
	// MaxKeyLen bounds one storage key, in bytes.
	MaxKeyLen = 2 << 10
	// MaxValueLen bounds one stored value, in bytes.
	MaxValueLen = 128 << 10
	// DefaultMaxState bounds an actor's whole state (keys plus values)
	// unless Config says otherwise.
	DefaultMaxState = 1 << 30
	// MaxBatchOps bounds the ops of one Batch.
	MaxBatchOps = 128
)

// ErrLimit is wrapped by the errors of writes past a storage limit.
var ErrLimit = errors.New("storage limit")

// NodePrefix begins the keys of the node's own data in an actor's storage
// (the pages of the actor's SQL database). A class's Get, Delete and List
// neither see nor touch them, and its Put and Batch of such a key fail
// with ErrLimit; DeleteAll removes them too, and they count toward the
// actor's bound on its state.
const NodePrefix = "\x00"

// nodeStorage is the node's namespace of an event's storage: the same
// write set and commit as the class's own keys, keys under NodePrefix.
// The event's *txn has it; a Storage of a test's or a wrapper's does not.
type nodeStorage interface {
	nodeGet(key string) ([]byte, bool)
	nodePut(key string, value []byte) error
	nodeDelete(key string)
	// nodeList returns the node's entries opt selects, values not copied
	// (the caller must not change them).
	nodeList(opt ListOptions) []Entry
}

func stateSize(kv map[string][]byte) int {
	n := 0
	for k, v := range kv {
		n += len(k) + len(v)
	}
	return n
}

// txn is the Storage of one event: a write set over the working state,
// whose reads of runs go out under ctx.
// Invariant: size is always the size of the state the event would commit.
type txn struct {
	base    *kvState
	ctx     context.Context
	writes  map[string][]byte // nil value: deleted
	cleared bool              // DeleteAll: nothing of base is seen
	// fault is the first read of base that failed: the event fails with
	// it even if the code between (SQLite's, a class's recover) swallowed
	// the readFault.
	fault   error
	size    int
	maxSize int
}

// newTxn is an event's storage over kv alone (tests, tools).
func newTxn(kv map[string][]byte, maxSize int) *txn {
	return newEventTxn(context.Background(), stateOfMap(kv), maxSize)
}

func newEventTxn(ctx context.Context, base *kvState, maxSize int) *txn {
	return &txn{base: base, ctx: ctx, writes: map[string][]byte{}, size: base.size, maxSize: maxSize}
}

func (t *txn) Get(key string) ([]byte, bool) {
	if isNodeKey(key) {
		return nil, false
	}
	v, ok := t.lookup(key)
	if !ok {
		return nil, false
	}
	return append([]byte(nil), v...), true
}

// lookup returns the value under key as the event sees it, not copied.
func (t *txn) lookup(key string) ([]byte, bool) {
	if v, ok := t.writes[key]; ok {
		return v, v != nil
	}
	if t.cleared {
		return nil, false
	}
	defer t.noteFault()
	return t.base.get(t.ctx, key)
}

// noteFault, deferred around a read of base, keeps the read's fault.
func (t *txn) noteFault() {
	if p := recover(); p != nil {
		if f, ok := p.(readFault); ok && t.fault == nil {
			t.fault = f.err
		}
		panic(p)
	}
}

// current is the size of key's entry in the state the event would commit.
func (t *txn) current(key string) int {
	if v, ok := t.lookup(key); ok {
		return len(key) + len(v)
	}
	return 0
}

func isNodeKey(key string) bool { return strings.HasPrefix(key, NodePrefix) }

// checkKey checks a key a class writes.
func checkKey(key string) error {
	if isNodeKey(key) {
		return fmt.Errorf("%w: key %.64q begins with the byte 0x00, which marks the node's own keys", ErrLimit, key)
	}
	return checkNodeKey(key)
}

// checkNodeKey checks a key's length.
func checkNodeKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrLimit)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes, over %d", ErrLimit, len(key), MaxKeyLen)
	}
	return nil
}

// checkPut checks setting key to a value of n bytes in a state of size
// bytes where key's entry takes cur bytes, and returns the state's size
// after it.
func (t *txn) checkPut(key string, n, size, cur int) (int, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	return t.checkSize(key, n, size, cur)
}

// checkSize is checkPut past the key's own checks.
func (t *txn) checkSize(key string, n, size, cur int) (int, error) {
	if n > MaxValueLen {
		return 0, fmt.Errorf("%w: value of %d bytes under key %.64q, over %d", ErrLimit, n, key, MaxValueLen)
	}
	size += len(key) + n - cur
	if size > t.maxSize {
		return 0, fmt.Errorf("%w: state would be %d bytes, over %d", ErrLimit, size, t.maxSize)
	}
	return size, nil
}

func (t *txn) Put(key string, value []byte) error {
	size, err := t.checkPut(key, len(value), t.size, t.current(key))
	if err != nil {
		return err
	}
	t.size = size
	t.writes[key] = append(make([]byte, 0, len(value)), value...)
	return nil
}

func (t *txn) Delete(key string) {
	if isNodeKey(key) {
		return
	}
	t.nodeDelete(key)
}

func (t *txn) nodeGet(key string) ([]byte, bool) { return t.lookup(key) }

func (t *txn) nodePut(key string, value []byte) error {
	if !isNodeKey(key) {
		return fmt.Errorf("node key %.64q lacks the node's prefix", key)
	}
	if err := checkNodeKey(key); err != nil {
		return err
	}
	size, err := t.checkSize(key, len(value), t.size, t.current(key))
	if err != nil {
		return err
	}
	t.size = size
	t.writes[key] = append(make([]byte, 0, len(value)), value...)
	return nil
}

// nodePutNew is nodePut of a key the caller knows holds no value, in the
// state or the event's writes: its size is counted without a lookup.
func (t *txn) nodePutNew(key string, value []byte) error {
	if !isNodeKey(key) {
		return fmt.Errorf("node key %.64q lacks the node's prefix", key)
	}
	if err := checkNodeKey(key); err != nil {
		return err
	}
	size, err := t.checkSize(key, len(value), t.size, 0)
	if err != nil {
		return err
	}
	t.size = size
	t.writes[key] = append(make([]byte, 0, len(value)), value...)
	return nil
}

func (t *txn) nodeDelete(key string) {
	t.size -= t.current(key)
	t.writes[key] = nil
}

func (t *txn) nodeList(opt ListOptions) []Entry { return t.entries(opt, true) }

// deleteAll removes every key, the node's too, without reading any but
// the event keys the actor remembers (keys.go), which it keeps.
func (t *txn) deleteAll() {
	keep := t.ledgerEntries()
	t.cleared, t.writes, t.size = true, make(map[string][]byte, len(keep)), 0
	for _, e := range keep {
		t.writes[e.Key] = append([]byte(nil), e.Value...)
		t.size += len(e.Key) + len(e.Value)
	}
}

// discard drops the event's writes: the storage is as the event found it
// (or as its last commit point left it).
func (t *txn) discard() {
	t.writes, t.cleared, t.size = map[string][]byte{}, false, t.base.size
}

func (t *txn) List(opt ListOptions) ([]Entry, error) {
	if opt.Limit < 0 {
		return nil, fmt.Errorf("list: negative limit %d", opt.Limit)
	}
	entries := t.entries(opt, false)
	for i := range entries {
		entries[i].Value = append([]byte(nil), entries[i].Value...)
	}
	return entries, nil
}

// entries lists the window opt selects of the class's keys (node false)
// or of the node's (node true), values not copied.
func (t *txn) entries(opt ListOptions, node bool) []Entry {
	if !node && opt.Start < "\x01" {
		opt.Start = "\x01" // the first key past every node key
	}
	if node && opt.End == "" {
		opt.End = "\x01"
	}
	var ws []kvrun.Entry
	for k, v := range t.writes {
		if opt.includes(k) {
			ws = append(ws, kvrun.Entry{Key: k, Value: v, Tombstone: v == nil})
		}
	}
	slices.SortFunc(ws, func(a, b kvrun.Entry) int { return strings.Compare(a.Key, b.Key) })
	defer t.noteFault()
	return t.base.entries(t.ctx, opt, ws, t.cleared)
}

// includes says whether key is in the window o selects, Limit aside.
func (o ListOptions) includes(key string) bool {
	return strings.HasPrefix(key, o.Prefix) &&
		(o.Start == "" || key >= o.Start) &&
		(o.End == "" || key < o.End)
}

func (t *txn) Batch(ops ...Op) error {
	if len(ops) > MaxBatchOps {
		return fmt.Errorf("%w: batch of %d ops, over %d", ErrLimit, len(ops), MaxBatchOps)
	}
	// Check every op against the state the earlier ones would leave,
	// without touching the write set.
	size := t.size
	entry := make(map[string]int, len(ops)) // key's entry size after the ops so far
	for i, op := range ops {
		cur, seen := entry[op.Key]
		if !seen {
			cur = t.current(op.Key)
		}
		var err error
		if op.Delete {
			err = checkKey(op.Key)
			size -= cur
			entry[op.Key] = 0
		} else {
			size, err = t.checkPut(op.Key, len(op.Value), size, cur)
			entry[op.Key] = len(op.Key) + len(op.Value)
		}
		if err != nil {
			return fmt.Errorf("batch op %d: %w", i, err)
		}
	}
	for _, op := range ops {
		if op.Delete {
			t.writes[op.Key] = nil
		} else {
			t.writes[op.Key] = append(make([]byte, 0, len(op.Value)), op.Value...)
		}
	}
	t.size = size
	return nil
}

// rebase makes t's writes so far part of the working state at version
// ver, the base of its further writes (a call's commit point).
func (t *txn) rebase(ver uint64) {
	t.base.apply(t, ver)
	t.writes, t.cleared = map[string][]byte{}, false
}

// dirty says whether the event wrote anything.
func (t *txn) dirty() bool { return len(t.writes) > 0 || t.cleared }

// result is the state the event would commit, as a map (tests: the base
// must hold no runs).
func (t *txn) result() map[string][]byte {
	kv := map[string][]byte{}
	for _, e := range t.entries(ListOptions{}, false) {
		kv[e.Key] = e.Value
	}
	for _, e := range t.entries(ListOptions{}, true) {
		kv[e.Key] = e.Value
	}
	return kv
}
