package node_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// tally counts its events and says which node served each.
func tally(node string) actors.Class {
	return actors.ClassFunc(func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
		v, _ := st.Get("n")
		n, _ := strconv.Atoi(string(v))
		n++
		if err := st.Put("n", []byte(strconv.Itoa(n))); err != nil {
			return nil, err
		}
		return actors.Text(http.StatusOK, fmt.Sprintf("%d %s", n, node)), nil
	})
}

// relay calls the actor its path names and answers what it answered.
var relay = actors.ClassFunc(func(ctx context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
	class, name, _ := strings.Cut(strings.TrimPrefix(req.Path, "/"), "/")
	resp, err := actors.Call(ctx, ownership.Actor{Class: class, Name: name}, &actors.Request{Method: http.MethodGet})
	if err != nil {
		return actors.Text(http.StatusBadGateway, err.Error()), nil
	}
	return resp, nil
})

// awaitLive waits until every node sees every other as live (able to
// take actors).
func awaitLive(t *testing.T, nodes ...*nodetest.Node) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			live := 0
			for _, p := range n.Status().Peers {
				if p.Live {
					live++
				}
			}
			if live < len(nodes)-1 {
				return false
			}
		}
		return true
	}, nodetest.Wait, 10*time.Millisecond, "the nodes see each other live")
}

// TestClassServedByOneNode: a class that only some nodes serve answers
// through every node: an event of it (a request or a call) goes to a live
// node that serves it, the same one for the same actor, and a class no
// node serves is a 404 that says so. A draining node hands its actors
// only to a peer that serves their class; when none is live the answer
// is a 503, not a 404.
func TestClassServedByOneNode(t *testing.T) {
	dir := t.TempDir()
	start := func(id string, classes map[string]actors.Class) *nodetest.Node {
		return nodetest.Start(t, nodetest.Options{Dir: dir, Node: id, Instance: id + "-i", Classes: classes, Configure: shortLeases})
	}
	n1 := start("n1", map[string]actors.Class{"tally": tally("n1")})
	n2 := start("n2", map[string]actors.Class{"relay": relay})
	n3 := start("n3", nil)
	awaitLive(t, n1, n2, n3)

	for i, n := range []*nodetest.Node{n2, n3, n1, n2} {
		status, body := get(t, n.URL+"/actor/tally/a")
		require.Equal(t, http.StatusOK, status, body)
		assert.Equal(t, fmt.Sprintf("%d n1", i+1), body, "one count, kept by n1 whichever node the request reached")
	}
	status, body := get(t, n2.URL+"/actor/relay/r/tally/a")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "5 n1", body, "a call from n2 reaches the class on n1")
	status, body = get(t, n3.URL+"/actor/relay/r/tally/a")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "6 n1", body, "a request for n2's class through n3, and its call to n1's")

	status, body = get(t, n3.URL+"/actor/nosuchclass/a")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Contains(t, body, `unknown class "nosuchclass": no node of the cluster serves it`)

	// What each node serves: in the bucket, on a peer's status page, and
	// a move to a node that does not serve the class is refused.
	b, err := dirstore.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	cs, err := cluster.ReadStatus(t.Context(), b, time.Now())
	require.NoError(t, err)
	served := map[ownership.NodeID][]string{}
	for _, n := range cs.Nodes {
		served[n.Node] = n.Classes
	}
	assert.Equal(t, []string{"counter", "kv", "sql", "tally"}, served["n1"])
	assert.Equal(t, []string{"counter", "kv", "relay", "sql"}, served["n2"])
	_, body = get(t, n3.URL+"/status?format=json")
	assert.Contains(t, body, `"node":"n1"`)
	assert.Contains(t, body, `"classes":["counter","kv","sql","tally"]`, "n3's page shows what n1 serves")
	_, err = cluster.RequestMove(t.Context(), b, ownership.Actor{Class: "tally", Name: "a"}, "n3", "test", "nonce", time.Now())
	require.ErrorIs(t, err, cluster.ErrClassNotServed)

	// A second node serves tally: n1's drain hands a to it, not to n3
	// (which does not serve it), and the count goes on there.
	n4 := start("n4", map[string]actors.Class{"tally": tally("n4")})
	awaitLive(t, n1, n2, n3, n4)
	_, err = cluster.RequestDrain(t.Context(), b, "n1", "test", time.Now())
	require.NoError(t, err)
	require.Eventually(t, func() bool { st := n1.Status(); return st.Draining && st.Live+st.Parked+st.Pending == 0 },
		nodetest.Wait, 10*time.Millisecond, "n1 drains")
	for _, n := range []*nodetest.Node{n1, n3, n2} {
		status, body := get(t, n.URL+"/actor/tally/a")
		require.Equal(t, http.StatusOK, status, "through %s: %s", n.Status().Node, body)
		assert.Contains(t, body, " n4", "through %s: the actor is on n4, the one live node that serves tally", n.Status().Node)
	}

	// With n4 drained too, no live node serves tally: 503, saying why.
	_, err = cluster.RequestDrain(t.Context(), b, "n4", "test", time.Now())
	require.NoError(t, err)
	require.Eventually(t, func() bool { st := n4.Status(); return st.Draining && st.Live+st.Parked+st.Pending == 0 },
		nodetest.Wait, 10*time.Millisecond, "n4 drains")
	require.Eventually(t, func() bool {
		status, _ := get(t, n3.URL+"/actor/tally/a")
		return status == http.StatusServiceUnavailable
	}, nodetest.Wait, 20*time.Millisecond, "n3 learns that n4 drains")
	status, body = get(t, n3.URL+"/actor/tally/a")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, `class "tally" is served by node n1, n4, which takes no actors now`)
}
