package e2e

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/damagetest"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/internal/testlog"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// fetch GETs url and returns the status and the body.
func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// damagedCount returns wasmkeep_bucket_damaged_total{what} as the node's
// /metrics says it.
func damagedCount(t *testing.T, n *nodetest.Node, what string) string {
	t.Helper()
	_, body := fetch(t, n.URL+"/metrics")
	prefix := `wasmkeep_bucket_damaged_total{what="` + what + `"} `
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	return "absent"
}

// startLogged starts a node on dir whose actors idle after a moment, with
// its log lines kept.
func startLogged(t *testing.T, dir string) (*nodetest.Node, *testlog.Log) {
	logs := &testlog.Log{}
	n := nodetest.Start(t, nodetest.Options{Dir: dir, IdleTimeout: 200 * time.Millisecond,
		Configure: func(c *node.Config) { c.Logger = slog.New(logs) }})
	return n, logs
}

// TestDamagedStateOverHTTP: the state object of a counter that hibernated
// is replaced by one whose payload does not decode. Its requests are
// answered 500, naming the key (not a 503 to retry); the node logs the
// damage at Error once and counts each request that met it in
// wasmkeep_bucket_damaged_total{what="state"}; another counter is served as
// before.
func TestDamagedStateOverHTTP(t *testing.T) {
	dir := t.TempDir()
	n, logs := startLogged(t, dir)
	if status, body := fetch(t, n.URL+"/actor/counter/a"); status != http.StatusOK || body != "1\n" {
		t.Fatalf("first count: %d %q", status, body)
	}
	n.AwaitIdle(t, "counter/a")

	// Another Store on the directory, as a person or a bug would write.
	s, err := dirstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := ownership.StateKey(ownership.Actor{Class: "counter", Name: "a"})
	obj, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := ownership.DecodeState(obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	h.Seq++
	garbled := ownership.EncodeState(h, []byte{0x7f, 'c', 'o'}) // a key of 127 bytes, cut after two
	if _, err := s.Put(t.Context(), key, garbled, ownership.IfMatch(obj.ETag)); err != nil {
		t.Fatal(err)
	}

	for i := range 2 {
		status, body := fetch(t, n.URL+"/actor/counter/a")
		if status != http.StatusInternalServerError || !strings.Contains(body, "damaged") || !strings.Contains(body, key) {
			t.Fatalf("request %d to the damaged counter: %d %q, want 500 naming %s", i, status, body, key)
		}
	}
	if status, body := fetch(t, n.URL+"/actor/counter/b"); status != http.StatusOK || body != "1\n" {
		t.Fatalf("another counter: %d %q, want it served", status, body)
	}
	if got := logs.Count("ERROR", "damaged actor state", "key="+key); got != 1 {
		t.Fatalf("%d error lines about %s, want one:\n%s", got, key, logs)
	}
	if got := damagedCount(t, n, "state"); got != "2" {
		t.Fatalf(`wasmkeep_bucket_damaged_total{what="state"} = %s, want 2`, got)
	}
}

// TestFlippedByteOverHTTP: a byte of a hibernated counter's state flips in
// the directory store's segment while the node runs. The acquisition's
// seal finds it first, so the request is refused before the actor is
// resident: a 500 naming the damaged key (no retry helps); the node logs it
// once at Error, counts it, and serves another counter as before.
func TestFlippedByteOverHTTP(t *testing.T) {
	dir := t.TempDir()
	n, logs := startLogged(t, dir)
	if status, body := fetch(t, n.URL+"/actor/counter/c"); status != http.StatusOK || body != "1\n" {
		t.Fatalf("first count: %d %q", status, body)
	}
	n.AwaitIdle(t, "counter/c")
	key := ownership.StateKey(ownership.Actor{Class: "counter", Name: "c"})
	damagetest.FlipAfterKey(t, dir, key)

	for i := range 2 {
		status, body := fetch(t, n.URL+"/actor/counter/c")
		if status != http.StatusInternalServerError || !strings.Contains(body, "damaged") || !strings.Contains(body, key) {
			t.Fatalf("request %d to the damaged counter: %d %q, want a 500 naming %s as damaged", i, status, body, key)
		}
	}
	if status, body := fetch(t, n.URL+"/actor/counter/d"); status != http.StatusOK || body != "1\n" {
		t.Fatalf("another counter: %d %q, want it served", status, body)
	}
	if got := logs.Count("ERROR", "damaged actor state", "key="+key, "checksum"); got != 1 {
		t.Fatalf("%d error lines about %s, want one:\n%s", got, key, logs)
	}
	if got := damagedCount(t, n, "state"); got != "2" {
		t.Fatalf(`wasmkeep_bucket_damaged_total{what="state"} = %s, want 2`, got)
	}
}
