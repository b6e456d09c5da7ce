package ingress_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/peer"
)

// hop is a class whose actors, asked /call/<class>/<name>[/rest], call
// that actor with GET /rest (and the request's query) and answer what it
// answered; asked anything else, they answer "hop".
func hop(ctx context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
	p, ok := strings.CutPrefix(req.Path, "/call/")
	if !ok {
		return actors.Text(http.StatusOK, "hop"), nil
	}
	parts := strings.SplitN(p, "/", 3)
	to := ownership.Actor{Class: parts[0], Name: parts[1]}
	rest := ""
	if len(parts) == 3 {
		rest = "/" + parts[2]
	}
	resp, err := actors.Call(ctx, to, &actors.Request{Method: http.MethodGet, Path: rest, Query: req.Query, Header: http.Header{}})
	if err != nil {
		return actors.Text(http.StatusBadGateway, "call failed: "+err.Error()), nil
	}
	return actors.Text(resp.Status, to.Name+" said "+strings.TrimSpace(string(resp.Body))), nil
}

// hopNode starts node name (instance name+"i") on dir serving hop
// beside the built-in classes, with key as its cluster key ("": none).
func hopNode(t *testing.T, dir, name, key string) *testNode {
	t.Helper()
	o := nodetest.Options{Dir: dir, Node: name, Instance: name + "i", Classes: map[string]actors.Class{"hop": actors.ClassFunc(hop)}}
	if key != "" {
		o.Configure = func(c *node.Config) { c.HTTP.ClusterKey = []byte(key) }
	}
	return startTestNodeWith(t, o)
}

// TestCallAcrossNodes: an actor calls actors held here and on another node
// (the call is forwarded to the holder, the chain with it), and a cycle
// through two nodes is refused where it closes.
func TestCallAcrossNodes(t *testing.T) {
	dir := t.TempDir()
	n1 := hopNode(t, dir, "n1", "")
	n2 := hopNode(t, dir, "n2", "")
	n1.mustGet(t, "/actor/counter/a", "1") // n1 holds counter/a
	n1.mustGet(t, "/actor/hop/q", "hop")   // and hop/q
	n2.mustGet(t, "/actor/hop/p", "hop")   // n2 holds hop/p
	n2.mustGet(t, "/actor/hop/p/call/counter/a", "a said 2")
	n1.mustGet(t, "/actor/hop/q/call/counter/a", "a said 3")
	n1.mustGet(t, "/actor/counter/a?read", "3")
	if r := readRecord(t, dir, counterA); r.Node != "n1" || r.Generation != 1 {
		t.Fatalf("counter record %+v, want held by n1 at generation 1 all along", r)
	}
	// p (n2) calls q (n1), which calls p: refused on n1, from the chain
	// the forwarded call carried.
	status, body := n2.get(t, "/actor/hop/p/call/hop/q/call/hop/p", nil)
	if status != http.StatusBadGateway || !strings.Contains(body, "q said call failed: actor call cycle: hop/p is waiting") {
		t.Fatalf("cycle across nodes: %d %q", status, body)
	}
	// p is free again: the refused cycle left nothing waiting.
	n2.mustGet(t, "/actor/hop/p", "hop")
	status, body = n1.get(t, "/actor/hop/q/call/nope/x", nil)
	if status != http.StatusBadGateway || !strings.Contains(body, "unknown class") {
		t.Fatalf("call to an unknown class: %d %q", status, body)
	}
	status, body = n1.get(t, "/actor/hop/q/call/counter/%01", nil)
	if status != http.StatusBadGateway || !strings.Contains(body, "control character") {
		t.Fatalf("call to a bad name: %d %q", status, body)
	}
	// A forged chain header is checked like any input.
	status, _ = n1.get(t, "/actor/hop/q", http.Header{"Wasmkeep-Call-Chain": {"no-slash"}})
	if status != http.StatusBadRequest {
		t.Fatalf("bad chain header: %d; want 400", status)
	}
}

// TestClusterKey: nodes sharing a cluster key forward requests and calls
// to each other; a client posing as a peer, and a node with another key,
// are refused.
func TestClusterKey(t *testing.T) {
	dir := t.TempDir()
	const key = "a cluster key of 32 bytes, ok..."
	n1 := hopNode(t, dir, "n1", key)
	n2 := hopNode(t, dir, "n2", key)
	n1.mustGet(t, "/actor/counter/a", "1")
	n1.mustGet(t, "/actor/hop/q", "hop")
	n2.mustGet(t, "/actor/counter/a", "2")                   // forwarded, signed
	n2.mustGet(t, "/actor/hop/p/call/counter/a", "a said 3") // a call forwarded, signed
	status, body := n2.get(t, "/actor/hop/p/call/hop/q/call/hop/p", nil)
	if status != http.StatusBadGateway || !strings.Contains(body, "actor call cycle") {
		t.Fatalf("cycle across keyed nodes: %d %q", status, body)
	}
	for _, h := range []string{peer.ForwardedHeader, peer.CallChainHeader, peer.SignatureHeader} {
		status, body := n1.get(t, "/actor/counter/a", http.Header{h: {"v1,1,x"}})
		if status != http.StatusUnauthorized || !strings.Contains(body, "cluster signature") {
			t.Fatalf("client sending %s: %d %q; want 401", h, status, body)
		}
	}
	n3 := hopNode(t, dir, "n3", "another key, also long enough")
	if status, _ := n3.get(t, "/actor/counter/a", nil); status != http.StatusUnauthorized {
		t.Fatalf("forwarded with another key: %d; want 401 from the holder", status)
	}
	n1.mustGet(t, "/actor/counter/a?read", "3")
}
