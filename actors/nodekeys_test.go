package actors

import (
	"errors"
	"testing"
)

// The node's keys share the event's write set and the actor's bound, and a
// class neither sees nor writes them.
func TestNodeKeysAreHiddenFromTheClass(t *testing.T) {
	tx := newTxn(map[string][]byte{"a": []byte("1"), NodePrefix + "p1": []byte("page")}, 64)
	if _, ok := tx.Get(NodePrefix + "p1"); ok {
		t.Fatal("Get sees a node key")
	}
	if err := tx.Put(NodePrefix+"x", []byte("v")); !errors.Is(err, ErrLimit) {
		t.Fatalf("Put of a node key: %v, want ErrLimit", err)
	}
	if err := tx.Batch(Op{Key: "b", Value: []byte("2")}, Op{Key: NodePrefix + "x", Delete: true}); !errors.Is(err, ErrLimit) {
		t.Fatalf("Batch with a node key: %v, want ErrLimit", err)
	}
	tx.Delete(NodePrefix + "p1")
	if v, ok := tx.nodeGet(NodePrefix + "p1"); !ok || string(v) != "page" {
		t.Fatalf("a class's Delete removed a node key: %q %v", v, ok)
	}
	es, err := tx.List(ListOptions{})
	if err != nil || len(es) != 1 || es[0].Key != "a" {
		t.Fatalf("List = %v, %v; want only a", es, err)
	}
	if err := tx.nodePut(NodePrefix+"p2", make([]byte, 40)); err != nil {
		t.Fatal(err)
	}
	// 2 + 7 + 43 bytes so far: 16 more would pass the bound of 64.
	if err := tx.Put("big", make([]byte, 13)); !errors.Is(err, ErrLimit) {
		t.Fatalf("node keys do not count toward the bound: %v", err)
	}
	if err := tx.nodePut("p3", nil); err == nil {
		t.Fatal("nodePut of a key without the prefix was taken")
	}
	if got := tx.nodeList(ListOptions{Prefix: NodePrefix}); len(got) != 2 || got[0].Key != NodePrefix+"p1" || got[1].Key != NodePrefix+"p2" {
		t.Fatalf("nodeList = %v", got)
	}
	if err := DeleteAll(tx); err != nil {
		t.Fatal(err)
	}
	if kv := tx.result(); len(kv) != 0 || tx.size != 0 {
		t.Fatalf("after DeleteAll: %v, size %d", kv, tx.size)
	}
}
