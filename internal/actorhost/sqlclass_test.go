package actorhost_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
)

// sqlSend sends method path (under /actor/sql/) with body to node n.
func sqlSend(t *testing.T, n *nodetest.Node, method, path, body string) kvAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, n.URL+"/actor/sql/"+path, strings.NewReader(body))
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, "text/plain; charset=utf-8", res.Header.Get("Content-Type"), path)
	return kvAnswer{res.StatusCode, res.Header, string(b)}
}

// sqlDo posts body to path (under /actor/sql/) on node n.
func sqlDo(t *testing.T, n *nodetest.Node, path, body string) kvAnswer {
	t.Helper()
	return sqlSend(t, n, "POST", path, body)
}

// The sql class runs statements and queries over HTTP, with text
// arguments, and answers rows as tab-separated lines.
func TestSQLConsole(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	sqlDo(t, n, "db/exec", "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT, born INTEGER, photo BLOB)").
		expect(t, http.StatusOK, "rows changed: 0\nlast insert id: 0\n")
	sqlDo(t, n, "db/exec?arg=Ada%20Lovelace&arg=1815", "INSERT INTO users(name, born) VALUES (?, ?)").
		expect(t, http.StatusOK, "rows changed: 1\nlast insert id: 1\n")
	sqlDo(t, n, "db/exec", "INSERT INTO users(name, born, photo) VALUES ('Alan Turing', 1912, x'cafe'); INSERT INTO users(name) VALUES ('Anon')").
		expect(t, http.StatusOK, "rows changed: 2\nlast insert id: 3\n")
	sqlDo(t, n, "db/query?arg=1900", "SELECT id, name, born, photo, born / 4.0 AS q FROM users WHERE born < ? OR born IS NULL ORDER BY id").
		expect(t, http.StatusOK, "id\tname\tborn\tphoto\tq\n1\tAda Lovelace\t1815\tNULL\t453.75\n3\tAnon\tNULL\tNULL\tNULL\n")
	sqlDo(t, n, "other/query", "SELECT name FROM sqlite_schema").expect(t, http.StatusOK, "name\n") // another actor, another database

	// A request is all or nothing: the insert before the failed one is
	// not kept.
	a := sqlDo(t, n, "db/exec", "INSERT INTO users(name) VALUES ('kept?'); INSERT INTO nowhere VALUES (1)")
	assert.Equal(t, http.StatusBadRequest, a.status)
	assert.Contains(t, a.body, "no such table: nowhere")
	a = sqlDo(t, n, "db/query", "SELEC 1")
	assert.Equal(t, http.StatusBadRequest, a.status)
	assert.Contains(t, a.body, `near "SELEC": syntax error`)
	a = sqlDo(t, n, "db/exec", "BEGIN")
	assert.Equal(t, http.StatusBadRequest, a.status)
	assert.Contains(t, a.body, "the event is the transaction")

	sqlDo(t, n, "db/exec?dry-run", "DELETE FROM users").expect(t, http.StatusOK, "rows changed: 3\nlast insert id: 0\n")
	sqlDo(t, n, "db/query", "SELECT count(*) AS n FROM users").expect(t, http.StatusOK, "n\n3\n")

	a = sqlSend(t, n, "GET", "db/query", "")
	a.expect(t, http.StatusMethodNotAllowed, "sql: only POST here\n")
	assert.Equal(t, "POST", a.header.Get("Allow"))
	sqlDo(t, n, "db/", "SELECT 1").expect(t, http.StatusNotFound, "sql: POST /exec or /query, the SQL in the body\n")
}

// Past the actor's bound (1 MiB here) a statement gets 413 with the
// limit's message, and the rows before it stay; what the sql class stores
// is in the bucket, for another node.
func TestSQLConsoleBoundAndPersistence(t *testing.T) {
	dir := t.TempDir()
	mib := func(c *node.Config) { c.Actors.MaxState = 1 << 20 }
	n := nodetest.Start(t, nodetest.Options{Dir: dir, Configure: mib})
	sqlDo(t, n, "db/exec", "CREATE TABLE b(v BLOB); INSERT INTO b VALUES (zeroblob(500000))").
		expect(t, http.StatusOK, "rows changed: 1\nlast insert id: 1\n")
	a := sqlDo(t, n, "db/exec", "INSERT INTO b VALUES (zeroblob(600000))")
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status)
	assert.True(t, strings.HasPrefix(a.body, `sql "INSERT INTO b VALUES (zeroblob(600000))": storage limit: state would be `), a.body)
	assert.True(t, strings.HasSuffix(a.body, "over 1048576 (sqlite3: database or disk is full)\n"), a.body)
	sqlDo(t, n, "db/query", "SELECT count(*) AS n, sum(length(v)) AS bytes FROM b").expect(t, http.StatusOK, "n\tbytes\n1\t500000\n")
	require.NoError(t, n.Stop(context.Background()))

	n2 := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "n2", Instance: "i2", Configure: mib})
	sqlDo(t, n2, "db/query", "SELECT count(*) AS n FROM b").expect(t, http.StatusOK, "n\n1\n")
}
