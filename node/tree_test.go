package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/supervisors"
)

// faults makes one actor of a node's tree panic at its next message of a
// given type: the failure a test injects into a role.
type faults struct {
	mu    sync.Mutex
	armed map[supervisors.Role]string // message type (%T), "" for any
	fired chan supervisors.Role
}

func newFaults() *faults {
	return &faults{armed: map[supervisors.Role]string{}, fired: make(chan supervisors.Role, 8)}
}

func (f *faults) arm(role supervisors.Role, msgType string) {
	f.mu.Lock()
	f.armed[role] = msgType
	f.mu.Unlock()
}

func (f *faults) hook(role supervisors.Role, msg any) {
	f.mu.Lock()
	typ, ok := f.armed[role]
	if ok && (typ == "" || fmt.Sprintf("%T", msg) == typ) {
		delete(f.armed, role)
		f.mu.Unlock()
		f.fired <- role
		panic(fmt.Sprintf("injected failure of the %s at %T", role, msg))
	}
	f.mu.Unlock()
}

func (f *faults) awaitFired(t *testing.T, role supervisors.Role) {
	t.Helper()
	select {
	case r := <-f.fired:
		require.Equal(t, role, r)
	case <-time.After(nodetest.Wait):
		t.Fatalf("the %s's injected failure never fired", role)
	}
}

// startFaulty starts a node whose tree takes f's failures.
func startFaulty(t *testing.T, f *faults, o nodetest.Options) *nodetest.Node {
	t.Helper()
	configure := o.Configure
	o.Configure = func(cfg *node.Config) {
		node.WithFaults(cfg, f.hook)
		if configure != nil {
			configure(cfg)
		}
	}
	return nodetest.Start(t, o)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, strings.TrimSpace(string(b))
}

// count increments counter name on n and returns the new value.
func count(t *testing.T, n *nodetest.Node, name string) string {
	t.Helper()
	status, body := get(t, n.URL+"/actor/counter/"+name)
	require.Equal(t, http.StatusOK, status, body)
	return body
}

// series returns the line of a series from the node's /metrics ("" if
// absent).
func series(t *testing.T, n *nodetest.Node, series string) string {
	t.Helper()
	_, body := get(t, n.URL+"/metrics")
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			return line
		}
	}
	return ""
}

// line returns the tree's line of the actor named name.
func line(t *testing.T, n *nodetest.Node, name string) supervisors.Line {
	t.Helper()
	for _, l := range n.Tree() {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no %q in the tree: %+v", name, n.Tree())
	return supervisors.Line{}
}

// awaitLine waits until the tree's line of name satisfies ok.
func awaitLine(t *testing.T, n *nodetest.Node, name string, ok func(supervisors.Line) bool) supervisors.Line {
	t.Helper()
	var l supervisors.Line
	require.Eventually(t, func() bool { l = line(t, n, name); return ok(l) }, nodetest.Wait, 5*time.Millisecond,
		"the tree's line of %s: %+v", name, &l)
	return l
}

// TestTreeShowsEveryRole: /debug/tree lists the keeper, the director, the
// three drivers, the rooms' actor, the socket owner (a part, not an actor)
// and the resident actors by class.
func TestTreeShowsEveryRole(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	count(t, n, "a")
	count(t, n, "b")
	status, body := get(t, n.URL+"/debug/tree")
	require.Equal(t, http.StatusOK, status)
	for _, want := range []string{"keeper", "node/ownership-n1", "director", "node/director", "sweeper", "drainer", "mover", "sockets"} {
		assert.Contains(t, body, want)
	}
	assert.Regexp(t, `resident\s+counter\s+2 resident`, body)
	assert.Regexp(t, `(?m)^sockets\s+node/rooms\s+running\s+0\s+\d+\s+room actors: 0$`, body)
	assert.Regexp(t, `(?m)^sockets\s+sockets\s+running`, body)
	status, body = get(t, n.URL+"/debug/tree?format=json")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"role":"director","name":"director","state":"running"`)
	assert.Contains(t, body, `"name":"sockets","state":"running","restarts":0,"mailbox":0,"progress":"0 sockets held, 0 failures","part":true}`)
	for _, role := range []string{"keeper", "director", "sweeper", "drainer", "mover", "sockets"} {
		assert.NotEmpty(t, series(t, n, `wasmkeep_supervisor_failures_total{role="`+role+`"}`), role)
	}
	status, body = get(t, n.URL+"/status")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "<h1>Node n1</h1>")
	assert.Contains(t, body, "Supervision tree")
	assert.Contains(t, body, "classes served: <code>counter</code>, <code>kv</code>, <code>sql</code>")
	status, body = get(t, n.URL+"/status?format=json")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"node":"n1"`)
	assert.Contains(t, body, `"lease_valid":true`)
	assert.Contains(t, body, `"held":2`)
	assert.Contains(t, body, `"classes":["counter","kv","sql"]`)
}

// TestSweeperFailureRestarts: a sweeper that fails is restarted after its
// backoff and sweeps again; the tree's metrics count the failure and the
// restart.
func TestSweeperFailureRestarts(t *testing.T) {
	f := newFaults()
	n := startFaulty(t, f, nodetest.Options{Configure: func(c *node.Config) { c.Core.SweepPeriod = 20 * time.Millisecond }})
	f.arm(supervisors.RoleSweeper, "node.sweepTick")
	f.awaitFired(t, supervisors.RoleSweeper)
	l := awaitLine(t, n, "sweeper", func(l supervisors.Line) bool { return l.Restarts == 1 && l.State == "running" })
	before := l.Progress
	awaitLine(t, n, "sweeper", func(l supervisors.Line) bool { return l.Progress != before })
	assert.Equal(t, `wasmkeep_supervisor_failures_total{role="sweeper"} 1`, series(t, n, `wasmkeep_supervisor_failures_total{role="sweeper"}`))
	assert.Equal(t, `wasmkeep_supervisor_restarts_total{role="sweeper"} 1`, series(t, n, `wasmkeep_supervisor_restarts_total{role="sweeper"}`))
	assert.Equal(t, "1", count(t, n, "c")) // the node serves on
}

// TestDirectorFailureRestarts: a director that fails (here its hibernation
// callback panics) is restarted; its resident actors stop first, their
// commits durable, so every acknowledged write survives and the actors
// wake again at their next event.
func TestDirectorFailureRestarts(t *testing.T) {
	var mu sync.Mutex
	explode := false
	n := nodetest.Start(t, nodetest.Options{IdleTimeout: 50 * time.Millisecond, Configure: func(c *node.Config) {
		inner := c.Actors.OnHibernate
		c.Actors.OnHibernate = func(a ownership.Actor, gen ownership.Generation, reason string) {
			mu.Lock()
			boom := explode && a.Name == "idle"
			explode = explode && !boom
			mu.Unlock()
			if boom {
				panic("injected failure of the director")
			}
			inner(a, gen, reason)
		}
	}})
	for i := 1; i <= 3; i++ {
		require.Equal(t, fmt.Sprint(i), count(t, n, "kept"))
	}
	mu.Lock()
	explode = true
	mu.Unlock()
	count(t, n, "idle") // hibernates after 50 ms: the director panics
	awaitLine(t, n, "director", func(l supervisors.Line) bool { return l.Restarts == 1 && l.State == "running" })
	assert.Equal(t, "4", count(t, n, "kept"))
	assert.Equal(t, "2", count(t, n, "idle"))
	assert.Equal(t, `wasmkeep_supervisor_failures_total{role="director"} 1`, series(t, n, `wasmkeep_supervisor_failures_total{role="director"}`))
	assert.Equal(t, `wasmkeep_supervisor_restarts_total{role="director"} 1`, series(t, n, `wasmkeep_supervisor_restarts_total{role="director"}`))
}

// awaitLivePeer waits until n sees node peer live.
func awaitLivePeer(t *testing.T, n *nodetest.Node, peer ownership.NodeID) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, p := range n.Status().Peers {
			if p.Node == peer && p.State == ownership.LeaseLive {
				return true
			}
		}
		return false
	}, nodetest.Wait, 10*time.Millisecond, "%s sees %s live", n.Status().Node, peer)
}

// TestDrainerFailureResumes: a drainer that fails while it follows a drain
// is restarted and finishes it from the keeper's status; the drained node
// holds nothing, and the actor it held is served by its peer.
func TestDrainerFailureResumes(t *testing.T) {
	dir := t.TempDir()
	f := newFaults()
	n1 := startFaulty(t, f, nodetest.Options{Dir: dir, Node: "n1", Instance: "i1"})
	n2 := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "n2", Instance: "i2"})
	require.Equal(t, "1", count(t, n1, "held"))
	awaitLivePeer(t, n1, "n2")
	f.arm(supervisors.RoleDrainer, "*keeper.StatusAnswer")
	ctx, cancel := context.WithTimeout(t.Context(), nodetest.Wait)
	defer cancel()
	require.NoError(t, n1.Drain(ctx, "test"))
	f.awaitFired(t, supervisors.RoleDrainer)
	l := line(t, n1, "drainer")
	assert.Equal(t, 1, l.Restarts)
	assert.Contains(t, l.Progress, "drained (test)")
	st := n1.Status()
	assert.True(t, st.Draining)
	assert.False(t, st.DrainStuck)
	assert.Zero(t, st.Live+st.Parked+st.Pending+st.Unresolved, "%+v", st)
	assert.Equal(t, `wasmkeep_supervisor_restarts_total{role="drainer"} 1`, series(t, n1, `wasmkeep_supervisor_restarts_total{role="drainer"}`))
	assert.Equal(t, "2", count(t, n2, "held"), "the peer serves the actor, its count intact")
	status, _ := get(t, n1.URL+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, status, "a drained node is not ready")
}

// TestStuckDrainServes: a drain with no live peer is stuck
// (docs/PROTOCOL.md §5): the node keeps serving its actors and stays ready, and the
// tree and the status say so.
func TestStuckDrainServes(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	require.Equal(t, "1", count(t, n, "alone"))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err := n.Drain(ctx, "test")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "stuck: no live peer")
	assert.True(t, n.Status().DrainStuck)
	assert.Equal(t, "2", count(t, n, "alone"))
	assert.Equal(t, "1", count(t, n, "new"))
	status, _ := get(t, n.URL+"/readyz")
	assert.Equal(t, http.StatusOK, status)
}

// TestMoveAndMoverFailure: a move releases the actor here and the target
// takes it; a mover that fails before its take call is restarted and
// sends it. A move to a node that is not a live peer is refused.
func TestMoveAndMoverFailure(t *testing.T) {
	dir := t.TempDir()
	f := newFaults()
	n1 := startFaulty(t, f, nodetest.Options{Dir: dir, Node: "n1", Instance: "i1"})
	n2 := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "n2", Instance: "i2"})
	require.Equal(t, "1", count(t, n1, "m"))
	ctx, cancel := context.WithTimeout(t.Context(), nodetest.Wait)
	defer cancel()
	a := ownership.Actor{Class: "counter", Name: "m"}
	err := n1.Move(ctx, a, "n9")
	require.ErrorIs(t, err, node.ErrMoveRefused)
	assert.Contains(t, err.Error(), "n9 is not a node of this cluster")
	awaitLivePeer(t, n1, "n2")
	f.arm(supervisors.RoleMover, "*node.takeMsg")
	require.NoError(t, n1.Move(ctx, a, "n2"))
	f.awaitFired(t, supervisors.RoleMover)
	awaitLine(t, n1, "mover", func(l supervisors.Line) bool { return strings.Contains(l.Progress, "1 taken") })
	assert.Equal(t, 1, line(t, n1, "mover").Restarts)
	assert.Equal(t, 1, n2.Status().Live, "n2 holds the moved actor")
	assert.Equal(t, 0, n1.Status().Live)
	assert.Equal(t, "2", count(t, n1, "m"), "an event through n1 reaches the actor on n2, its count intact")

	// And back: n2 moves it to n1, which n1 takes though it moved it away
	// moments ago (its own move is over once n2 took the actor).
	awaitLivePeer(t, n2, "n1")
	require.NoError(t, n2.Move(ctx, a, "n1"))
	awaitLine(t, n2, "mover", func(l supervisors.Line) bool { return strings.Contains(l.Progress, "1 taken") })
	assert.Equal(t, 1, n1.Status().Live, "n1 holds it again")
	assert.Equal(t, "3", count(t, n2, "m"))
	assert.Equal(t, "4", count(t, n1, "m"))
}

// TestKeeperFailureEndsNode: a keeper that fails is not restarted: the
// node stops acting at once and ends with an error naming the keeper, and
// nothing it held is released (peers fence it).
func TestKeeperFailureEndsNode(t *testing.T) {
	f := newFaults()
	dir := t.TempDir()
	n := startFaulty(t, f, nodetest.Options{Dir: dir})
	require.Equal(t, "1", count(t, n, "k"))
	f.arm(supervisors.RoleKeeper, "")
	status, _ := get(t, n.URL+"/actor/counter/k2") // a new actor: the keeper's mailbox
	f.awaitFired(t, supervisors.RoleKeeper)
	select {
	case <-n.Done():
	case <-time.After(nodetest.Wait):
		t.Fatal("the node did not end after its keeper failed")
	}
	require.Error(t, n.Err())
	assert.Contains(t, n.Err().Error(), "keeper")
	assert.NotEqual(t, http.StatusOK, status)
	assert.Equal(t, `wasmkeep_supervisor_failures_total{role="keeper"} 1`, series(t, n, `wasmkeep_supervisor_failures_total{role="keeper"}`))
	assert.Equal(t, "failed", line(t, n, "ownership-n1").State)
	assert.Equal(t, 1, n.Status().Live, "the hold on counter/k is kept, not released")
}

// TestAdminPagesOffThePublicListener: without PublicAdmin the node's
// listener does not serve the status page or the tree; the admin handler
// does, with JSON for Accept: application/json.
func TestAdminPagesOffThePublicListener(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Configure: func(c *node.Config) { c.PublicAdmin = false }})
	for _, path := range []string{"/status", "/debug/tree"} {
		status, _ := get(t, n.URL+path)
		assert.Equal(t, http.StatusNotFound, status, path)
	}
	admin := httptest.NewServer(n.AdminHandler())
	defer admin.Close()
	req, err := http.NewRequest(http.MethodGet, admin.URL+"/status", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
	assert.Contains(t, string(body), `"node":"n1"`)
	status, body2 := get(t, admin.URL+"/debug/tree")
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body2, "sweeper")
	status, _ = get(t, admin.URL+"/metrics")
	assert.Equal(t, http.StatusOK, status)
}

// TestSocketsFailureClosesItsRoom: a failure of the socket owner of one
// room (a panic on its socket's reader goroutine, as the socket's message
// is handed to the node) closes that room's socket with 1011, and the
// keeper learns it is gone: the room's parked record is released by the
// last-socket rule. Another parked room's socket stays open and wakes its
// room. The tree counts the failure under role sockets, restarts nothing,
// and shows the socket owner's line.
func TestSocketsFailureClosesItsRoom(t *testing.T) {
	f := newFaults()
	n := startFaulty(t, f, nodetest.Options{Classes: map[string]actors.Class{"chat": chat.Room{}}, IdleTimeout: 100 * time.Millisecond})
	ada := n.Join(t, "chat", "failed", "ada")
	ada.AwaitPresence("ada")
	bob := n.Join(t, "chat", "kept", "bob")
	bob.AwaitPresence("bob")
	require.Eventually(t, func() bool { return n.Status().Parked == 2 }, nodetest.Wait, 5*time.Millisecond, "both rooms park")
	lastSocket := `wasmkeep_parked_releases_total{reason="last_socket"}`
	before := series(t, n, lastSocket)
	require.True(t, before == "" || before == lastSocket+" 0", before)

	f.arm(supervisors.RoleSockets, "*actors.SocketEvent")
	ada.Say("boom")
	f.awaitFired(t, supervisors.RoleSockets)
	require.NoError(t, ada.Conn.SetReadDeadline(time.Now().Add(nodetest.Wait)))
	var err error
	for err == nil {
		_, _, err = ada.Conn.ReadMessage()
	}
	var ce *websocket.CloseError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, websocket.CloseInternalServerErr, ce.Code)
	require.Eventually(t, func() bool { return series(t, n, lastSocket) == lastSocket+" 1" }, nodetest.Wait, 5*time.Millisecond,
		"the parked record of the failed room is released for its last socket")

	require.Eventually(t, func() bool { return n.Sockets() == 1 }, nodetest.Wait, 5*time.Millisecond, "bob's socket only")
	bob.Say("still here")
	bob.AwaitSaid("bob", "still here")
	assert.Equal(t, `wasmkeep_supervisor_failures_total{role="sockets"} 1`, series(t, n, `wasmkeep_supervisor_failures_total{role="sockets"}`))
	assert.Equal(t, `wasmkeep_supervisor_restarts_total{role="sockets"} 0`, series(t, n, `wasmkeep_supervisor_restarts_total{role="sockets"}`))
	l := line(t, n, "sockets")
	assert.Equal(t, "sockets", l.Role)
	assert.Equal(t, "running", l.State)
	assert.Zero(t, l.Restarts)
	assert.Equal(t, "1 sockets held, 1 failures", l.Progress)
	_, body := get(t, n.URL+"/debug/tree")
	assert.Regexp(t, `(?m)^sockets\s+sockets\s+running\s+0\s+0\s+1 sockets held, 1 failures$`, body)
	assert.NoError(t, n.Err(), "the node carries on")
}
