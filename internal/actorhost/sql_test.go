package actorhost_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// notes is a class of the SQL tests: a table of notes, driven by the
// request's path, /<route>/<arg>/<arg>.
type notes struct{}

func (notes) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	route, rest, _ := strings.Cut(strings.TrimPrefix(req.Path, "/"), "/")
	args := strings.Split(rest, "/")
	db := actors.SQL(ctx)
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL, data BLOB)"); err != nil {
		return nil, err
	}
	ok := func(s string) (*actors.Response, error) { return actors.Text(http.StatusOK, s), nil }
	switch route {
	case "add": // /add/<body>: a note
		res, err := db.Exec("INSERT INTO notes(body) VALUES (?)", args[0])
		if err != nil {
			return nil, err
		}
		return ok(fmt.Sprintf("id %d, %d row", res.LastInsertID, res.RowsAffected))
	case "list": // /list/<min id>: the notes past it
		min, _ := strconv.Atoi(args[0])
		rows, err := db.Query("SELECT id, body FROM notes WHERE id > ? ORDER BY id", min)
		if err != nil {
			return nil, err
		}
		return ok(table(rows))
	case "add-fail": // /add-fail/<body>: adds, then fails
		if _, err := db.Exec("INSERT INTO notes(body) VALUES (?)", args[0]); err != nil {
			return nil, err
		}
		return nil, errors.New("boom")
	case "add-rollback": // /add-rollback/<body>: adds, then rolls back
		if _, err := db.Exec("INSERT INTO notes(body) VALUES (?)", args[0]); err != nil {
			return nil, err
		}
		return nil, actors.Rollback(actors.Text(http.StatusConflict, "rolled back"))
	case "both": // /both/<key>/<body>: a KV put and a note, one event
		if err := st.Put(args[0], []byte(args[1])); err != nil {
			return nil, err
		}
		if _, err := db.Exec("INSERT INTO notes(body) VALUES (?)", args[1]); err != nil {
			return nil, err
		}
		return ok("both")
	case "blob": // /blob/<bytes>: a note with a blob of that size
		n, _ := strconv.Atoi(args[0])
		res, err := db.Exec("INSERT INTO notes(body, data) VALUES ('blob', ?)", make([]byte, n))
		if err != nil {
			return nil, err
		}
		return ok(fmt.Sprintf("id %d", res.LastInsertID))
	case "count":
		rows, err := db.Query("SELECT count(*) FROM notes")
		if err != nil {
			return nil, err
		}
		return ok(table(rows))
	case "wipe": // DeleteAll, then the table is made again (at the next event)
		if err := actors.DeleteAll(st); err != nil {
			return nil, err
		}
		rows, err := db.Query("SELECT name FROM sqlite_schema")
		if err != nil {
			return nil, err
		}
		return ok("schema after DeleteAll: " + table(rows))
	case "peek": // what the class's own calls see of the pages
		entries, err := st.List(actors.ListOptions{})
		if err != nil {
			return nil, err
		}
		_, got := st.Get(actors.NodePrefix + "sql/\x00\x00\x00\x00\x00\x00\x00\x01")
		put := st.Put(actors.NodePrefix+"sql/\x00\x00\x00\x00\x00\x00\x00\x01", []byte("x"))
		batch := st.Batch(actors.Op{Key: actors.NodePrefix + "sql-stamp", Delete: true})
		st.Delete(actors.NodePrefix + "sql/\x00\x00\x00\x00\x00\x00\x00\x01")
		return ok(fmt.Sprintf("%d entries, got %v, put: %v, batch: %v", len(entries), got, put, batch))
	}
	return actors.Text(http.StatusNotFound, "no route "+req.Path), nil
}

// table is rows as text: a line per row, values separated by |.
func table(rows *actors.SQLRows) string {
	var b strings.Builder
	for _, r := range rows.Rows {
		for i, v := range r {
			if i > 0 {
				b.WriteByte('|')
			}
			fmt.Fprint(&b, v)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// notesHost is a host serving notes as class "store" on b, its actors'
// state bounded by maxState (0: the default).
func notesHost(t *testing.T, b ownership.Bucket, maxState int) *actorhost.Host {
	t.Helper()
	reg := actors.NewRegistry()
	require.NoError(t, reg.Register("store", notes{}))
	return hostOf(t, actorhost.Config{Bucket: b, Registry: reg, MaxState: maxState})
}

// see checks the answer of path on the store actor at gen.
func see(t *testing.T, h *actorhost.Host, gen ownership.Generation, path string, status int, body string) {
	t.Helper()
	resp := deliver(t, h, gen, path)
	assert.Equal(t, status, resp.Status, "%s: %s", path, resp.Body)
	if body == failedBody {
		// A failed event's answer names an id its log line carries.
		id := resp.Header.Get(actorhost.ErrorIDHeader)
		assert.Regexp(t, `^[0-9a-f]{12}$`, id, path)
		assert.Equal(t, "actor error (id "+id+": the node's log has it as error_id="+id+")\n", string(resp.Body), path)
		return
	}
	assert.Equal(t, body, string(resp.Body), path)
}

// failedBody stands for the answer of a failed event in see.
const failedBody = "actor error"

// A table made, rows inserted with parameters in several events and
// selected with one, on one resident connection; another node on the same
// bucket (a later hold) reads the same rows.
func TestSQLRowsAcrossEvents(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := notesHost(t, b, 0)
	opens := actorhost.SQLOpens.Load()
	see(t, h, 1, "/add/first", http.StatusOK, "id 1, 1 row")
	see(t, h, 1, "/add/second", http.StatusOK, "id 2, 1 row")
	see(t, h, 1, "/add/it's third", http.StatusOK, "id 3, 1 row")
	see(t, h, 1, "/list/0", http.StatusOK, "1|first\n2|second\n3|it's third\n")
	see(t, h, 1, "/list/1", http.StatusOK, "2|second\n3|it's third\n")
	assert.Equal(t, int64(1), actorhost.SQLOpens.Load()-opens, "one connection for the residency's events")

	live := actorhost.SQLLive.Load()
	require.NoError(t, h.HibernateAll(t.Context()))
	assert.Equal(t, live-1, actorhost.SQLLive.Load(), "the connection closed as the actor left memory")

	h2 := notesHost(t, b, 0)
	see(t, h2, 2, "/list/0", http.StatusOK, "1|first\n2|second\n3|it's third\n")
	see(t, h2, 2, "/add/fourth", http.StatusOK, "id 4, 1 row")
	see(t, h2, 2, "/count/", http.StatusOK, "4\n")
}

// An event that fails, or rolls back, after its SQL writes leaves no row
// of them, neither in the bucket nor in the connection that wrote them.
func TestSQLDiscardedEvents(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := notesHost(t, b, 0)
	see(t, h, 1, "/add/kept", http.StatusOK, "id 1, 1 row")
	etag := stateETag(t, b)

	see(t, h, 1, "/add-fail/lost", http.StatusInternalServerError, failedBody)
	see(t, h, 1, "/list/0", http.StatusOK, "1|kept\n")
	see(t, h, 1, "/add-rollback/lost", http.StatusConflict, "rolled back")
	see(t, h, 1, "/list/0", http.StatusOK, "1|kept\n")
	assert.Equal(t, etag, stateETag(t, b), "a discarded event wrote the state object")
	// The rowid the discarded events took is free again.
	see(t, h, 1, "/add/next", http.StatusOK, "id 2, 1 row")

	// Several discarded events in a row, each on a connection opened
	// again, and a committed one between two.
	see(t, h, 1, "/add-fail/lost", http.StatusInternalServerError, failedBody)
	see(t, h, 1, "/add-rollback/lost", http.StatusConflict, "rolled back")
	see(t, h, 1, "/add/last", http.StatusOK, "id 3, 1 row")
	see(t, h, 1, "/add-fail/lost", http.StatusInternalServerError, failedBody)
	see(t, h, 1, "/list/0", http.StatusOK, "1|kept\n2|next\n3|last\n")
	require.NoError(t, h.HibernateAll(t.Context())) // the hold ends before the next begins
	see(t, notesHost(t, b, 0), 2, "/list/0", http.StatusOK, "1|kept\n2|next\n3|last\n")
}

// A connection kept across holds never serves pages it only believes in.
// Its failed event took SQLite's file change counter from n to n+1, and
// another node's hold then took the durable counter from n to n+1 too,
// with other rows: SQLite's own check (the counter) would keep the first
// node's cache; the stamp does not.
func TestSQLCacheAcrossHolds(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := notesHost(t, b, 0)
	see(t, h, 1, "/add/one", http.StatusOK, "id 1, 1 row")
	see(t, h, 1, "/add-fail/believed", http.StatusInternalServerError, failedBody)

	// Each hold ends before the next begins, as the keeper has it: a
	// hold left resident would go on committing its merges in the
	// background, over the next hold's fence.
	h2 := notesHost(t, b, 0)
	see(t, h2, 2, "/add/two", http.StatusOK, "id 2, 1 row")
	require.NoError(t, h2.HibernateAll(t.Context()))

	see(t, h, 3, "/list/0", http.StatusOK, "1|one\n2|two\n")
	see(t, h, 3, "/add/three", http.StatusOK, "id 3, 1 row")
	require.NoError(t, h.HibernateAll(t.Context()))
	see(t, notesHost(t, b, 0), 4, "/list/0", http.StatusOK, "1|one\n2|two\n3|three\n")
}

// refusingBucket refuses a state put while refuse is set.
type refusingBucket struct {
	ownership.Bucket
	refuse atomic.Bool
}

func (b *refusingBucket) Put(ctx context.Context, key string, body []byte, c ownership.Condition) (ownership.ETag, error) {
	if b.refuse.Load() {
		return "", ownership.ErrPrecondition
	}
	return b.Bucket.Put(ctx, key, body, c)
}

// An event's KV and SQL writes land together or not at all: a commit the
// bucket refuses takes both, and the actor goes on from what the bucket
// holds.
func TestSQLCommitsWithKV(t *testing.T) {
	b := &refusingBucket{Bucket: memstore.New(memstore.Faults{})}
	h := notesHost(t, b, 0)
	see(t, h, 1, "/both/a/first", http.StatusOK, "both")

	b.refuse.Store(true)
	_, err := h.Deliver(t.Context(), store, 1, &actors.Request{Method: http.MethodGet, Path: "/both/b/second", Header: http.Header{}})
	var unavailable *actorhost.UnavailableError
	require.ErrorAs(t, err, &unavailable, "the event whose commit was refused")
	b.refuse.Store(false)

	see(t, h, 1, "/list/0", http.StatusOK, "1|first\n")
	see(t, h, 1, "/both/c/third", http.StatusOK, "both")
	see(t, h, 1, "/list/0", http.StatusOK, "1|first\n2|third\n")
	require.NoError(t, h.HibernateAll(t.Context())) // the hold ends before the next begins
	h2 := storeHost(t, b, routes{}, 0)
	assert.Equal(t, "a=first,c=third", string(deliver(t, h2, 2, "/dump").Body), "the KV writes")
	see(t, notesHost(t, b, 0), 3, "/list/0", http.StatusOK, "1|first\n2|third\n")
}

// A statement that would take the actor's state past its bound fails with
// ErrLimit (413), is undone, and leaves the rows before it; after a
// DeleteAll the database is gone, and its room free.
func TestSQLBound(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := notesHost(t, b, 64<<10)
	see(t, h, 1, "/blob/20000", http.StatusOK, "id 1")
	see(t, h, 1, "/blob/20000", http.StatusOK, "id 2")
	resp := deliver(t, h, 1, "/blob/30000")
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.Status)
	assert.Contains(t, string(resp.Body), `sql "INSERT INTO notes(body, data) VALUES ('blob', ?)": storage limit: state would be `)
	assert.Contains(t, string(resp.Body), "over 65536 (sqlite3: database or disk is full)\n")
	see(t, h, 1, "/count/", http.StatusOK, "2\n")
	see(t, h, 1, "/blob/10000", http.StatusOK, "id 3")

	see(t, h, 1, "/wipe/", http.StatusOK, "schema after DeleteAll: ")
	see(t, h, 1, "/count/", http.StatusOK, "0\n")
	see(t, h, 1, "/blob/30000", http.StatusOK, "id 1")
	require.NoError(t, h.HibernateAll(t.Context())) // the hold ends before the next begins
	see(t, notesHost(t, b, 0), 2, "/list/0", http.StatusOK, "1|blob\n")
}

// The bound's error, in the class: errors.Is finds ErrLimit, and the
// event's writes before the statement stay.
func TestSQLBoundInTheClass(t *testing.T) {
	r := routes{
		"/fill": func(ctx context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			db := actors.SQL(ctx)
			if _, err := db.Exec("CREATE TABLE t(v BLOB)"); err != nil {
				return nil, err
			}
			if err := st.Put("k", []byte("v")); err != nil {
				return nil, err
			}
			_, err := db.Exec("INSERT INTO t VALUES (?)", make([]byte, 40000))
			if !errors.Is(err, actors.ErrLimit) {
				return nil, fmt.Errorf("want ErrLimit, got %v", err)
			}
			rows, err := db.Query("SELECT count(*) FROM t")
			if err != nil {
				return nil, err
			}
			return actors.Text(http.StatusOK, table(rows)), nil
		},
	}
	b := memstore.New(memstore.Faults{})
	h := storeHost(t, b, r, 32<<10)
	assert.Equal(t, "0\n", string(deliver(t, h, 1, "/fill").Body))
	require.NoError(t, h.HibernateAll(t.Context())) // the hold ends before the next begins
	assert.Equal(t, "k=v", durable(t, b, r, 2))
}

// DeleteAll removes the database with the event's other keys, and an
// event that fails after it leaves the database as it was.
func TestSQLDeleteAll(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	h := notesHost(t, b, 0)
	see(t, h, 1, "/add/one", http.StatusOK, "id 1, 1 row")
	see(t, h, 1, "/wipe/", http.StatusOK, "schema after DeleteAll: ")
	see(t, h, 1, "/list/0", http.StatusOK, "")
	see(t, h, 1, "/add/two", http.StatusOK, "id 1, 1 row")
	require.NoError(t, h.HibernateAll(t.Context())) // the hold ends before the next begins
	h2 := storeHost(t, b, routes{}, 0)
	assert.Equal(t, "", string(deliver(t, h2, 2, "/dump").Body), "the pages are no class's keys")
	see(t, notesHost(t, b, 0), 3, "/list/0", http.StatusOK, "1|two\n")
}

// The class neither sees nor writes the pages through its Storage.
func TestSQLPagesHidden(t *testing.T) {
	h := notesHost(t, memstore.New(memstore.Faults{}), 0)
	see(t, h, 1, "/add/one", http.StatusOK, "id 1, 1 row")
	resp := deliver(t, h, 1, "/peek/")
	assert.Contains(t, string(resp.Body), "0 entries, got false, put: storage limit: key ")
	assert.Contains(t, string(resp.Body), "batch: batch op 0: storage limit: key ")
	see(t, h, 1, "/list/0", http.StatusOK, "1|one\n")
}

// What SQL refuses: outside an event, transaction statements, PRAGMAs that
// set the connection, ATTACH, several statements with arguments, and
// values that are no SQL values; the statements a class runs itself.
func TestSQLRefusals(t *testing.T) {
	_, err := actors.SQL(context.Background()).Exec("SELECT 1")
	assert.ErrorIs(t, err, actors.ErrNoSQL)

	errs := map[string]string{}
	r := routes{
		"/try": func(ctx context.Context, _ *actors.Request, _ actors.Storage) (*actors.Response, error) {
			db := actors.SQL(ctx)
			for _, q := range []string{
				"BEGIN", "SAVEPOINT s", "COMMIT", "PRAGMA journal_mode=DELETE", "PRAGMA foreign_keys=OFF",
				"PRAGMA locking_mode=EXCLUSIVE", "ATTACH 'x' AS x", "VACUUM INTO 'y'", "SELECT nope",
			} {
				if _, err := db.Exec(q); err != nil {
					errs[q] = err.Error()
				}
			}
			_, err := db.Exec("SELECT ?; SELECT 2", 1)
			errs["two"] = err.Error()
			_, err = db.Exec("SELECT ?", struct{}{})
			errs["struct"] = err.Error()
			_, err = db.Exec("SELECT ?, ?", 1)
			errs["count"] = err.Error()
			_, err = db.Query("SELECT ?", uint64(1)<<63)
			errs["uint64"] = err.Error()
			rows, err := db.Query("PRAGMA foreign_keys")
			if err != nil {
				return nil, err
			}
			if _, err := db.Exec("CREATE TABLE a(x); CREATE TABLE b(y); PRAGMA user_version=7"); err != nil {
				return nil, err
			}
			v, err := db.Query("PRAGMA user_version")
			if err != nil {
				return nil, err
			}
			return actors.Text(http.StatusOK, table(rows)+table(v)), nil
		},
	}
	h := storeHost(t, memstore.New(memstore.Faults{}), r, 0)
	assert.Equal(t, "1\n7\n", string(deliver(t, h, 1, "/try").Body), "foreign keys on; user_version set")
	const tx = "the event is the transaction: BEGIN, COMMIT, ROLLBACK and SAVEPOINT are not allowed: an event's statements commit together or not at all: sqlite3: authorization denied"
	for q, want := range map[string]string{
		"BEGIN":                         tx,
		"SAVEPOINT s":                   tx,
		"COMMIT":                        tx,
		"PRAGMA journal_mode=DELETE":    "PRAGMA journal_mode is not allowed",
		"PRAGMA foreign_keys=OFF":       "PRAGMA foreign_keys is not allowed to be set",
		"PRAGMA locking_mode=EXCLUSIVE": "PRAGMA locking_mode is not allowed",
		"ATTACH 'x' AS x":               "an actor has one database: ATTACH and DETACH are not allowed",
		"VACUUM INTO 'y'":               "an actor has one database: ATTACH and DETACH are not allowed",
		"SELECT nope":                   "no such column: nope",
		"two":                           "more than one statement",
		"struct":                        "argument 1: a struct {} is not an SQL value",
		"count":                         "2 parameters, 1 arguments",
		"uint64":                        "past SQLite's 64-bit signed integers",
	} {
		assert.Contains(t, errs[q], want, q)
	}
}

// Exec without arguments runs a script of statements in turn, later ones
// naming what earlier ones create, and reports what they all changed;
// one that fails ends the script, what ran before it stays.
func TestSQLScript(t *testing.T) {
	r := routes{
		"/script": func(ctx context.Context, _ *actors.Request, _ actors.Storage) (*actors.Response, error) {
			db := actors.SQL(ctx)
			res, err := db.Exec("CREATE TABLE m(v INTEGER); INSERT INTO m VALUES (1); -- a comment\n INSERT INTO m VALUES (2);")
			if err != nil {
				return nil, err
			}
			_, failed := db.Exec("INSERT INTO m VALUES (3); INSERT INTO nope VALUES (4); INSERT INTO m VALUES (5)")
			rows, err := db.Query("SELECT v FROM m ORDER BY v")
			if err != nil {
				return nil, err
			}
			return actors.Text(http.StatusOK, fmt.Sprintf("%d %v\n%s", res.RowsAffected, failed, table(rows))), nil
		},
	}
	h := storeHost(t, memstore.New(memstore.Faults{}), r, 0)
	got := string(deliver(t, h, 1, "/script").Body)
	assert.True(t, strings.HasPrefix(got, "2 ") && strings.HasSuffix(got, "\n1\n2\n3\n"), got)
	assert.Contains(t, got, "no such table: nope")
}

// Transaction undoes its SQL writes when its function fails, and keeps
// them when it succeeds; nested ones undo only themselves; the event's
// KV writes are not touched.
func TestSQLTransaction(t *testing.T) {
	r := routes{
		"/tx": func(ctx context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			db := actors.SQL(ctx)
			exec := func(q string, args ...any) error { _, err := db.Exec(q, args...); return err }
			if err := exec("CREATE TABLE t(v TEXT)"); err != nil {
				return nil, err
			}
			failed := db.Transaction(func() error {
				if err := exec("INSERT INTO t VALUES ('undone')"); err != nil {
					return err
				}
				_ = st.Put("k", []byte("kept"))
				return errors.New("changed my mind")
			})
			kept := db.Transaction(func() error {
				if err := exec("INSERT INTO t VALUES ('outer')"); err != nil {
					return err
				}
				inner := db.Transaction(func() error {
					_ = exec("INSERT INTO t VALUES ('inner')")
					return errors.New("inner no")
				})
				if inner == nil {
					return errors.New("inner kept")
				}
				return nil
			})
			func() {
				defer func() { _ = recover() }()
				_ = db.Transaction(func() error {
					_ = exec("INSERT INTO t VALUES ('panicked')")
					panic("boom")
				})
			}()
			rows, err := db.Query("SELECT v FROM t")
			if err != nil {
				return nil, err
			}
			return actors.Text(http.StatusOK, fmt.Sprintf("%v; %v; %s", failed, kept, table(rows))), nil
		},
	}
	b := memstore.New(memstore.Faults{})
	h := storeHost(t, b, r, 0)
	assert.Equal(t, "changed my mind; <nil>; outer\n", string(deliver(t, h, 1, "/tx").Body))
	require.NoError(t, h.HibernateAll(t.Context())) // the hold ends before the next begins
	assert.Equal(t, "k=kept", durable(t, b, r, 2))
}

// Query's values: each SQLite type as its Go type, NULL as nil, an empty
// blob as an empty, non-nil slice.
func TestSQLValues(t *testing.T) {
	var got *actors.SQLRows
	r := routes{
		"/values": func(ctx context.Context, _ *actors.Request, _ actors.Storage) (*actors.Response, error) {
			var err error
			got, err = actors.SQL(ctx).Query("SELECT ? AS i, ? AS f, ? AS s, ? AS b, ? AS e, ? AS n, ? AS t",
				int32(-7), 2.5, "text", []byte{1, 2}, []byte{}, nil, true)
			if err != nil {
				return nil, err
			}
			return actors.Text(http.StatusOK, "ok"), nil
		},
	}
	h := storeHost(t, memstore.New(memstore.Faults{}), r, 0)
	assert.Equal(t, "ok", string(deliver(t, h, 1, "/values").Body))
	require.NotNil(t, got)
	assert.Equal(t, []string{"i", "f", "s", "b", "e", "n", "t"}, got.Columns)
	assert.Equal(t, [][]any{{int64(-7), 2.5, "text", []byte{1, 2}, []byte{}, nil, int64(1)}}, got.Rows)
}

// A Transaction that spans a DeleteAll fails, whether or not fn calls SQL
// after the DeleteAll, and writes nothing: neither its commit nor its undo
// reaches the emptied storage, nor does a statement run after the
// DeleteAll. The next event's SQL opens the empty database DeleteAll left.
func TestSQLTransactionAcrossDeleteAll(t *testing.T) {
	for _, after := range []string{"", "INSERT INTO t VALUES ('after')"} {
		t.Run(fmt.Sprintf("a statement after: %q", after), func(t *testing.T) {
			r := routes{
				"/make": func(ctx context.Context, _ *actors.Request, _ actors.Storage) (*actors.Response, error) {
					db := actors.SQL(ctx)
					if _, err := db.Exec("CREATE TABLE t(v TEXT)"); err != nil {
						return nil, err
					}
					_, err := db.Exec("INSERT INTO t VALUES ('before')")
					return actors.Text(http.StatusOK, ""), err
				},
				"/tx": func(ctx context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
					db := actors.SQL(ctx)
					err := db.Transaction(func() error {
						if _, err := db.Exec("INSERT INTO t SELECT v || ' again' FROM t"); err != nil {
							return err
						}
						if err := actors.DeleteAll(st); err != nil {
							return err
						}
						if after != "" {
							if _, err := db.Exec(after); !errors.Is(err, actors.ErrSQLReset) {
								return fmt.Errorf("%q after the DeleteAll: %v, want the reset", after, err)
							}
						}
						return nil
					})
					if !errors.Is(err, actors.ErrSQLReset) {
						return nil, fmt.Errorf("the Transaction: %v, want the reset", err)
					}
					rows, err := db.Query("SELECT name FROM sqlite_schema")
					if err != nil {
						return nil, err
					}
					return actors.Text(http.StatusOK, "schema: "+table(rows)), st.Put("k", []byte("v"))
				},
			}
			b := memstore.New(memstore.Faults{})
			h := storeHost(t, b, r, 0)
			assert.Equal(t, http.StatusOK, deliver(t, h, 1, "/make").Status)
			resp := deliver(t, h, 1, "/tx")
			assert.Equal(t, "schema: ", string(resp.Body), "the database after the Transaction")
			require.NoError(t, h.HibernateAll(t.Context()))
			assert.Equal(t, "k=v", durable(t, b, r, 2), "the class's keys: what the event put after the DeleteAll")
			h2 := storeHost(t, b, r, 0)
			assert.Equal(t, http.StatusOK, deliver(t, h2, 3, "/make").Status, "a new table on the emptied database")
		})
	}
}

// A statement cannot make its connection hold more than SQL allows. A
// value past SQLMaxLength fails as a statement. A sort past the
// connection's memory stops SQLite where it stands: the event fails
// (its writes, pages half written among them, are discarded), and the
// next event's SQL runs on a fresh connection over the pages as they
// were.
func TestSQLMemoryBound(t *testing.T) {
	query := func(q string) func(context.Context, *actors.Request, actors.Storage) (*actors.Response, error) {
		return func(ctx context.Context, _ *actors.Request, _ actors.Storage) (*actors.Response, error) {
			rows, err := actors.SQL(ctx).Query(q)
			if err != nil {
				return actors.Text(http.StatusOK, "error: "+err.Error()), nil
			}
			return actors.Text(http.StatusOK, table(rows)), nil
		}
	}
	r := routes{
		"/make": func(ctx context.Context, _ *actors.Request, _ actors.Storage) (*actors.Response, error) {
			_, err := actors.SQL(ctx).Exec("CREATE TABLE t(v); INSERT INTO t VALUES ('kept')")
			return actors.Text(http.StatusOK, ""), err
		},
		"/blob": query(fmt.Sprintf("SELECT length(randomblob(%d))", actors.SQLMaxLength+1)),
		"/sort": query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 2000000) " +
			"SELECT count(*) FROM (SELECT randomblob(100) AS v FROM c ORDER BY v)"),
		"/read": query("SELECT v FROM t"),
	}
	h := storeHost(t, memstore.New(memstore.Faults{}), r, 0)
	assert.Equal(t, http.StatusOK, deliver(t, h, 1, "/make").Status)
	assert.Contains(t, string(deliver(t, h, 1, "/blob").Body), "string or blob too big")
	resp := deliver(t, h, 1, "/sort")
	assert.Equal(t, http.StatusInternalServerError, resp.Status, "%s", resp.Body)
	assert.Equal(t, "kept\n", string(deliver(t, h, 1, "/read").Body))
}
