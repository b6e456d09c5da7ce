package actors

import (
	"errors"
	"fmt"
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
// rolls back after it leaves every key as it was. On the node it deletes
// the actor's alarms and SQL database too; the records of its open
// outbound sockets stay (DialSocket), as the sockets do. It fails only if
// st's List does. A Storage with a DeleteAll method of its own (the node's)
// is asked to do it.
func DeleteAll(st Storage) error {
	if d, ok := st.(interface{ DeleteAll() error }); ok {
		return d.DeleteAll()
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
