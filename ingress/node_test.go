package ingress_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/peer"
)

// testNode is a node serving on 127.0.0.1 over a directory bucket.
type testNode struct {
	*node.Node
	url string
}

func startTestNode(t *testing.T, dir, name, instance string) *testNode {
	t.Helper()
	return startTestNodeWith(t, nodetest.Options{Dir: dir, Node: name, Instance: instance})
}

// startTestNodeWith starts a node as o says.
func startTestNodeWith(t *testing.T, o nodetest.Options) *testNode {
	t.Helper()
	n := nodetest.Start(t, o)
	return &testNode{Node: n.Node, url: n.URL}
}

// stop stops the node cleanly; a second call does nothing.
func (n *testNode) stop(t *testing.T) {
	t.Helper()
	select {
	case <-n.Done():
		return
	default:
	}
	if err := n.Stop(context.Background()); err != nil {
		t.Errorf("stop: %v", err)
	}
}

func (n *testNode) get(t *testing.T, path string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, n.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(body))
}

func (n *testNode) mustGet(t *testing.T, path, want string) {
	t.Helper()
	if status, body := n.get(t, path, nil); status != http.StatusOK || body != want {
		t.Fatalf("GET %s: %d %q, want 200 %q", path, status, body, want)
	}
}

// readRecord reads an actor's ownership record from the directory bucket.
func readRecord(t *testing.T, dir string, a ownership.Actor) ownership.Record {
	t.Helper()
	b, err := dirstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	obj, err := b.Get(t.Context(), ownership.OwnerKey(a))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ownership.DecodeRecord(obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var counterA = ownership.Actor{Class: "counter", Name: "a"}

// TestCounterSurvivesRestart: the counter counts over HTTP, and goes on
// counting on a new node started on the same directory after a clean stop.
func TestCounterSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	n := startTestNode(t, dir, "n1", "first")
	if status, body := n.get(t, "/readyz", nil); status != http.StatusOK || body != "ready" {
		t.Fatalf("/readyz: %d %q", status, body)
	}
	n.mustGet(t, "/actor/counter/a", "1")
	n.mustGet(t, "/actor/counter/a", "2")
	n.mustGet(t, "/actor/counter/a", "3")
	n.mustGet(t, "/actor/counter/a?read", "3")
	if status, body := n.get(t, "/metrics", nil); status != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics: %d", status)
	}
	n.stop(t)
	if err := n.Err(); err != nil {
		t.Fatalf("after a clean stop: %v", err)
	}
	if r := readRecord(t, dir, counterA); r.Held {
		t.Fatalf("record held after a clean stop: %+v", r)
	}

	again := startTestNode(t, dir, "n1", "second")
	again.mustGet(t, "/actor/counter/a", "4")
	if r := readRecord(t, dir, counterA); !r.Held || r.Instance != "second" || r.Generation != 2 {
		t.Fatalf("record after the restart: %+v, want held by instance second at generation 2", r)
	}
}

// TestForwardToHolder: two nodes on one directory; a request to the node
// that does not hold the actor is forwarded to the one that does, so the
// count stays one sequence.
func TestForwardToHolder(t *testing.T) {
	dir := t.TempDir()
	n1 := startTestNode(t, dir, "n1", "i1")
	n2 := startTestNode(t, dir, "n2", "i2")
	n1.mustGet(t, "/actor/counter/a", "1")
	n2.mustGet(t, "/actor/counter/a", "2")
	n1.mustGet(t, "/actor/counter/a", "3")
	n2.mustGet(t, "/actor/counter/a", "4")
	if r := readRecord(t, dir, counterA); r.Node != "n1" || r.Generation != 1 {
		t.Fatalf("record %+v, want held by n1 at generation 1", r)
	}
	// A request that was already forwarded once is never forwarded again.
	status, body := n2.get(t, "/actor/counter/a", http.Header{peer.ForwardedHeader: {"n9"}})
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "already forwarded") {
		t.Fatalf("forwarded twice: %d %q", status, body)
	}
	n1.mustGet(t, "/actor/counter/a?read", "4")
}

// TestRequestsRacingTheIdleTimeout: with an idle timeout of a millisecond,
// an actor keeps going idle between a request's grant and its event (the
// hold ends first). Such an event is refused before it runs and granted
// again: every request is answered 200 and counted exactly once. The race
// is met by chance (without the retry, within a few hundred requests in
// most runs, so 3,000 are made); actors' TestEndedGrantDoesNotRun checks
// the refusal itself deterministically.
func TestRequestsRacingTheIdleTimeout(t *testing.T) {
	n := startTestNodeWith(t, nodetest.Options{IdleTimeout: time.Millisecond})
	for i := 1; i <= 3000; i++ {
		n.mustGet(t, "/actor/counter/racing", strconv.Itoa(i))
		if i%3 == 0 {
			// Now and then, about the idle timeout: the actor's idle timer
			// (a real one, in a node over real TCP) then fires about when
			// the next request arrives, which is the race sought. Awaiting
			// the hibernation instead would take the race away.
			time.Sleep(time.Millisecond)
		}
	}
}
