package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/s3test"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// notebook is a class with both kinds of storage: POST /?k=K&v=V puts V
// under K and adds V as a note to its SQL table; GET / answers its keys
// and values, then its notes.
var notebook = actors.ClassFunc(func(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	db := actors.SQL(ctx)
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL)"); err != nil {
		return nil, err
	}
	if req.Method == http.MethodPost {
		if err := st.Put(req.Query.Get("k"), []byte(req.Query.Get("v"))); err != nil {
			return nil, err
		}
		if _, err := db.Exec("INSERT INTO notes(body) VALUES (?)", req.Query.Get("v")); err != nil {
			return nil, err
		}
	}
	var b strings.Builder
	es, err := st.List(actors.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		fmt.Fprintf(&b, "%s=%q\n", e.Key, e.Value)
	}
	rows, err := db.Query("SELECT id, body FROM notes ORDER BY id")
	if err != nil {
		return nil, err
	}
	for _, r := range rows.Rows {
		fmt.Fprintf(&b, "note %v %q\n", r[0], r[1])
	}
	return actors.Text(http.StatusOK, b.String()), nil
})

// call sends one request to a serving node and returns its status, body
// and whether it was replayed from an event key.
func (s *serving) call(t *testing.T, method, path, key string) (int, string, bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+s.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(actorhost.IdempotencyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header.Get(actorhost.ReplayedHeader) == "true"
}

// hasRowLike reports whether a line of out begins with the word first and
// holds the words of rest after it, however spaced.
func hasRowLike(out, first, rest string) bool {
	for _, l := range strings.Split(out, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		if strings.HasPrefix(l, first+" ") && strings.Contains(l+" ", " "+rest+" ") {
			return true
		}
	}
	return false
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runTest(t, args...)
	if code != exitOK {
		t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// An actor with keys, an SQL table and a remembered event key, served by
// a real node: import into it is refused while the node holds it; once the
// node has stopped, its export imported into another actor is served by a
// node with the same keys, the same rows, and the same event key, and the
// commands read it all without a node.
func TestActorsExportImport(t *testing.T) {
	bucket := t.TempDir()
	opts := []Option{WithClass("notebook", notebook)}
	args := []string{"--listen", "127.0.0.1:0", "--bucket", bucket, "--node", "n1", "--classes", "", "--cache-dir", "", "--idle-timeout", "1m"}
	s := startServeWith(t, opts, args...)
	s.call(t, "POST", "/actor/notebook/a?k=title&v=Minutes", "")
	s.call(t, "POST", "/actor/notebook/a?k=bin&v=%00%01%FF", "")
	_, first, _ := s.call(t, "POST", "/actor/notebook/a?k=who&v=Ada+and+Bob", "key-1")
	want := "bin=\"\\x00\\x01\\xff\"\ntitle=\"Minutes\"\nwho=\"Ada and Bob\"\n" +
		"note 1 \"Minutes\"\nnote 2 \"\\x00\\x01\\xff\"\nnote 3 \"Ada and Bob\"\n"
	if first != want {
		t.Fatalf("the notebook holds\n%s\nwant\n%s", first, want)
	}
	dir := t.TempDir()
	export := filepath.Join(dir, "a.export")

	// While n1 holds it: reads work, an import is refused, naming n1.
	mustRun(t, "actors", "export", "notebook/a", "--bucket", bucket, "--output", export)
	code, _, errOut := runTest(t, "actors", "import", "notebook/a", export, "--bucket", bucket)
	if code != exitProblem || !strings.Contains(errOut, "node n1") || !strings.Contains(errOut, "holds it") ||
		!strings.Contains(errOut, "cluster drain n1") {
		t.Fatalf("import into a held actor: exit %d, %s", code, errOut)
	}
	out := mustRun(t, "actors", "list", "notebook", "--bucket", bucket)
	if !hasRowLike(out, "a", "held n1 1") {
		t.Fatalf("list while held:\n%s", out)
	}
	s.stop(t)

	out = mustRun(t, "actors", "list", "notebook", "--bucket", bucket, "--writes")
	if !hasRowLike(out, "a", "free (n1) 1 1") {
		t.Fatalf("list once stopped:\n%s", out)
	}
	mustRun(t, "actors", "export", "notebook/a", "--bucket", bucket, "--output", export)
	out = mustRun(t, "actors", "import", "notebook/b", export, "--bucket", bucket)
	if !strings.Contains(out, "imported "+export+" into notebook/b: ") ||
		!strings.Contains(out, "no node has held notebook/b: its record is free (the import wrote it, naming wasmkeep-import, no node)") {
		t.Fatalf("import: %s", out)
	}

	// Read without a node.
	out = mustRun(t, "actors", "get", "notebook/b", "--bucket", bucket)
	for _, line := range []string{"bin 3 0x0001ff", "title 7 Minutes", "who 11 Ada and Bob"} {
		if !hasRow(strings.Split(out, "\n"), line) {
			t.Errorf("get: no row %q in\n%s", line, out)
		}
	}
	if strings.Contains(out, "sql") {
		t.Errorf("get shows node keys without --all:\n%s", out)
	}
	if out := mustRun(t, "actors", "get", "notebook/b", "--all", "--bucket", bucket); !strings.Contains(out, `"\x00sql/`) {
		t.Errorf("get --all shows no SQL page:\n%s", out)
	}
	if out := mustRun(t, "actors", "get", "notebook/b", "title", "--bucket", bucket); out != "Minutes\n" {
		t.Errorf("get title: %q", out)
	}
	if out := mustRun(t, "actors", "get", "notebook/b", "bin", "--raw", "--bucket", bucket); out != "\x00\x01\xff" {
		t.Errorf("get bin --raw: %q", out)
	}
	var got struct {
		Entries []map[string]string `json:"entries"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "actors", "get", "notebook/b", "--prefix", "b", "--json", "--bucket", bucket)), &got); err != nil ||
		len(got.Entries) != 1 || got.Entries[0]["key"] != "bin" || got.Entries[0]["value_base64"] != "AAH/" {
		t.Errorf("get --json: %+v, %v", got, err)
	}
	out = mustRun(t, "actors", "sql", "notebook/b", "SELECT id, body FROM notes WHERE id <> 2 ORDER BY id", "--tsv", "--bucket", bucket)
	if out != "id\tbody\n1\tMinutes\n3\tAda and Bob\n" {
		t.Errorf("sql --tsv: %q", out)
	}
	code, _, errOut = runTest(t, "actors", "sql", "notebook/b", "UPDATE notes SET body = ''", "--bucket", bucket)
	if code != exitProblem || !strings.Contains(errOut, "it would write the database") {
		t.Errorf("sql write: exit %d, %s", code, errOut)
	}

	// A node serves the copy: keys, rows, and the event key it remembers.
	s = startServeWith(t, opts, args...)
	if _, body, _ := s.call(t, "GET", "/actor/notebook/b", ""); body != want {
		t.Errorf("the copy holds\n%s\nwant\n%s", body, want)
	}
	status, body, replayed := s.call(t, "POST", "/actor/notebook/b?k=who&v=Ada+and+Bob", "key-1")
	if status != http.StatusOK || !replayed || body != first {
		t.Errorf("the event key in the copy: %d replayed=%v\n%s", status, replayed, body)
	}
	if _, body, _ := s.call(t, "POST", "/actor/notebook/b?k=more&v=x", ""); !strings.Contains(body, "note 4 \"x\"") {
		t.Errorf("the copy goes on: %s", body)
	}
	s.stop(t)
}

// Bad command lines exit 2; an actor or a class the bucket does not
// have, a bucket that is not there, a damaged state object and a file that
// is not an export exit 1, saying so.
func TestActorsErrors(t *testing.T) {
	srv := s3test.Start(t)
	for k, v := range srv.Env() {
		t.Setenv(k, v)
	}
	bucket := t.TempDir()
	b, err := dirstore.Open(bucket)
	if err != nil {
		t.Fatal(err)
	}
	damaged := ownership.Actor{Class: "kv", Name: "bad"}
	if _, err := b.Put(t.Context(), ownership.StateKey(damaged), []byte("wk1 state 1 1\n\x00wk2\xff"), ownership.Always()); err != nil {
		t.Fatal(err)
	}
	b.Close()
	notExport := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(notExport, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"actors", "get"}, exitUsage, "want CLASS/NAME"},
		{[]string{"actors", "get", "kv"}, exitUsage, `want CLASS/NAME, got "kv"`},
		{[]string{"actors", "get", "kv/a", "k", "--prefix", "p"}, exitUsage, "not both"},
		{[]string{"actors", "get", "kv/a", "\x00sql-stamp"}, exitUsage, "add --all"},
		{[]string{"actors", "sql", "kv/a"}, exitUsage, "quote the query"},
		{[]string{"actors", "list"}, exitUsage, "want one CLASS"},
		{[]string{"actors", "import", "kv/a"}, exitUsage, "want CLASS/NAME and FILE"},
		{[]string{"actors", "get", "kv/nobody", "--bucket", bucket}, exitProblem, "no actor kv/nobody in the bucket"},
		{[]string{"actors", "list", "nope", "--bucket", bucket}, exitProblem, "no actor of class nope in the bucket"},
		{[]string{"actors", "list", "kv", "--bucket", filepath.Join(bucket, "typo")}, exitProblem, "no bucket at"},
		{[]string{"actors", "get", "kv/bad", "--bucket", bucket}, exitProblem, "state damaged in the bucket at actors/kv/bad/state"},
		{[]string{"actors", "export", "kv/bad", "--bucket", bucket}, exitProblem, "state damaged"},
		{[]string{"actors", "import", "kv/a", notExport, "--bucket", bucket}, exitProblem, "not a valid actor export"},
		{[]string{"actors", "import", "kv/bad", notExport, "--bucket", bucket}, exitProblem, "not a valid actor export"},
		{[]string{"actors", "list", "kv", "--bucket", srv.URL("actors")}, exitProblem, "no actor of class kv in the bucket"},
		{[]string{"actors", "get", "kv/a", "--bucket", srv.URL("actors")}, exitProblem, "no actor kv/a in the bucket"},
	} {
		code, _, errOut := runTest(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.stderr)
		}
	}
}

// Each actors command documents itself and its flags.
func TestActorsHelp(t *testing.T) {
	for sub, want := range map[string]string{
		"list": "-writes", "get": "-all", "sql": "-tsv", "export": "-output", "import": "-replace-damaged",
	} {
		code, out, _ := runTest(t, "actors", sub, "--help")
		if code != exitOK || !strings.Contains(out, "wasmkeep actors "+sub) || !strings.Contains(out, "-bucket") || !strings.Contains(out, want) {
			t.Errorf("actors %s --help: exit %d\n%s", sub, code, out)
		}
	}
}
