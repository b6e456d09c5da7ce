package actorhost_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// noRecord is an import's check of an actor that no node holds and that
// has no record.
func noRecord(context.Context) (ownership.Generation, error) { return 0, nil }

// exportOf reads actor a from b and exports it.
func exportOf(t *testing.T, b ownership.Bucket, a ownership.Actor) ([]byte, actorstore.ExportInfo) {
	t.Helper()
	snap, err := actorstore.ReadActor(t.Context(), b, a)
	require.NoError(t, err)
	var buf bytes.Buffer
	info, err := snap.Export(t.Context(), &buf, time.Unix(1700000000, 0))
	require.NoError(t, err)
	return buf.Bytes(), info
}

func importInto(t *testing.T, b ownership.Bucket, a ownership.Actor, export []byte) actorstore.Imported {
	t.Helper()
	imp, err := actorstore.ImportActor(t.Context(), b, a, bytes.NewReader(export), actorstore.ImportOptions{Check: noRecord, RunPart: bulkPart})
	require.NoError(t, err)
	return imp
}

// A Snapshot of an actor whose storage is a head over runs of several
// parts (listed through manifests) reads every key as the actor does; its
// export, imported into another bucket and over the actor itself, is
// served by a later hold with exactly the same keys, and the import over
// the actor leaves no object its new head does not list.
func TestSnapshotExportImport(t *testing.T) {
	stores(t, func(t *testing.T, b ownership.Bucket) {
		m := model{}
		h := bulkHost(t, b)
		for i := range 6 {
			m.fill(t, h, 1, i*40, 80, 300, fmt.Sprint("v", i))
		}
		remove(t, h, 1, "/k0000003")
		delete(m, "k0000003")
		awaitMerges(t, h)
		require.NoError(t, h.HibernateAll(t.Context()))
		before := head(t, b)
		require.NotEmpty(t, before.Manifests, "the test wants a run listed through its manifest")

		snap, err := actorstore.ReadActor(t.Context(), b, bulkActor)
		require.NoError(t, err)
		assert.True(t, snap.Exists())
		assert.Equal(t, ownership.Generation(1), snap.Header().Gen)
		assert.Equal(t, 1+len(before.Listed), snap.Objects())
		es, err := snap.List(t.Context(), actors.ListOptions{}, false)
		require.NoError(t, err)
		got := model{}
		for _, e := range es {
			got[e.Key] = e.Value
		}
		assert.Equal(t, m, got)
		v, ok, err := snap.Get(t.Context(), "k0000100")
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, m["k0000100"], v)
		_, ok, err = snap.Get(t.Context(), "k0000003")
		require.NoError(t, err)
		assert.False(t, ok, "a deleted key")
		es, err = snap.List(t.Context(), actors.ListOptions{Prefix: "k00001", Limit: 3, Reverse: true}, false)
		require.NoError(t, err)
		assert.Equal(t, []string{"k0000199", "k0000198", "k0000197"}, keysOf(es))

		export, info := exportOf(t, b, bulkActor)
		assert.Equal(t, int64(len(m)), info.Entries)
		assert.Equal(t, "bulk", info.Class)
		read, err := actorstore.ReadExport(bytes.NewReader(export), nil)
		require.NoError(t, err)
		assert.Equal(t, info, read)

		// Into another bucket, where the actor has no state: a first hold
		// serves it.
		other := memstore.New(memstore.Faults{})
		imp := importInto(t, other, bulkActor, export)
		assert.False(t, imp.Replaced)
		assert.Equal(t, ownership.StateHeader{Gen: 0, Seq: 1}, imp.Header)
		m.check(t, bulkHost(t, other), 1)

		// Over the actor itself: a restore. The generation stays, the
		// count of writes goes on, the replaced runs are deleted.
		imp = importInto(t, b, bulkActor, export)
		assert.True(t, imp.Replaced)
		assert.Equal(t, ownership.StateHeader{Gen: 1, Seq: snap.Header().Seq + 1}, imp.Header)
		assert.Equal(t, len(before.Listed)+len(before.Garbage), imp.Deleted)
		after := head(t, b)
		assert.ElementsMatch(t, after.Listed, objects(t, b, ownership.RunsPrefix(bulkActor)), "only what the new head lists")
		h2 := bulkHost(t, b)
		m.check(t, h2, 2)
		m.fill(t, h2, 2, 500, 10, 300, "after")
		m.check(t, h2, 2)
	})
}

func keysOf(es []actors.Entry) []string {
	var ks []string
	for _, e := range es {
		ks = append(ks, e.Key)
	}
	return ks
}

// The SQL database of a Snapshot answers reads, and refuses every
// statement that would write, saying why; its pages are node keys, hidden
// unless asked for, and an export carries them, so the imported actor
// has the same rows.
func TestSnapshotSQL(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := notesHost(t, b, 0)
	see(t, h, 1, "/add/first", http.StatusOK, "id 1, 1 row")
	see(t, h, 1, "/both/k/second", http.StatusOK, "both")
	require.NoError(t, h.HibernateAll(t.Context()))

	snap, err := actorstore.ReadActor(t.Context(), b, store)
	require.NoError(t, err)
	rows, err := snap.Query(t.Context(), "SELECT id, body FROM notes ORDER BY id")
	require.NoError(t, err)
	assert.Equal(t, []string{"id", "body"}, rows.Columns)
	assert.Equal(t, [][]any{{int64(1), "first"}, {int64(2), "second"}}, rows.Rows)
	rows, err = snap.Query(t.Context(), "PRAGMA table_info(notes)")
	require.NoError(t, err)
	assert.Len(t, rows.Rows, 3)

	for _, q := range []string{
		"INSERT INTO notes(body) VALUES ('x')", "DELETE FROM notes", "UPDATE notes SET body = 'x'",
		"CREATE TABLE t(x)", "DROP TABLE notes", "INSERT INTO notes(body) VALUES ('x') RETURNING id",
	} {
		_, err := snap.Query(t.Context(), q)
		assert.ErrorIs(t, err, actorstore.ErrNotRead, q)
		assert.ErrorContains(t, err, "written only by its class", q)
	}
	for q, want := range map[string]string{
		"SELECT 1; SELECT 2":         "one statement at a time",
		"ATTACH 'x' AS x":            "ATTACH and DETACH are not allowed",
		"PRAGMA journal_mode=DELETE": "PRAGMA journal_mode is not allowed",
		"BEGIN":                      "the event is the transaction",
		"SELECT * FROM missing":      "no such table",
	} {
		_, err := snap.Query(t.Context(), q)
		assert.ErrorContains(t, err, want, q)
	}

	es, err := snap.List(t.Context(), actors.ListOptions{}, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"k"}, keysOf(es))
	es, err = snap.List(t.Context(), actors.ListOptions{}, true)
	require.NoError(t, err)
	assert.Greater(t, len(es), 2, "the pages and the stamp")
	assert.True(t, strings.HasPrefix(es[0].Key, actors.NodePrefix))

	export, _ := exportOf(t, b, store)
	other := memstore.New(memstore.Faults{})
	importInto(t, other, store, export)
	h2 := notesHost(t, other, 0)
	see(t, h2, 1, "/list/0", http.StatusOK, "1|first\n2|second\n")
	see(t, h2, 1, "/add/third", http.StatusOK, "id 3, 1 row")

	empty, err := actorstore.ReadActor(t.Context(), b, ownership.Actor{Class: "store", Name: "none"})
	require.NoError(t, err)
	assert.False(t, empty.Exists())
	_, err = empty.Query(t.Context(), "SELECT 1")
	assert.ErrorIs(t, err, actorstore.ErrNoSQLDatabase)
}

// An export that is not whole and unchanged is refused before anything
// is written; so is an import the record check refuses; an import whose
// state object changes between its read and its write (an acquisition's
// seal) is refused by the store and leaves nothing of itself.
func TestImportRefusals(t *testing.T) {
	src := memstore.New(memstore.Faults{})
	m := model{}
	h := bulkHost(t, src)
	m.fill(t, h, 1, 0, 200, 300, "src")
	require.NoError(t, h.HibernateAll(t.Context()))
	export, _ := exportOf(t, src, bulkActor)

	b := memstore.New(memstore.Faults{})
	imp := func(data []byte, check func(context.Context) (ownership.Generation, error)) error {
		_, err := actorstore.ImportActor(t.Context(), b, bulkActor, bytes.NewReader(data), actorstore.ImportOptions{Check: check, RunPart: bulkPart})
		return err
	}
	flipped := slices.Clone(export)
	flipped[len(flipped)/2] ^= 1
	for name, data := range map[string][]byte{
		"a byte changed": flipped,
		"cut short":      export[:len(export)-10],
		"bytes after":    append(slices.Clone(export), 0),
		"another format": append([]byte("wasmkeep-actor-export 2\n"), export[len("wasmkeep-actor-export 1\n"):]...),
		"empty":          nil,
	} {
		assert.ErrorIs(t, imp(data, noRecord), actorstore.ErrBadExport, name)
	}
	assert.Empty(t, objects(t, b, ownership.ActorsPrefix), "nothing written")

	held := errors.New("node n1 holds it")
	assert.ErrorIs(t, imp(export, func(context.Context) (ownership.Generation, error) { return 0, held }), held)
	assert.Empty(t, objects(t, b, ownership.ActorsPrefix), "nothing written")

	// A seal between the read and the write.
	sealed := ownership.EncodeState(ownership.StateHeader{Gen: 1, Seq: 1}, nil)
	err := imp(export, func(ctx context.Context) (ownership.Generation, error) {
		_, err := b.Put(ctx, actorstore.StateKey(bulkActor), sealed, ownership.IfAbsent())
		return 0, err
	})
	assert.ErrorIs(t, err, actorstore.ErrImportRaced)
	obj, err := b.Get(t.Context(), actorstore.StateKey(bulkActor))
	require.NoError(t, err)
	assert.Equal(t, sealed, obj.Body, "the seal stays")
	assert.Empty(t, objects(t, b, ownership.RunsPrefix(bulkActor)), "the import's runs are deleted")

	// A seal above the record's generation: an acquisition under way.
	_, err = b.Put(t.Context(), actorstore.StateKey(bulkActor), ownership.EncodeState(ownership.StateHeader{Gen: 2, Seq: 2}, nil), ownership.Always())
	require.NoError(t, err)
	assert.ErrorIs(t, imp(export, func(context.Context) (ownership.Generation, error) { return 1, nil }), actorstore.ErrAcquiring)
	assert.Equal(t, []string{actorstore.StateKey(bulkActor)}, objects(t, b, ownership.ActorsPrefix), "nothing written")
	require.NoError(t, imp(export, func(context.Context) (ownership.Generation, error) { return 2, nil }), "the record caught up")

	// A state object that does not decode is damage, replaced only when
	// asked; the generation is then the record's.
	_, err = b.Put(t.Context(), actorstore.StateKey(bulkActor), []byte("wk1 state 4 9\n\x00wk2\xff"), ownership.Always())
	require.NoError(t, err)
	var damaged *actorhost.DamagedError
	assert.ErrorAs(t, imp(export, noRecord), &damaged)
	_, err = actorstore.ReadActor(t.Context(), b, bulkActor)
	assert.ErrorAs(t, err, &damaged)
	assert.ErrorIs(t, err, ownership.ErrDamaged)
	_, err = b.Put(t.Context(), actorstore.StateKey(bulkActor), []byte("not a state object"), ownership.Always())
	require.NoError(t, err)
	done, err := actorstore.ImportActor(t.Context(), b, bulkActor, bytes.NewReader(export), actorstore.ImportOptions{
		Check: func(context.Context) (ownership.Generation, error) { return 7, nil }, OverDamaged: true, RunPart: bulkPart})
	require.NoError(t, err)
	assert.Equal(t, ownership.StateHeader{Gen: 7, Seq: 1}, done.Header)
	m.check(t, bulkHost(t, b), 8)
}

// A Snapshot whose runs a node merged away meanwhile says that the state
// changed, not that it is damaged; a listed run gone while the state
// object is unchanged is damage.
func TestSnapshotStateChanged(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := bulkHost(t, b)
	model{}.fill(t, h, 1, 0, 100, 300, "x")
	require.NoError(t, h.HibernateAll(t.Context()))
	runs := objects(t, b, ownership.RunsPrefix(bulkActor))
	require.NotEmpty(t, runs)

	snap, err := actorstore.ReadActor(t.Context(), b, bulkActor)
	require.NoError(t, err)
	for _, k := range runs {
		require.NoError(t, b.Delete(t.Context(), k, ownership.Always()))
	}
	_, err = snap.List(t.Context(), actors.ListOptions{}, true)
	var damaged *actorhost.DamagedError
	assert.ErrorAs(t, err, &damaged)
	assert.ErrorContains(t, err, "missing")

	obj, err := b.Get(t.Context(), actorstore.StateKey(bulkActor))
	require.NoError(t, err)
	_, err = b.Put(t.Context(), actorstore.StateKey(bulkActor), obj.Body, ownership.IfMatch(obj.ETag))
	require.NoError(t, err)
	_, err = snap.List(t.Context(), actors.ListOptions{}, true)
	assert.ErrorIs(t, err, actorstore.ErrStateChanged)
	_, _, err = snap.Get(t.Context(), "k0000050")
	assert.ErrorIs(t, err, actorstore.ErrStateChanged)
}

// A small actor is imported into the memory table of its head, as its
// own commits keep it, and goes on from there.
func TestImportSmall(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := newHost(t, b, &fakeKeeper{}, nil)
	mustCount(t, h, 1, "1")
	mustCount(t, h, 1, "2")
	require.NoError(t, h.HibernateAll(t.Context()))
	export, info := exportOf(t, b, room)
	assert.Equal(t, int64(1), info.Entries)

	other := memstore.New(memstore.Faults{})
	imp := importInto(t, other, room, export)
	assert.Equal(t, 1, imp.Written, "the state object alone")
	assert.Empty(t, objects(t, other, ownership.RunsPrefix(room)))
	mustCount(t, newHost(t, other, &fakeKeeper{}, nil), 1, "3")
}
