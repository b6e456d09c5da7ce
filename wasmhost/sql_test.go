package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// sqlScript is the probe's /sql request: the body's blocks run in turn
// (testdata/probe/sql.go says how they read and what they answer).
func sqlScript(rawQuery string, blocks ...string) *actors.Request {
	return post("/sql", rawQuery, strings.Join(blocks, "\n\n"))
}

// stateSize stands for the sizes a limit's message gives, which depend on
// the pages SQLite wrote.
var stateSize = regexp.MustCompile(`state would be \d+ bytes`)

// expectSQL delivers a /sql request to the probe name and fails unless
// the answer is status and want (the sizes of a limit's message as N).
func (p *probeHost) expectSQL(name string, status int, req *actors.Request, want string) {
	p.t.Helper()
	resp := p.deliver(name, req)
	got := stateSize.ReplaceAllString(string(resp.Body), "state would be N bytes")
	if resp.Status != status || got != want {
		p.t.Fatalf("%s /sql ?%v\n%s\n= %d:\n%s\nwant %d:\n%s", name, req.Query.Encode(), req.Body, resp.Status, got, status, want)
	}
}

// TestGuestSQLInHost runs the guest SDK's SQL on real events, in both
// isolations (on one shared guest in class): values of every type
// through parameters and rows, SQL errors as errors with SQLite's message,
// the bound as a limit that keeps the event's other writes, rows across
// events and after a restart on the same bucket, a rolled-back and a
// failed event's SQL writes gone with their KV writes, and two actors with
// databases of their own.
func TestGuestSQLInHost(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.String(), func(t *testing.T) {
			p := newBoundProbeHost(t, iso, 128<<10)
			ok := func(name string, req *actors.Request, want string) {
				t.Helper()
				p.expectSQL(name, http.StatusOK, req, want)
			}
			ok("a", sqlScript("", "exec CREATE TABLE v(id INTEGER PRIMARY KEY, i INTEGER, f REAL, t TEXT, b BLOB, n)"),
				"changes=0 last=0\n")
			// Every type as a parameter, and back in rows as it went in:
			// an empty text and an empty blob are not NULL.
			ok("a", sqlScript("",
				"exec INSERT INTO v(i, f, t, b, n) VALUES (?, ?, ?, ?, ?)\nint -9223372036854775808\nfloat -1.5\ntext héllo\tworld\nblob 00ff00\nnull",
				"exec INSERT INTO v(i, f, t, b, n) VALUES (?, ?, ?, ?, ?)\nint 9223372036854775807\nfloat 1e300\ntext \nblob \nbool true",
				"exec INSERT INTO v(i, f, t, b, n) VALUES (?, ?, ?, ?, ?)\nbool false\nfloat 0\nnull\nnull\nuint 18446744073709551615",
				"exec INSERT INTO v(i) VALUES (?)\nchan",
				"query SELECT id, i, f, t, b, n, typeof(t), typeof(b) FROM v ORDER BY id"),
				"changes=1 last=1\nchanges=1 last=2\n"+
					"error: guest: SQL argument 5 is not an SQL value (nil, a bool, an integer up to 2^63-1, a float, a string or a []byte)\n"+
					"error: guest: SQL argument 1 is not an SQL value (nil, a bool, an integer up to 2^63-1, a float, a string or a []byte)\n"+
					"id,i,f,t,b,n,typeof(t),typeof(b)\n"+
					`| int 1 | int -9223372036854775808 | float -1.5 | text "héllo\tworld" | blob 00ff00 (3) | null | text "text" | text "blob"`+"\n"+
					`| int 2 | int 9223372036854775807 | float 1e+300 | text "" | blob  (0) | int 1 | text "text" | text "blob"`+"\n")
			// Several statements in one Exec without arguments; parameters
			// numbered and reused; RETURNING through Query, which reports
			// the rows a statement writes.
			ok("a", sqlScript("",
				"exec CREATE TABLE w(x); INSERT INTO w VALUES ('one'), ('two')",
				"query SELECT ?1 || ?1, ?2 * 2\ntext ab\nint 21",
				"query INSERT INTO w VALUES (?) RETURNING rowid, x\ntext three",
				"query SELECT count(*) AS n FROM w"),
				"changes=2 last=2\n"+
					"?1 || ?1,?2 * 2\n| text \"abab\" | int 42\n"+
					"rowid,x\n| int 3 | text \"three\"\n"+
					"n\n| int 3\n")
			// SQL errors reach the guest as errors with SQLite's message,
			// and the event goes on.
			ok("a", sqlScript("",
				"query SELECT nope FROM v",
				"exec SELEC 1",
				"exec INSERT INTO v(id) VALUES (?)\nint 1",
				"exec BEGIN",
				"exec INSERT INTO w VALUES (1); INSERT INTO w VALUES (2)\nint 1",
				"query SELECT 1; SELECT 2",
				"exec INSERT INTO w VALUES (?)\nint 1\nint 2",
				"query SELECT count(*) FROM w"),
				"error: sql \"SELECT nope FROM v\": sqlite3: SQL logic error: no such column: nope\n"+
					"error: sql \"SELEC 1\": sqlite3: SQL logic error: near \"SELEC\": syntax error\n"+
					"error: sql \"INSERT INTO v(id) VALUES (?)\": sqlite3: constraint failed: UNIQUE constraint failed: v.id\n"+
					"error: sql \"BEGIN\": the event is the transaction: BEGIN, COMMIT, ROLLBACK and SAVEPOINT are not allowed: an event's statements commit together or not at all: sqlite3: authorization denied: not authorized\n"+
					"error: sql \"INSERT INTO w VALUES (1); INSERT INTO w VALUES (2)\": more than one statement (only Exec without arguments runs several)\n"+
					"error: sql \"SELECT 1; SELECT 2\": more than one statement (only Exec without arguments runs several)\n"+
					"error: sql \"INSERT INTO w VALUES (?)\": 1 parameters, 2 arguments\n"+
					"count(*)\n| int 3\n")
			// Past the bound: a limit, the statement undone and the event's
			// other writes (a KV put, a row) kept and committed.
			ok("a", sqlScript("put=k",
				"exec INSERT INTO w VALUES (?)\ntext four",
				"exec INSERT INTO w VALUES (zeroblob(200000))",
				"query INSERT INTO w VALUES (zeroblob(200000)) RETURNING rowid",
				"query SELECT count(*) FROM w"),
				"changes=1 last=4\n"+
					"limit: sql \"INSERT INTO w VALUES (zeroblob(200000))\": storage limit: state would be N bytes, over 131072 (sqlite3: database or disk is full)\n"+
					"limit: sql \"INSERT INTO w VALUES (zeroblob(200000)) RETURNING rowid\": storage limit: state would be N bytes, over 131072 (sqlite3: database or disk is full)\n"+
					"count(*)\n| int 4\n")
			p.expect("a", get("/get-many", "keys=k"), "k=sql\n")
			// Rows over the bound of one result: an error, and a write whose
			// RETURNING rows are too many undone.
			const seventeen = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 17) "
			ok("a", sqlScript("",
				"query "+seventeen+"SELECT zeroblob(1048576) FROM c",
				"query "+seventeen+"INSERT INTO w SELECT x FROM c RETURNING zeroblob(1048576)",
				"query "+seventeen+"SELECT zeroblob(1048576 - 100) FROM c WHERE x < 17",
				"query SELECT count(*) FROM w"),
				"error: sql \"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHE\": the rows are over 16777216 bytes\n"+
					"error: sql \"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHE\": the rows are over 16777216 bytes\n"+
					"zeroblob(1048576 - 100)\n"+strings.Repeat("| blob of 1048476 bytes\n", 16)+
					"count(*)\n| int 4\n")

			// A rolled-back event and a failed one: their SQL writes are gone
			// with their KV writes.
			p.expectSQL("a", http.StatusConflict, sqlScript("rollback&put=r", "exec INSERT INTO w VALUES ('rolled back')"), "changes=1 last=5\n")
			if resp := p.deliver("a", sqlScript("fail&put=f", "exec INSERT INTO w VALUES ('failed')")); resp.Status != http.StatusInternalServerError {
				t.Fatalf("failed event = %d %q, want 500", resp.Status, resp.Body)
			}
			// Its handler reported the failure: the guest is kept, no
			// guest failure is counted.
			rows := "x\n| text \"one\"\n| text \"two\"\n| text \"three\"\n| text \"four\"\n"
			ok("a", sqlScript("", "query SELECT x FROM w ORDER BY rowid"), rows)
			p.expect("a", get("/get-many", "keys=k,r,f"), "k=sql\nr absent\nf absent\n")

			// Another actor, on the same shared guest in class: a
			// database of its own.
			ok("b", sqlScript("", "query SELECT count(*) FROM sqlite_schema"), "count(*)\n| int 0\n")
			ok("b", sqlScript("", "exec CREATE TABLE w(x); INSERT INTO w VALUES ('b')", "query SELECT x FROM w"),
				"changes=1 last=1\nx\n| text \"b\"\n")
			ok("a", sqlScript("", "query SELECT x FROM w ORDER BY rowid"), rows)

			// From the bucket, on a new host: the rows the committed events
			// left.
			p.restart()
			ok("a", sqlScript("", "query SELECT x FROM w ORDER BY rowid", "query SELECT id, t FROM v ORDER BY id"),
				rows+"id,t\n| int 1 | text \"héllo\\tworld\"\n| int 2 | text \"\"\n")
			ok("b", sqlScript("", "query SELECT x FROM w"), "x\n| text \"b\"\n")
			// DeleteAll takes the database with the rest.
			p.expect("b", get("/delete-all", ""), "")
			ok("b", sqlScript("", "query SELECT count(*) FROM sqlite_schema"), "count(*)\n| int 0\n")
		})
	}
}

// statement encodes a statement as sql_exec_len takes it; args are
// already encoded values.
func statement(query string, flags uint32, count uint32, args ...[]byte) []byte {
	b := wire.AppendString(nil, query)
	b = wire.AppendU32(b, count)
	for _, a := range args {
		b = append(b, a...)
	}
	return wire.AppendU32(b, flags)
}

func TestDecodeStatement(t *testing.T) {
	i := wire.AppendU64([]byte{wire.SQLInteger}, uint64(math.MaxUint64)) // -1
	f := wire.AppendU64([]byte{wire.SQLFloat}, math.Float64bits(2.5))
	txt := wire.AppendString([]byte{wire.SQLText}, "t")
	blob := wire.AppendString([]byte{wire.SQLBlob}, "")
	null := []byte{wire.SQLNull}
	s, ok := decodeStatement(statement("SELECT ?, ?, ?, ?, ?", wire.SQLFlagExec, 5, i, f, txt, blob, null))
	if !ok || s.query != "SELECT ?, ?, ?, ?, ?" || !s.exec || len(s.args) != 5 ||
		s.args[0] != int64(-1) || s.args[1] != 2.5 || s.args[2] != "t" || s.args[4] != nil {
		t.Fatalf("decodeStatement = %#v, %v", s, ok)
	}
	if b, isBlob := s.args[3].([]byte); !isBlob || b == nil || len(b) != 0 {
		t.Fatalf("empty blob decoded as %#v, want a non-nil []byte", s.args[3])
	}
	if s, ok := decodeStatement(statement("", 0, 0)); !ok || s.exec || len(s.args) != 0 {
		t.Fatalf("no arguments = %#v, %v", s, ok)
	}
	good := statement("q", 0, 1, i)
	for name, b := range map[string][]byte{
		"empty":          nil,
		"truncated":      good[:len(good)-1],
		"left over":      append(good[:len(good):len(good)], 0),
		"count too high": statement("q", 0, 2, i),
		"count too low":  statement("q", 0, 0, i),
		"huge count":     statement("q", 0, 1<<31),
		"unknown type":   statement("q", 0, 1, []byte{5}),
		"short integer":  statement("q", 0, 1, i[:5]),
		"unknown flag":   statement("q", 2, 0),
	} {
		if s, ok := decodeStatement(b); ok {
			t.Errorf("%s: decodeStatement = %#v, true", name, s)
		}
	}
}

func TestEncodeSQLResult(t *testing.T) {
	rows := &actors.SQLRows{Columns: []string{"a", "b"}, Rows: [][]any{{int64(-2), 0.5}, {"x", []byte{7}}, {nil, []byte{}}}}
	b := encodeSQLResult(actors.SQLResult{RowsAffected: 3, LastInsertID: 9}, rows)
	var want []byte
	want = append(want, wire.SQLDone)
	want = wire.AppendU64(want, 3)
	want = wire.AppendU64(want, 9)
	want = wire.AppendU32(want, 2)
	want = wire.AppendString(wire.AppendString(want, "a"), "b")
	want = wire.AppendU32(want, 3)
	want = wire.AppendU64(append(want, wire.SQLInteger), uint64(math.MaxUint64-1))
	want = wire.AppendU64(append(want, wire.SQLFloat), math.Float64bits(0.5))
	want = wire.AppendString(append(want, wire.SQLText), "x")
	want = wire.AppendString(append(want, wire.SQLBlob), "\x07")
	want = append(want, wire.SQLNull)
	want = wire.AppendString(append(want, wire.SQLBlob), "")
	if !bytes.Equal(b, want) || cap(b) != len(b) {
		t.Fatalf("encodeSQLResult =\n%v (cap %d), want\n%v", b, cap(b), want)
	}
	// An Exec's: no columns, no rows.
	b = encodeSQLResult(actors.SQLResult{RowsAffected: 1}, nil)
	if want := append(wire.AppendU64(wire.AppendU64([]byte{wire.SQLDone}, 1), 0), 0, 0, 0, 0, 0, 0, 0, 0); !bytes.Equal(b, want) {
		t.Fatalf("encodeSQLResult of an Exec = %v, want %v", b, want)
	}
}

// TestRawSQL hands sql_exec_len encodings the SDK never makes, on events
// that are not an actor's (so they have no database): a good one is
// answered with an error and its message, not a trap; a malformed one
// breaks the ABI, which fails the event and discards the guest.
func TestRawSQL(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{}
	raw := func(b []byte) (*actors.Response, error) {
		return g.Handle(context.Background(), &actors.Request{Method: http.MethodPost, Path: "/raw-sql", Header: http.Header{}, Body: b}, st)
	}
	resp, err := raw(statement("SELECT 1", 0, 0))
	if want := wire.AppendString([]byte{wire.SQLError}, actors.ErrNoSQL.Error()); err != nil || !bytes.Equal(resp.Body, want) {
		t.Fatalf("a statement outside an actor's event = %v %v, want %q", resp, err, want)
	}
	for name, b := range map[string][]byte{
		"truncated":    statement("SELECT 1", 0, 0)[:6],
		"unknown type": statement("SELECT ?", 0, 1, []byte{9}),
		"unknown flag": statement("SELECT 1", 4, 0),
	} {
		body(t, g, "/events")
		if _, err := raw(b); !errors.Is(err, ErrGuest) {
			t.Fatalf("%s: err = %v, want ErrGuest", name, err)
		}
		if got := body(t, g, "/events"); got != "1" {
			t.Fatalf("%s: event after it = %q, want 1 (a fresh guest)", name, got)
		}
	}
}
