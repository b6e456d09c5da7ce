package actorstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/kvrun"
)

// nodeStorage is the node's namespace of an event's storage: the same
// write set and commit as the class's own keys, keys under NodePrefix.
// The event's *txn has it; a Storage of a test's or a wrapper's does not.
type nodeStorage interface {
	nodeGet(key string) ([]byte, bool)
	nodePut(key string, value []byte) error
	nodeDelete(key string)
	// nodeList returns the node's entries opt selects, values not copied
	// (the caller must not change them).
	nodeList(opt actors.ListOptions) []actors.Entry
}

func stateSize(kv map[string][]byte) int {
	n := 0
	for k, v := range kv {
		n += len(k) + len(v)
	}
	return n
}

// Txn is the Storage of one event: a write set over the working state,
// whose reads of runs go out under ctx.
// Invariant: size is always the size of the state the event would commit.
type Txn struct {
	base    *State
	ctx     context.Context
	writes  map[string][]byte // nil value: deleted
	cleared bool              // DeleteAll: nothing of base is seen
	// fault is the first read of base that failed: the event fails with
	// it even if the code between (SQLite's, a class's recover) swallowed
	// the readFault.
	fault   error
	size    int
	maxSize int
	// alarmed: the writes may set an alarm (AlarmsSet looks only then).
	alarmed bool
}

// newTxn is an event's storage over kv alone (tests, tools).
func newTxn(kv map[string][]byte, maxSize int) *Txn {
	return NewEventTxn(context.Background(), stateOfMap(kv), maxSize)
}

// NewEventTxn is the Storage of one event over base, the working state,
// bounded to maxSize bytes of keys and values; its reads of runs are
// bounded by ctx.
func NewEventTxn(ctx context.Context, base *State, maxSize int) *Txn {
	return &Txn{base: base, ctx: ctx, writes: map[string][]byte{}, size: base.size, maxSize: maxSize}
}

func (t *Txn) Get(key string) ([]byte, bool) {
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
func (t *Txn) lookup(key string) ([]byte, bool) {
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
func (t *Txn) noteFault() {
	if p := recover(); p != nil {
		if f, ok := p.(ReadFault); ok && t.fault == nil {
			t.fault = f.err
		}
		panic(p)
	}
}

// current is the size of key's entry in the state the event would commit.
func (t *Txn) current(key string) int {
	if v, ok := t.lookup(key); ok {
		return len(key) + len(v)
	}
	return 0
}

func isNodeKey(key string) bool { return strings.HasPrefix(key, actors.NodePrefix) }

// checkKey checks a key a class writes.
func checkKey(key string) error {
	if isNodeKey(key) {
		return fmt.Errorf("%w: key %.64q begins with the byte 0x00, which marks the node's own keys", actors.ErrLimit, key)
	}
	return checkNodeKey(key)
}

// checkNodeKey checks a key's length.
func checkNodeKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", actors.ErrLimit)
	case len(key) > actors.MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes, over %d", actors.ErrLimit, len(key), actors.MaxKeyLen)
	}
	return nil
}

// checkPut checks setting key to a value of n bytes in a state of size
// bytes where key's entry takes cur bytes, and returns the state's size
// after it.
func (t *Txn) checkPut(key string, n, size, cur int) (int, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	return t.checkSize(key, n, size, cur)
}

// checkSize is checkPut past the key's own checks.
func (t *Txn) checkSize(key string, n, size, cur int) (int, error) {
	if n > actors.MaxValueLen {
		return 0, fmt.Errorf("%w: value of %d bytes under key %.64q, over %d", actors.ErrLimit, n, key, actors.MaxValueLen)
	}
	size += len(key) + n - cur
	if size > t.maxSize {
		return 0, fmt.Errorf("%w: state would be %d bytes, over %d", actors.ErrLimit, size, t.maxSize)
	}
	return size, nil
}

func (t *Txn) Put(key string, value []byte) error {
	size, err := t.checkPut(key, len(value), t.size, t.current(key))
	if err != nil {
		return err
	}
	t.size = size
	t.writes[key] = append(make([]byte, 0, len(value)), value...)
	return nil
}

func (t *Txn) Delete(key string) {
	if isNodeKey(key) {
		return
	}
	t.nodeDelete(key)
}

func (t *Txn) nodeGet(key string) ([]byte, bool) { return t.lookup(key) }

func (t *Txn) nodePut(key string, value []byte) error {
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
func (t *Txn) nodePutNew(key string, value []byte) error {
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

func (t *Txn) nodeDelete(key string) {
	t.size -= t.current(key)
	t.writes[key] = nil
}

func (t *Txn) nodeList(opt actors.ListOptions) []actors.Entry { return t.entries(opt, true) }

// DeleteAll is actors.DeleteAll for the event's storage (see deleteAll).
func (t *Txn) DeleteAll() error {
	t.deleteAll()
	return nil
}

// deleteAll removes every key, the node's too, without reading any but
// the event keys the actor remembers (keys.go) and the records of its
// outbound sockets (dials.go), which it keeps: the sockets stay open, and
// their close events must still find their records.
func (t *Txn) deleteAll() {
	keep := append(t.ledgerEntries(), t.nodeList(actors.ListOptions{Prefix: dialPrefix})...)
	t.cleared, t.writes, t.size = true, make(map[string][]byte, len(keep)), 0
	for _, e := range keep {
		t.writes[e.Key] = append([]byte(nil), e.Value...)
		t.size += len(e.Key) + len(e.Value)
	}
}

// Discard drops the event's writes: the storage is as the event found it
// (or as its last commit point left it).
func (t *Txn) Discard() {
	t.writes, t.cleared, t.size = map[string][]byte{}, false, t.base.size
}

func (t *Txn) List(opt actors.ListOptions) ([]actors.Entry, error) {
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
func (t *Txn) entries(opt actors.ListOptions, node bool) []actors.Entry {
	if !node && opt.Start < "\x01" {
		opt.Start = "\x01" // the first key past every node key
	}
	if node && opt.End == "" {
		opt.End = "\x01"
	}
	var ws []kvrun.Entry
	for k, v := range t.writes {
		if includes(opt, k) {
			ws = append(ws, kvrun.Entry{Key: k, Value: v, Tombstone: v == nil})
		}
	}
	slices.SortFunc(ws, func(a, b kvrun.Entry) int { return strings.Compare(a.Key, b.Key) })
	defer t.noteFault()
	return t.base.entries(t.ctx, opt, ws, t.cleared)
}

// includes says whether key is in the window o selects, Limit aside.
func includes(o actors.ListOptions, key string) bool {
	return strings.HasPrefix(key, o.Prefix) &&
		(o.Start == "" || key >= o.Start) &&
		(o.End == "" || key < o.End)
}

func (t *Txn) Batch(ops ...actors.Op) error {
	if len(ops) > actors.MaxBatchOps {
		return fmt.Errorf("%w: batch of %d ops, over %d", actors.ErrLimit, len(ops), actors.MaxBatchOps)
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

// Rebase makes t's writes so far part of the working state at version
// ver, the base of its further writes (a call's commit point).
func (t *Txn) Rebase(ver uint64) {
	t.base.Apply(t, ver)
	t.writes, t.cleared, t.alarmed = map[string][]byte{}, false, false
}

// Dirty says whether the event wrote anything.
func (t *Txn) Dirty() bool { return len(t.writes) > 0 || t.cleared }

// result is the state the event would commit, as a map (tests: the base
// must hold no runs).
func (t *Txn) result() map[string][]byte {
	kv := map[string][]byte{}
	for _, e := range t.entries(actors.ListOptions{}, false) {
		kv[e.Key] = e.Value
	}
	for _, e := range t.entries(actors.ListOptions{}, true) {
		kv[e.Key] = e.Value
	}
	return kv
}

// Fault is the first read of the state that failed during the event, if
// any: the event fails with it.
func (t *Txn) Fault() error { return t.fault }
