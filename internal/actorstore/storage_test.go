package actorstore

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
)

// checkSize fails the test unless the txn's size is that of the state it
// would commit.
func checkSize(t *testing.T, tx *Txn) {
	t.Helper()
	if want := stateSize(tx.result()); tx.size != want {
		t.Fatalf("txn size %d, state it would commit %d", tx.size, want)
	}
}

// listTxn is a txn whose event wrote over its base: it overwrote "a",
// added "b/4" and "e", deleted "b/2" and "c", and deleted a missing key.
// The event sees a, b/1, b/3, b/4, d, e.
func listTxn(t *testing.T) (*Txn, map[string]string) {
	t.Helper()
	base := map[string][]byte{
		"a": []byte("base a"), "b/1": []byte("1"), "b/2": []byte("2"), "b/3": []byte("3"),
		"c": []byte("c"), "d": []byte("d"),
	}
	tx := newTxn(base, testMaxState)
	for _, kv := range [][2]string{{"a", "new a"}, {"b/4", "4"}, {"e", "e"}} {
		if err := tx.Put(kv[0], []byte(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	tx.Delete("b/2")
	tx.Delete("c")
	tx.Delete("missing")
	seen := map[string]string{"a": "new a", "b/1": "1", "b/3": "3", "b/4": "4", "d": "d", "e": "e"}
	return tx, seen
}

func TestListWindows(t *testing.T) {
	tests := []struct {
		name string
		opt  actors.ListOptions
		want string // keys, comma-separated
	}{
		{"all", actors.ListOptions{}, "a,b/1,b/3,b/4,d,e"},
		{"reverse", actors.ListOptions{Reverse: true}, "e,d,b/4,b/3,b/1,a"},
		{"limit", actors.ListOptions{Limit: 2}, "a,b/1"},
		{"limit over count", actors.ListOptions{Limit: 100}, "a,b/1,b/3,b/4,d,e"},
		{"reverse limit takes the last keys", actors.ListOptions{Limit: 2, Reverse: true}, "e,d"},
		{"prefix", actors.ListOptions{Prefix: "b/"}, "b/1,b/3,b/4"},
		{"prefix reverse", actors.ListOptions{Prefix: "b/", Reverse: true}, "b/4,b/3,b/1"},
		{"prefix limit", actors.ListOptions{Prefix: "b/", Limit: 2}, "b/1,b/3"},
		{"prefix reverse limit", actors.ListOptions{Prefix: "b/", Limit: 2, Reverse: true}, "b/4,b/3"},
		{"prefix without keys", actors.ListOptions{Prefix: "x"}, ""},
		{"prefix is a whole key", actors.ListOptions{Prefix: "a"}, "a"},
		{"start inclusive", actors.ListOptions{Start: "b/3"}, "b/3,b/4,d,e"},
		{"start between keys", actors.ListOptions{Start: "b/2"}, "b/3,b/4,d,e"},
		{"end exclusive", actors.ListOptions{End: "b/3"}, "a,b/1"},
		{"start and end", actors.ListOptions{Start: "b/1", End: "d"}, "b/1,b/3,b/4"},
		{"start and end reverse limit", actors.ListOptions{Start: "b/1", End: "d", Limit: 2, Reverse: true}, "b/4,b/3"},
		{"start before prefix", actors.ListOptions{Prefix: "b/", Start: "a"}, "b/1,b/3,b/4"},
		{"start inside prefix", actors.ListOptions{Prefix: "b/", Start: "b/3", Limit: 1}, "b/3"},
		{"end inside prefix", actors.ListOptions{Prefix: "b/", End: "b/4", Reverse: true}, "b/3,b/1"},
		{"start past prefix", actors.ListOptions{Prefix: "b/", Start: "c"}, ""},
		{"start after end", actors.ListOptions{Start: "d", End: "b"}, ""},
		{"start equals end", actors.ListOptions{Start: "d", End: "d"}, ""},
		{"deleted key as bounds", actors.ListOptions{Start: "b/2", End: "c", Reverse: true}, "b/4,b/3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, seen := listTxn(t)
			entries, err := tx.List(tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			keys := make([]string, len(entries))
			for i, e := range entries {
				keys[i] = e.Key
				if string(e.Value) != seen[e.Key] {
					t.Errorf("value of %q = %q, want %q", e.Key, e.Value, seen[e.Key])
				}
			}
			if got := strings.Join(keys, ","); got != tt.want {
				t.Fatalf("List(%+v) = %q, want %q", tt.opt, got, tt.want)
			}
		})
	}
}

func TestListCopiesAndKeepsState(t *testing.T) {
	tx, _ := listTxn(t)
	base := tx.base.snapshotMem()
	entries, err := tx.List(actors.ListOptions{Prefix: "a"})
	if err != nil || len(entries) != 1 {
		t.Fatalf("List = %v, %v", entries, err)
	}
	entries[0].Value[0] = 'X'
	if v, _ := tx.Get("a"); string(v) != "new a" {
		t.Fatalf("changing a listed value changed storage: %q", v)
	}
	if !maps.EqualFunc(base, tx.base.snapshotMem(), slices.Equal) {
		t.Fatal("List changed the base")
	}
}

func TestListNegativeLimit(t *testing.T) {
	tx, _ := listTxn(t)
	if entries, err := tx.List(actors.ListOptions{Limit: -1}); err == nil {
		t.Fatalf("List with limit -1 = %v, want an error", entries)
	}
}

func TestListEmpty(t *testing.T) {
	tx := newTxn(map[string][]byte{}, testMaxState)
	entries, err := tx.List(actors.ListOptions{Reverse: true, Limit: 3})
	if err != nil || len(entries) != 0 {
		t.Fatalf("List of empty storage = %v, %v", entries, err)
	}
}

func TestBatchAllOrNothing(t *testing.T) {
	tx := newTxn(map[string][]byte{"a": []byte("1")}, testMaxState)
	if err := tx.Put("x", []byte("earlier")); err != nil {
		t.Fatal(err)
	}
	writes, size := maps.Clone(tx.writes), tx.size
	err := tx.Batch(
		actors.Op{Key: "b", Value: []byte("2")},
		actors.Op{Key: "a", Delete: true},
		actors.Op{Key: "", Value: []byte("bad")},
		actors.Op{Key: "c", Value: []byte("3")},
	)
	if !errors.Is(err, actors.ErrLimit) || !strings.Contains(err.Error(), "batch op 2") || !strings.Contains(err.Error(), "empty key") {
		t.Fatalf("Batch with an empty key in the middle: err = %v", err)
	}
	if !maps.EqualFunc(writes, tx.writes, slices.Equal) || tx.size != size {
		t.Fatalf("a refused batch changed the write set: %q, size %d (was %q, %d)", tx.writes, tx.size, writes, size)
	}
	for key, want := range map[string]string{"a": "1", "x": "earlier"} {
		if v, ok := tx.Get(key); !ok || string(v) != want {
			t.Fatalf("after a refused batch, %q = %q, %v; want %q", key, v, ok, want)
		}
	}
	for _, key := range []string{"b", "c"} {
		if _, ok := tx.Get(key); ok {
			t.Fatalf("a refused batch wrote %q", key)
		}
	}

	value := []byte("3")
	err = tx.Batch(
		actors.Op{Key: "b", Value: []byte("2")},
		actors.Op{Key: "a", Delete: true},
		actors.Op{Key: "c", Value: value},
		actors.Op{Key: "b", Value: []byte("22")},
		actors.Op{Key: "x", Delete: true},
		actors.Op{Key: "x", Value: []byte("again")},
	)
	if err != nil {
		t.Fatal(err)
	}
	value[0] = 'X' // the batch keeps its own copy
	entries, err := tx.List(actors.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Key+"="+string(e.Value))
	}
	if s := strings.Join(got, ","); s != "b=22,c=3,x=again" {
		t.Fatalf("after the batch: %s", s)
	}
	checkSize(t, tx)
	if err := tx.Batch(); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
}

func TestBatchLimits(t *testing.T) {
	big := make([]byte, 60)
	ops := func(n int) []actors.Op {
		o := make([]actors.Op, n)
		for i := range o {
			o[i] = actors.Op{Key: "k", Value: []byte("v")}
		}
		return o
	}
	tests := []struct {
		name    string
		base    map[string][]byte
		maxSize int
		ops     []actors.Op
		err     string // "" for success; otherwise in the error
	}{
		{"long key", nil, testMaxState, []actors.Op{{Key: "a", Value: nil}, {Key: strings.Repeat("k", actors.MaxKeyLen+1), Value: []byte("v")}}, "batch op 1: storage limit: key of 2049 bytes"},
		{"long key of a delete", nil, testMaxState, []actors.Op{{Key: strings.Repeat("k", actors.MaxKeyLen+1), Delete: true}}, "batch op 0: storage limit: key of 2049 bytes"},
		{"empty key of a delete", nil, testMaxState, []actors.Op{{Key: "a", Value: nil}, {Delete: true}}, "batch op 1: storage limit: empty key"},
		{"max key", nil, testMaxState, []actors.Op{{Key: strings.Repeat("k", actors.MaxKeyLen), Value: []byte("v")}}, ""},
		{"large value", nil, testMaxState, []actors.Op{{Key: "a"}, {Key: "b"}, {Key: "c", Value: make([]byte, actors.MaxValueLen+1)}}, "batch op 2: storage limit: value of 131073 bytes"},
		{"max value", nil, testMaxState, []actors.Op{{Key: "c", Value: make([]byte, actors.MaxValueLen)}}, ""},
		{"state", nil, 100, []actors.Op{{Key: "a", Value: big}, {Key: "b", Value: big}}, "batch op 1: storage limit: state would be 122 bytes, over 100"},
		{"state with base", map[string][]byte{"a": big}, 100, []actors.Op{{Key: "b", Value: big}}, "batch op 0: storage limit: state would be 122 bytes"},
		{"delete makes room", map[string][]byte{"a": big}, 100, []actors.Op{{Key: "a", Delete: true}, {Key: "b", Value: big}}, ""},
		{"room made too late", map[string][]byte{"a": big}, 100, []actors.Op{{Key: "b", Value: big}, {Key: "a", Delete: true}}, "batch op 0: storage limit: state would be"},
		{"overwrite counts once", nil, 100, []actors.Op{{Key: "a", Value: big}, {Key: "a", Value: big}, {Key: "a", Value: big}}, ""},
		{"overwrite after delete", map[string][]byte{"a": big}, 100, []actors.Op{{Key: "a", Delete: true}, {Key: "a", Value: big}, {Key: "b", Value: big}}, "batch op 2: storage limit: state would be 122"},
		{"max ops", nil, testMaxState, ops(actors.MaxBatchOps), ""},
		{"too many ops", nil, testMaxState, ops(actors.MaxBatchOps + 1), "storage limit: batch of 129 ops, over 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := tt.base
			if base == nil {
				base = map[string][]byte{}
			}
			tx := newTxn(base, tt.maxSize)
			err := tx.Batch(tt.ops...)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("Batch: %v", err)
			case tt.err != "" && (!errors.Is(err, actors.ErrLimit) || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("Batch: err = %v, want ErrLimit containing %q", err, tt.err)
			case tt.err != "" && len(tx.writes) != 0:
				t.Fatalf("a refused batch wrote %q", tx.writes)
			}
			checkSize(t, tx)
		})
	}
}

func TestPutAfterBatchKeepsSize(t *testing.T) {
	tx := newTxn(map[string][]byte{"a": []byte("12345")}, 20)
	if err := tx.Batch(actors.Op{Key: "a", Delete: true}, actors.Op{Key: "b", Value: []byte("123")}); err != nil {
		t.Fatal(err)
	}
	checkSize(t, tx)
	// 4 bytes of b, 16 left: a 15-byte value under "c" fits, a 16-byte one
	// does not.
	if err := tx.Put("c", make([]byte, 16)); !errors.Is(err, actors.ErrLimit) {
		t.Fatalf("Put past the bound: err = %v", err)
	}
	if err := tx.Put("c", make([]byte, 15)); err != nil {
		t.Fatal(err)
	}
	checkSize(t, tx)
}

// DeleteAll leaves the txn's size that of the state it would commit (none
// of the base, none of the event's writes), so the bound counts from zero.
func TestDeleteAllKeepsSize(t *testing.T) {
	tx, _ := listTxn(t)
	if err := actors.DeleteAll(tx); err != nil {
		t.Fatal(err)
	}
	checkSize(t, tx)
	if tx.size != 0 || len(tx.result()) != 0 {
		t.Fatalf("after DeleteAll: size %d, state %q", tx.size, tx.result())
	}
	tx.maxSize = 10
	if err := tx.Put("a", make([]byte, 9)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Put("b", nil); !errors.Is(err, actors.ErrLimit) {
		t.Fatalf("Put past the bound after DeleteAll: err = %v", err)
	}
	checkSize(t, tx)
	if got := tx.result(); len(got) != 1 || len(got["a"]) != 9 {
		t.Fatalf("state after DeleteAll and a put: %q", got)
	}
}

// testMaxState bounds the state in these tests, as the host's default
// bound does.
const testMaxState = 1 << 30
