package wasmhost_test

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
	"github.com/wasmkeep/wasmkeep/wasmhost"
)

// cSQLProbe drives the C SDK's SQL: wk_sql_exec with arguments of every
// type, wk_sql_query and its cursor, errors and the limit, a rollback, and
// RETURNING. /rows also tells the KV key k, to see it commit with the SQL.
const cSQLProbe = `#include "wasmkeep.h"

#include <stdio.h>

WK_ISOLATION(WK_ISOLATION_CLASS)

static void value(wk_buf *out, const wk_sql_value *v) {
	char f[32];
	switch (v->type) {
	case WK_SQL_NULL:
		wk_buf_write_cstr(out, "null");
		break;
	case WK_SQL_INTEGER:
		wk_buf_write_cstr(out, "int ");
		wk_buf_write_int(out, v->i);
		break;
	case WK_SQL_FLOAT:
		snprintf(f, sizeof f, "float %g", v->f);
		wk_buf_write_cstr(out, f);
		break;
	case WK_SQL_TEXT:
		wk_buf_write_cstr(out, "text '");
		wk_buf_write_str(out, v->s);
		wk_buf_write_byte(out, '\'');
		break;
	case WK_SQL_BLOB:
		wk_buf_write_cstr(out, "blob x'");
		for (size_t i = 0; i < v->s.len; i++) {
			snprintf(f, sizeof f, "%02x", (unsigned char)v->s.ptr[i]);
			wk_buf_write_cstr(out, f);
		}
		wk_buf_write_byte(out, '\'');
		break;
	}
}

static void report(wk_buf *out, int code, const wk_sql_result *res) {
	if (code == WK_SQL_OK) {
		wk_buf_write_cstr(out, "changes=");
		wk_buf_write_int(out, res->changes);
		wk_buf_write_cstr(out, " last=");
		wk_buf_write_int(out, res->last_id);
	} else {
		wk_buf_write_cstr(out, code == WK_SQL_LIMIT ? "limit: " : "error: ");
		wk_buf_write_str(out, res->error);
	}
	wk_buf_write_byte(out, '\n');
}

static void query(wk_buf *out, const char *q, const wk_sql_value *args, size_t n) {
	wk_sql_result res;
	int code = wk_sql_query(wk_cstr(q), args, n, &res);
	if (code != WK_SQL_OK) {
		report(out, code, &res);
		return;
	}
	for (size_t i = 0; i < res.n_columns; i++) {
		if (i > 0)
			wk_buf_write_byte(out, ',');
		wk_buf_write_str(out, res.columns[i]);
	}
	wk_buf_write_cstr(out, " (");
	wk_buf_write_int(out, (int64_t)res.n_rows);
	wk_buf_write_cstr(out, " rows)\n");
	for (const wk_sql_value *row; (row = wk_sql_next(&res)) != NULL;) {
		for (size_t i = 0; i < res.n_columns; i++) {
			wk_buf_write_cstr(out, "| ");
			value(out, &row[i]);
			wk_buf_write_byte(out, ' ');
		}
		wk_buf_write_cstr(out, "|\n");
	}
}

static void exec(wk_buf *out, const char *q, const wk_sql_value *args, size_t n) {
	wk_sql_result res;
	report(out, wk_sql_exec(wk_cstr(q), args, n, &res), &res);
}

static wk_response *serve(const wk_request *req) {
	wk_buf out = {0};
	if (wk_str_eq(req->path, WK_STR("/setup"))) {
		exec(&out, "CREATE TABLE v(id INTEGER PRIMARY KEY, i, f, t, b, n)", NULL, 0);
		wk_sql_value one[] = {wk_sql_int(INT64_MIN), wk_sql_float(-1.5), wk_sql_text(WK_STR("h\xc3\xa9llo")),
		                      wk_sql_blob((wk_str){"\x00\xff", 2}), wk_sql_null()};
		exec(&out, "INSERT INTO v(i, f, t, b, n) VALUES (?, ?, ?, ?, ?)", one, 5);
		wk_sql_value two[] = {wk_sql_int(INT64_MAX), wk_sql_float(0.25), wk_sql_text(WK_STR("")), wk_sql_blob(WK_STR("")),
		                      wk_sql_int(7)};
		exec(&out, "INSERT INTO v(i, f, t, b, n) VALUES (?1, ?2, ?3, ?4, ?5)", two, 5);
		/* Several statements without arguments, and no result asked. */
		if (wk_sql_exec(WK_STR("CREATE TABLE w(x); INSERT INTO w VALUES (1)"), NULL, 0, NULL) == WK_SQL_OK)
			wk_buf_write_cstr(&out, "w made\n");
	} else if (wk_str_eq(req->path, WK_STR("/rows"))) {
		query(&out, "SELECT id, i, f, t, b, n, typeof(t), typeof(b) FROM v ORDER BY id", NULL, 0);
		wk_str k;
		wk_buf_write_cstr(&out, wk_storage_get(WK_STR("k"), &k) ? "k kept\n" : "k absent\n");
	} else if (wk_str_eq(req->path, WK_STR("/errors"))) {
		query(&out, "SELECT nope FROM v", NULL, 0);
		wk_sql_value id = wk_sql_int(1);
		exec(&out, "INSERT INTO v(id) VALUES (?)", &id, 1);
		exec(&out, "BEGIN", NULL, 0);
		query(&out, "SELECT count(*) FROM v", NULL, 0);
	} else if (wk_str_eq(req->path, WK_STR("/limit"))) {
		wk_storage_put(WK_STR("k"), WK_STR("v"));
		exec(&out, "INSERT INTO v(t) VALUES ('kept')", NULL, 0);
		exec(&out, "INSERT INTO v(b) VALUES (zeroblob(100000))", NULL, 0);
	} else if (wk_str_eq(req->path, WK_STR("/rollback"))) {
		exec(&out, "INSERT INTO v(t) VALUES ('rolled back')", NULL, 0);
		wk_response *resp = wk_rollback(wk_text(409, wk_buf_str(&out)));
		return resp;
	} else if (wk_str_eq(req->path, WK_STR("/returning"))) {
		wk_sql_value t = wk_sql_text(WK_STR("returned"));
		query(&out, "INSERT INTO v(t) VALUES (?) RETURNING id, t", &t, 1);
	} else {
		return wk_text(404, WK_STR("no such probe\n"));
	}
	return wk_text(200, wk_buf_str(&out));
}

WK_HANDLE_REQUEST(serve)
`

// TestCGuestSQL runs the C SDK's SQL on an actorhost.Host whose actors' state
// is bounded at 64 KiB, two actors on one shared guest: values of
// every type in and out, errors with SQLite's message, the bound as
// WK_SQL_LIMIT with the event's other writes kept, a rollback's row gone,
// and the rows from the bucket on a new host.
func TestCGuestSQL(t *testing.T) {
	clang := cClang(t)
	dir := filepath.Join(t.TempDir(), "sqlprobe")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sqlprobe.c"), []byte(cSQLProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	wasm := buildC(t, clang, dir)
	bucket := memstore.New(memstore.Faults{})
	var h *actorhost.Host
	var m *wasmhost.Module
	start := func() {
		t.Helper()
		r, err := wasmhost.NewRuntime(t.Context(), wasmhost.Config{Logger: slog.New(slog.DiscardHandler), SharedGuests: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(t.Context()) })
		m = wasmhost.MustCompile(t, r, "c-sql", wasm)
		reg := actors.NewRegistry()
		if err := reg.Register("c-sql", m); err != nil {
			t.Fatal(err)
		}
		h, err = actorhost.New(actorhost.Config{Keeper: grantAll{}, Bucket: bucket, Registry: reg, System: keeper.NewSystem(nil), MaxState: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
	}
	sizes := regexp.MustCompile(`state would be \d+ bytes`)
	expect := func(name, path string, status int, want string) {
		t.Helper()
		resp, err := h.Deliver(t.Context(), ownership.Actor{Class: "c-sql", Name: name}, 1, cGet(path, ""))
		if err != nil {
			t.Fatal(err)
		}
		if got := sizes.ReplaceAllString(string(resp.Body), "state would be N bytes"); resp.Status != status || got != want {
			t.Fatalf("%s %s = %d:\n%s\nwant %d:\n%s", name, path, resp.Status, got, status, want)
		}
	}
	start()
	expect("a", "/setup", http.StatusOK, "changes=0 last=0\nchanges=1 last=1\nchanges=1 last=2\nw made\n")
	rows := "id,i,f,t,b,n,typeof(t),typeof(b) (2 rows)\n" +
		"| int 1 | int -9223372036854775808 | float -1.5 | text 'héllo' | blob x'00ff' | null | text 'text' | text 'blob' |\n" +
		"| int 2 | int 9223372036854775807 | float 0.25 | text '' | blob x'' | int 7 | text 'text' | text 'blob' |\n"
	expect("a", "/rows", http.StatusOK, rows+"k absent\n")
	// b, on the same shared guest: a database of its own.
	expect("b", "/rows", http.StatusOK, "error: sql \"SELECT id, i, f, t, b, n, typeof(t), typeof(b) FROM v ORDER BY i\": "+
		"sqlite3: SQL logic error: no such table: v\nk absent\n")
	expect("a", "/errors", http.StatusOK,
		"error: sql \"SELECT nope FROM v\": sqlite3: SQL logic error: no such column: nope\n"+
			"error: sql \"INSERT INTO v(id) VALUES (?)\": sqlite3: constraint failed: UNIQUE constraint failed: v.id\n"+
			"error: sql \"BEGIN\": the event is the transaction: BEGIN, COMMIT, ROLLBACK and SAVEPOINT are not allowed: an event's statements commit together or not at all: sqlite3: authorization denied: not authorized\n"+
			"count(*) (1 rows)\n| int 2 |\n")
	expect("a", "/limit", http.StatusOK, "changes=1 last=3\n"+
		"limit: sql \"INSERT INTO v(b) VALUES (zeroblob(100000))\": storage limit: state would be N bytes, over 65536 (sqlite3: database or disk is full)\n")
	expect("a", "/rollback", http.StatusConflict, "changes=1 last=4\n")
	rows = "id,i,f,t,b,n,typeof(t),typeof(b) (3 rows)\n" + rows[len("id,i,f,t,b,n,typeof(t),typeof(b) (2 rows)\n"):] +
		"| int 3 | null | null | text 'kept' | null | null | text 'text' | text 'null' |\n"
	expect("a", "/rows", http.StatusOK, rows+"k kept\n")

	// A new host and runtime on the bucket: the committed rows.
	if err := h.HibernateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.Failures != 0 || st.Shared != 1 {
		t.Fatalf("stats %+v, want no failure and one shared guest", st)
	}
	start()
	defer func() { _ = h.HibernateAll(t.Context()) }()
	expect("a", "/rows", http.StatusOK, rows+"k kept\n")
	expect("a", "/returning", http.StatusOK, "id,t (1 rows)\n| int 4 | text 'returned' |\n")
}
