package node_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/supervisors"
)

// shortLeases makes a node's leases short, so that a dead peer is fenced
// in under a second.
func shortLeases(c *node.Config) {
	c.Core.LeasePeriod, c.Core.AttemptTimeout = 100*time.Millisecond, 200*time.Millisecond
	c.Core.LeaseTTL, c.Core.Safety, c.Core.Grace = 600*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	c.Core.ResolverWatch = time.Second
	c.HTTP.FailoverWait = 5 * time.Second
}

// TestRequestWaitsOutAFailover: a request for an actor whose holder died
// (it takes no connection any more, its lease stands still) waits for the
// peers to fence the holder and is then served here, its state intact,
// instead of a 503 at once.
func TestRequestWaitsOutAFailover(t *testing.T) {
	dir := t.TempDir()
	f := newFaults()
	n1 := startFaulty(t, f, nodetest.Options{Dir: dir, Node: "n1", Instance: "i1", Configure: shortLeases})
	n2 := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "n2", Instance: "i2", Configure: shortLeases})
	require.Equal(t, "1", count(t, n1, "f"))
	awaitLivePeer(t, n2, "n1")
	// n1 dies: its keeper fails (nothing is released, its lease stands
	// still) and its server closes.
	f.arm(supervisors.RoleKeeper, "")
	get(t, n1.URL+"/actor/counter/other")
	select {
	case <-n1.Done():
	case <-time.After(nodetest.Wait):
		t.Fatal("n1 did not end")
	}
	n1.Abort()
	// Within the failover wait (5 s), or it would be 503.
	status, body := get(t, n2.URL+"/actor/counter/f")
	assert.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "2", body, "the count n1 acknowledged survives")
	var n1Peer ownership.PeerStatus
	for _, p := range n2.Status().Peers {
		if p.Node == "n1" {
			n1Peer = p
		}
	}
	assert.Equal(t, ownership.LeaseFenced, n1Peer.State)
}

// operatedPair starts two nodes with short leases on one directory bucket,
// waits until n1 sees n2 live, and opens the bucket as an operator's
// command would.
func operatedPair(t *testing.T) (n1, n2 *nodetest.Node, b *dirstore.Store) {
	t.Helper()
	dir := t.TempDir()
	n1 = nodetest.Start(t, nodetest.Options{Dir: dir, Node: "n1", Instance: "i1", Configure: shortLeases})
	n2 = nodetest.Start(t, nodetest.Options{Dir: dir, Node: "n2", Instance: "i2", Configure: shortLeases})
	awaitLivePeer(t, n1, "n2")
	b, err := dirstore.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return n1, n2, b
}

// TestDrainRequestedInTheBucket: an operator's drain request (cluster
// drain) reaches the node through the membership listing: it drains, its
// actor is served by its peer, its /readyz says not ready and its tree
// shows the drain; taking the request back makes it serve again.
func TestDrainRequestedInTheBucket(t *testing.T) {
	n1, n2, b := operatedPair(t)
	require.Equal(t, "1", count(t, n1, "d"))
	var err error
	_, err = cluster.RequestDrain(t.Context(), b, "n9", "test", time.Now())
	require.ErrorIs(t, err, cluster.ErrUnknownNode)
	_, err = cluster.RequestDrain(t.Context(), b, "n1", "test", time.Now())
	require.NoError(t, err)
	awaitLine(t, n1, "drainer", func(l supervisors.Line) bool {
		return strings.Contains(l.Progress, "drained (requested in the bucket)")
	})
	st := n1.Status()
	assert.True(t, st.Draining)
	assert.Zero(t, st.Live+st.Parked+st.Pending, "%+v", st)
	status, _ := get(t, n1.URL+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "2", count(t, n1, "d"), "sent on to n2, the count intact")
	assert.Equal(t, 1, n2.Status().Live)
	cs, err := cluster.ReadStatus(t.Context(), b, time.Now())
	require.NoError(t, err)
	require.Empty(t, cs.Unreadable, "a drain request is not an unreadable lease")
	assert.True(t, cs.Nodes[0].DrainRequested)

	require.NoError(t, cluster.TakeBackDrain(t.Context(), b, "n1"))
	require.Eventually(t, func() bool { return !n1.Status().Draining }, nodetest.Wait, 10*time.Millisecond)
	awaitLine(t, n1, "drainer", func(l supervisors.Line) bool { return l.Progress == "serving" })
	status, _ = get(t, n1.URL+"/readyz")
	assert.Equal(t, http.StatusOK, status)
	require.ErrorIs(t, cluster.TakeBackDrain(t.Context(), b, "n1"), cluster.ErrNoDrainRequest)
}

// TestMoveRequestedInTheBucket: cluster move's request reaches the
// holder through its membership listing: it moves the actor to the
// target, which holds it, and the request is deleted. An actor nobody
// holds is taken by the target itself; a move to an unknown node is
// refused before anything is written.
func TestMoveRequestedInTheBucket(t *testing.T) {
	n1, n2, b := operatedPair(t)
	require.Equal(t, "1", count(t, n1, "m"))
	var err error
	m := ownership.Actor{Class: "counter", Name: "m"}
	_, err = cluster.RequestMove(t.Context(), b, m, "n9", "test", "a", time.Now())
	require.ErrorIs(t, err, cluster.ErrUnknownNode)
	mv, err := cluster.RequestMove(t.Context(), b, m, "n2", "test", "b", time.Now())
	require.NoError(t, err)
	assert.True(t, mv.Held)
	assert.Equal(t, ownership.NodeID("n1"), mv.To)
	awaitLine(t, n1, "mover", func(l supervisors.Line) bool { return strings.Contains(l.Progress, "1 taken") })
	require.Eventually(t, func() bool { _, err := b.Get(t.Context(), mv.Key); return err != nil }, nodetest.Wait, 10*time.Millisecond,
		"the request is deleted")
	assert.Equal(t, 1, n2.Status().Live)
	assert.Equal(t, "2", count(t, n1, "m"), "served on n2, its count intact")

	free := ownership.Actor{Class: "counter", Name: "free"}
	mv, err = cluster.RequestMove(t.Context(), b, free, "n2", "test", "c", time.Now())
	require.NoError(t, err)
	assert.False(t, mv.Held)
	require.Eventually(t, func() bool { return n2.Status().Live == 2 }, nodetest.Wait, 10*time.Millisecond, "n2 takes the free actor")
	_, err = cluster.RequestMove(t.Context(), b, free, "n2", "test", "d", time.Now())
	require.ErrorIs(t, err, cluster.ErrAlreadyThere)
}
