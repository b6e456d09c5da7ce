package actorstore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
)

// TestDialRecords: an actor's outbound socket records are node keys:
// written, read, listed, deleted, unseen by the class's List, and kept by
// DeleteAll (the sockets stay open, and their closes must find them).
func TestDialRecords(t *testing.T) {
	tx := newTxn(nil, 1<<20)
	a := DialRecord{Stamp: 0xfeed, ID: 1<<62 | 7, URL: "ws://127.0.0.1:9/feed", Tags: []string{"feed"}}
	b := DialRecord{Stamp: 0xbeef, ID: 1<<62 | 9, URL: "wss://example.com/x"}
	require.NoError(t, tx.PutDial(a))
	require.NoError(t, tx.PutDial(b))
	got, ok, err := tx.Dial(a.Stamp, a.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, a, got)
	_, ok, err = tx.Dial(a.Stamp, b.ID)
	require.NoError(t, err)
	require.False(t, ok, "a record is named by its stamp and ID together")
	list, err := tx.List(actors.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list, "a class's list never shows the node's keys")

	require.NoError(t, tx.Put("k", []byte("v")))
	require.NoError(t, tx.DeleteAll())
	_, ok = tx.Get("k")
	require.False(t, ok)
	all, err := tx.Dials()
	require.NoError(t, err)
	require.ElementsMatch(t, []DialRecord{a, b}, all, "DeleteAll keeps the records of open sockets")

	tx.DeleteDial(a.Stamp, a.ID)
	all, err = tx.Dials()
	require.NoError(t, err)
	require.Equal(t, []DialRecord{b}, all)
}
