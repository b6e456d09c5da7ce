package ingress_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
)

// TestIdempotencyKeyOverHTTP: a request with an Idempotency-Key runs once;
// the same request with it again gets the first answer, marked replayed;
// an invalid key is refused before anything runs.
func TestIdempotencyKeyOverHTTP(t *testing.T) {
	n := startTestNode(t, t.TempDir(), "n1", "i1")
	key := func(k string) http.Header { return http.Header{actorhost.IdempotencyHeader: {k}} }
	if status, body := n.get(t, "/actor/counter/a", key("order-1")); status != 200 || body != "1" {
		t.Fatalf("first: %d %q", status, body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, n.url+"/actor/counter/a", nil)
	req.Header.Set(actorhost.IdempotencyHeader, "order-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || strings.TrimSpace(string(body)) != "1" || res.Header.Get(actorhost.ReplayedHeader) != "true" {
		t.Fatalf("again: %d %q %v, want the first answer replayed", res.StatusCode, body, res.Header)
	}
	n.mustGet(t, "/actor/counter/a", "2")
	for _, bad := range []string{"has space", strings.Repeat("k", 256)} {
		if status, body := n.get(t, "/actor/counter/a", key(bad)); status != http.StatusBadRequest || !strings.Contains(body, actorhost.IdempotencyHeader) {
			t.Fatalf("key %q: %d %q, want 400", bad, status, body)
		}
	}
	n.mustGet(t, "/actor/counter/a?read", "2")
	_, metrics := n.get(t, "/metrics", nil)
	for _, want := range []string{`wasmkeep_event_answers_total{answer="replayed"} 1`, `wasmkeep_event_answers_total{answer="success"} 3`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// loseAnswers is a peer transport whose first n round trips reach the
// peer, which runs them, and then lose the answer: the forwarding node
// cannot tell whether the event ran.
type loseAnswers struct {
	n    atomic.Int32
	base http.RoundTripper
}

func (l *loseAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := l.base.RoundTrip(r)
	if err != nil || l.n.Add(-1) < 0 {
		return res, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return nil, errors.New("connection reset after the request was sent")
}

// TestForwardWithLostAnswerSentAgain: a forward whose answer is lost after
// the holder ran it is sent again with its key: the holder does not run it
// again. With the client's Idempotency-Key the client gets the first
// answer; with the node's own key, which keeps no answer, "outcome
// unknown" at once (not after the failover wait). A forward that never
// reached the holder's event is simply sent again and served.
func TestForwardWithLostAnswerSentAgain(t *testing.T) {
	dir := t.TempDir()
	n1 := startTestNode(t, dir, "n1", "i1")
	lose := &loseAnswers{base: http.DefaultTransport}
	n2 := startTestNodeWith(t, nodetest.Options{Dir: dir, Node: "n2", Instance: "i2",
		Configure: func(c *node.Config) { c.Peers.Transport = lose }})
	n1.mustGet(t, "/actor/counter/a", "1")
	lose.n.Store(1)
	start := time.Now()
	status, body := n2.get(t, "/actor/counter/a", nil) // run on n1 once, its answer lost
	if status != http.StatusGatewayTimeout || !strings.Contains(body, "took effect") {
		t.Fatalf("without a client key: %d %q, want 504: it ran", status, body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answered after %v: the node's key said it ran, no need to wait", d)
	}
	n1.mustGet(t, "/actor/counter/a?read", "2")
	// With the client's own key: its first answer.
	lose.n.Store(2)
	if status, body := n2.get(t, "/actor/counter/a", http.Header{actorhost.IdempotencyHeader: {"x"}}); status != 200 || body != "3" {
		t.Fatalf("keyed: %d %q", status, body)
	}
	n1.mustGet(t, "/actor/counter/a?read", "3")
}

// TestCallWithLostAnswerSentAgain: a call forwarded to the callee's node
// whose answer is lost is sent again with the call's key: the callee runs
// it once, and says so (504, it ran: a key a node made keeps no answer).
func TestCallWithLostAnswerSentAgain(t *testing.T) {
	dir := t.TempDir()
	n1 := hopNode(t, dir, "n1", "")
	lose := &loseAnswers{base: http.DefaultTransport}
	n2 := startTestNodeWith(t, nodetest.Options{Dir: dir, Node: "n2", Instance: "n2i",
		Classes:   map[string]actors.Class{"hop": actors.ClassFunc(hop)},
		Configure: func(c *node.Config) { c.Peers.Transport = lose }})
	n1.mustGet(t, "/actor/counter/a", "1") // n1 holds counter/a
	n2.mustGet(t, "/actor/hop/p", "hop")   // n2 holds hop/p
	lose.n.Store(1)
	status, body := n2.get(t, "/actor/hop/p/call/counter/a", nil)
	if status != http.StatusGatewayTimeout || !strings.Contains(body, "took effect") {
		t.Fatalf("a call whose answer was lost: %d %q, want the callee's 504: it ran", status, body)
	}
	n1.mustGet(t, "/actor/counter/a?read", "2")
}

// capture is a peer transport that keeps what it sends.
type capture struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	var b []byte
	if r.Body != nil {
		b, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	c.mu.Lock()
	c.reqs, c.body = append(c.reqs, r.Clone(context.Background())), append(c.body, b)
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// replay sends the i-th captured request again, to url.
func (c *capture) replay(t *testing.T, i int, url string) (int, string) {
	t.Helper()
	c.mu.Lock()
	orig, body := c.reqs[i], c.body[i]
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(t.Context(), orig.Method, url+orig.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = orig.Header.Clone()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}

// TestCapturedForwardRefusedAfterRestart: a signed forward taken off the
// wire is refused when played again to its target, and still refused once
// the target has restarted under the same node id: the signature names the
// instance the sender read in the target's lease.
func TestCapturedForwardRefusedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	const key = "a cluster key of 32 bytes, ok..."
	keyed := func(c *node.Config) { c.HTTP.ClusterKey = []byte(key) }
	n1 := startTestNodeWith(t, nodetest.Options{Dir: dir, Node: "n1", Instance: "first", Configure: keyed})
	wire := &capture{}
	n2 := startTestNodeWith(t, nodetest.Options{Dir: dir, Node: "n2", Instance: "n2i", Configure: func(c *node.Config) {
		keyed(c)
		c.Peers.Transport = wire
	}})
	n1.mustGet(t, "/actor/counter/a", "1")
	n2.mustGet(t, "/actor/counter/a", "2") // forwarded to n1, and captured
	if status, body := wire.replay(t, 0, n1.url); status != http.StatusUnauthorized || !strings.Contains(body, "replayed") {
		t.Fatalf("played again to the same start of n1: %d %q, want 401 replayed", status, body)
	}
	n1.stop(t)
	again := startTestNodeWith(t, nodetest.Options{Dir: dir, Node: "n1", Instance: "second", Configure: keyed})
	if status, body := wire.replay(t, 0, again.url); status != http.StatusUnauthorized || !strings.Contains(body, `signed for instance "first"`) {
		t.Fatalf("played to n1's next start: %d %q, want 401", status, body)
	}
	again.mustGet(t, "/actor/counter/a?read", "2")
}
