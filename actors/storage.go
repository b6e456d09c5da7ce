package actors

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Storage is an actor's durable key-value store, seen from one event: reads
// see the event's own writes, and the writes commit together at the end of
// the event.
type Storage interface {
	// Get returns the value under key, and whether there is one.
	Get(key string) ([]byte, bool)
	// Put sets key to value. It fails with an error wrapping ErrLimit when
	// the key, the value or the actor's whole state would be too large.
	Put(key string, value []byte) error
	// Delete removes key; a missing key is not an error.
	Delete(key string)
	// List returns the keys that start with prefix, in byte order.
	List(prefix string) []string
}

// Storage limits.
const (
	// MaxKeyLen bounds one storage key, in bytes.
	MaxKeyLen = 2 << 10
	// MaxValueLen bounds one stored value, in bytes.
	MaxValueLen = 128 << 10
	// DefaultMaxState bounds an actor's whole state (keys plus values)
	// unless Config says otherwise.
	DefaultMaxState = 1 << 20
)

// ErrLimit is wrapped by the errors of writes past a storage limit.
var ErrLimit = errors.New("storage limit")

func stateSize(kv map[string][]byte) int {
	n := 0
	for k, v := range kv {
		n += len(k) + len(v)
	}
	return n
}

// txn is the Storage of one event: a write set over the committed state.
// Invariant: size is always the size of the state the event would commit.
type txn struct {
	base    map[string][]byte
	writes  map[string][]byte // nil value: deleted
	size    int
	maxSize int
}

func newTxn(base map[string][]byte, maxSize int) *txn {
	return &txn{base: base, writes: map[string][]byte{}, size: stateSize(base), maxSize: maxSize}
}

func (t *txn) Get(key string) ([]byte, bool) {
	if v, ok := t.writes[key]; ok {
		if v == nil {
			return nil, false
		}
		return append([]byte(nil), v...), true
	}
	v, ok := t.base[key]
	if !ok {
		return nil, false
	}
	return append([]byte(nil), v...), true
}

func (t *txn) current(key string) int {
	if v, ok := t.Get(key); ok {
		return len(key) + len(v)
	}
	return 0
}

func (t *txn) Put(key string, value []byte) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrLimit)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes, over %d", ErrLimit, len(key), MaxKeyLen)
	case len(value) > MaxValueLen:
		return fmt.Errorf("%w: value of %d bytes under key %.64q, over %d", ErrLimit, len(value), key, MaxValueLen)
	}
	size := t.size - t.current(key) + len(key) + len(value)
	if size > t.maxSize {
		return fmt.Errorf("%w: state would be %d bytes, over %d", ErrLimit, size, t.maxSize)
	}
	t.size = size
	v := append(make([]byte, 0, len(value)), value...)
	t.writes[key] = v
	return nil
}

func (t *txn) Delete(key string) {
	t.size -= t.current(key)
	t.writes[key] = nil
}

func (t *txn) List(prefix string) []string {
	var keys []string
	for k := range t.base {
		if _, written := t.writes[k]; !written && strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	for k, v := range t.writes {
		if v != nil && strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// dirty says whether the event wrote anything.
func (t *txn) dirty() bool { return len(t.writes) > 0 }

// result is the state the event commits (base is left untouched).
func (t *txn) result() map[string][]byte {
	kv := make(map[string][]byte, len(t.base)+len(t.writes))
	for k, v := range t.base {
		kv[k] = v
	}
	for k, v := range t.writes {
		if v == nil {
			delete(kv, k)
		} else {
			kv[k] = v
		}
	}
	return kv
}
