package actorstore

import (
	"errors"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
)

// The node's keys share the event's write set and the actor's bound, and a
// class neither sees nor writes them.
func TestNodeKeysAreHiddenFromTheClass(t *testing.T) {
	tx := newTxn(map[string][]byte{"a": []byte("1"), actors.NodePrefix + "p1": []byte("page")}, 64)
	if _, ok := tx.Get(actors.NodePrefix + "p1"); ok {
		t.Fatal("Get sees a node key")
	}
	if err := tx.Put(actors.NodePrefix+"x", []byte("v")); !errors.Is(err, actors.ErrLimit) {
		t.Fatalf("Put of a node key: %v, want ErrLimit", err)
	}
	if err := tx.Batch(actors.Op{Key: "b", Value: []byte("2")}, actors.Op{Key: actors.NodePrefix + "x", Delete: true}); !errors.Is(err, actors.ErrLimit) {
		t.Fatalf("Batch with a node key: %v, want ErrLimit", err)
	}
	tx.Delete(actors.NodePrefix + "p1")
	if v, ok := tx.nodeGet(actors.NodePrefix + "p1"); !ok || string(v) != "page" {
		t.Fatalf("a class's Delete removed a node key: %q %v", v, ok)
	}
	es, err := tx.List(actors.ListOptions{})
	if err != nil || len(es) != 1 || es[0].Key != "a" {
		t.Fatalf("List = %v, %v; want only a", es, err)
	}
	if err := tx.nodePut(actors.NodePrefix+"p2", make([]byte, 40)); err != nil {
		t.Fatal(err)
	}
	// 2 + 7 + 43 bytes so far: 16 more would pass the bound of 64.
	if err := tx.Put("big", make([]byte, 13)); !errors.Is(err, actors.ErrLimit) {
		t.Fatalf("node keys do not count toward the bound: %v", err)
	}
	if err := tx.nodePut("p3", nil); err == nil {
		t.Fatal("nodePut of a key without the prefix was taken")
	}
	if got := tx.nodeList(actors.ListOptions{Prefix: actors.NodePrefix}); len(got) != 2 || got[0].Key != actors.NodePrefix+"p1" || got[1].Key != actors.NodePrefix+"p2" {
		t.Fatalf("nodeList = %v", got)
	}
	if err := actors.DeleteAll(tx); err != nil {
		t.Fatal(err)
	}
	if kv := tx.result(); len(kv) != 0 || tx.size != 0 {
		t.Fatalf("after DeleteAll: %v, size %d", kv, tx.size)
	}
}
