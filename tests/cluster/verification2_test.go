package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/cli"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/proctest"
	"github.com/wasmkeep/wasmkeep/internal/s3test"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketurl"
)

// homeArgs park rooms quickly (an idle room hibernates after 300 ms) and
// keep leases long enough that node a's bucket can be cut for a few seconds
// without a lapse (valid 6 s past the last renewal) or a fence (b waits
// 10 s).
var homeArgs = []string{"--idle-timeout", "300ms",
	"--lease-period", "500ms", "--lease-ttl", "8s", "--lease-safety", "2s", "--lease-grace", "2s"}

// wait bounds every wait on the nodes below.
const wait = 20 * time.Second

// TestVerification2 checks the parking rules of docs/PROTOCOL.md §4 and §5
// on two real nodes, a and b, over S3 (versitygw), with real WebSocket
// clients of the chat class.
// Node a reaches the bucket through a toxiproxy link (which the test can
// cut) and a key fault (which answers a's reads or writes of one key 503,
// a request without an answer); b reaches it directly, and so does the test,
// which reads ownership records to see who holds a room at what generation.
// Each point has a room of its own; 5 runs before 4, since a drained node
// takes no room.
//
//  1. A room with a socket on a parks (a keeps its record, the actor leaves
//     memory); two HTTP requests for it through b are forwarded to a and
//     wake it there, each at the next generation of a's own record; after
//     each, the socket, open throughout, is answered by the room, which
//     still knows who joined before it hibernated.
//  2. The client closes the socket: the parked record is released
//     (last_socket).
//  3. A room parks; a's bucket link is cut; the client closes the last
//     socket. Its close event cannot run (its wake cannot read the record),
//     and the freed slot moves the parked record to the pending releases:
//     nothing parked, a release pending and retried, the record unchanged
//     in the bucket. Once the link is back the release lands: the record
//     is free at the parked generation.
//  4. A drain of a closes a parked room's socket with 1012 and releases
//     its record without running its close event (the generation is kept,
//     no node woke the room for it), and a reports itself drained.
//  5. A move of a parked room to b while a's writes of its record get no
//     answer: the move waits, its release pending and retried, the socket
//     open and the record still a's; once the writes are answered, the
//     socket closes with 1012 (a move's close, not the sweep's), b
//     takes the room at a later generation and the move request is gone.
//
// Not covered, and why:
//
//   - In 3 the close event is kept from running once the link is back by
//     a fault on a's reads of the room's state (its wake's first read): a
//     node tries a socket event again for 30 s while it is refused for a
//     reason that may pass, and that wake, tried every lease period, would
//     otherwise take the record before the release's next try (the release
//     then ends refused, the wake's own release at idle freeing the record).
//     A close event lost for good (its wake refused for good) would need
//     the link cut past those 30 s, and a's lease lapses long before.
//   - In 5 the link is not cut: a node finds a move request in its listing
//     of the bucket, so a cut link hides the request from it. The key
//     fault on the record's writes gives the release the same outcome as
//     the cut (no answer) while a still renews and lists. Not covered is the move waiting while the
//     record names a at a later generation (a wake of a whose write landed
//     without an answer): that needs the move request to reach a between
//     such a write and its re-read, which no fault outside the process
//     times reliably.
func TestVerification2(t *testing.T) {
	srv := s3test.Start(t)
	for k, v := range srv.Env() {
		t.Setenv(k, v)
	}
	const prefix = "v2"
	fault := newKeyFault(t, srv.Endpoint)
	link := newFaultProxy(t, "a-bucket", strings.TrimPrefix(fault.srv.URL, "http://"))
	direct := s3Bucket(srv, srv.Endpoint, prefix)
	a := &member{name: "a", args: append([]string{"--node", "a", "--bucket", s3Bucket(srv, "http://"+link.addr(), prefix),
		"--listen", proctest.Free(t), "--public-admin"}, homeArgs...)}
	b := &member{name: "b", args: append([]string{"--node", "b", "--bucket", direct,
		"--listen", proctest.Free(t), "--public-admin"}, homeArgs...)}
	a.start(t)
	b.start(t)
	a.awaitPeers(t, 1)
	b.awaitPeers(t, 1)
	bucket, closeBucket, err := bucketurl.Open(context.Background(), direct)
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeBucket() })
	v := &verification{t: t, a: a, b: b, bucket: bucket, instance: a.status(t).Instance}

	// 1. Woken at home through b, twice.
	home := v.join("home", "ann")
	rec := v.awaitParked(home)
	for call := 1; call <= 2; call++ {
		wakes := sample(t, a.node(), "wasmkeep_parked_wakes_total")
		routes := sample(t, b.node(), "wasmkeep_routes_total")
		code, body, err := b.node().Get("/actor/chat/" + home.name)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, "<title>wasmkeep chat</title>", "call %d: the room's page", call)
		woken := v.record(home.name)
		assert.True(t, woken.Names("a", v.instance), "call %d: a holds the room: %+v", call, woken)
		assert.Equal(t, rec.Generation+1, woken.Generation, "call %d: the wake is an acquisition at the next generation", call)
		assert.Equal(t, wakes+1, sample(t, a.node(), "wasmkeep_parked_wakes_total"), "call %d: a woke its parked room", call)
		assert.Greater(t, sample(t, b.node(), "wasmkeep_routes_total"), routes, "call %d: b routed the request to a", call)
		assert.Equal(t, 0, b.status(t).Held, "call %d: b holds nothing", call)
		assert.Equal(t, woken, v.awaitParked(home), "call %d: the room parks again, its record kept", call)
		home.say(t, "after call "+strconv.Itoa(call))
		rec = v.awaitParked(home)
		assert.Equal(t, woken.Generation+1, rec.Generation, "call %d: the socket's message woke the room at a, once", call)
	}

	// 2. The last socket closes: the parked record is released.
	lastSocket := sample(t, a.node(), "wasmkeep_parked_releases_total", `reason="last_socket"`)
	assert.Equal(t, websocket.CloseNormalClosure, home.close(t), "the close is echoed")
	v.awaitFree(home.name)
	require.Eventually(t, func() bool {
		return sample(t, a.node(), "wasmkeep_parked_releases_total", `reason="last_socket"`) == lastSocket+1
	}, wait, 50*time.Millisecond, "the parked record was released for its last socket")

	// 3. The last socket goes while a's bucket is cut.
	cut := v.join("cut", "bob")
	rec = v.awaitParked(cut)
	lastSocket = sample(t, a.node(), "wasmkeep_parked_releases_total", `reason="last_socket"`)
	retries := sample(t, a.node(), "wasmkeep_pending_release_retries_total")
	link.cut()
	assert.Equal(t, websocket.CloseNormalClosure, cut.close(t), "the close is echoed without the bucket")
	require.Eventually(t, func() bool {
		st := a.status(t)
		return st.Parked == 0 && st.Pending == 1 && st.Sockets == 0
	}, wait, 50*time.Millisecond, "the freed slot moves the parked record to the pending releases")
	require.Eventually(t, func() bool {
		return sample(t, a.node(), "wasmkeep_pending_release_retries_total") >= retries+2
	}, wait, 50*time.Millisecond, "the release is tried again while the bucket does not answer")
	st := a.status(t)
	assert.Equal(t, 1, st.Pending, "the release is still pending")
	assert.True(t, st.LeaseValid, "the cut is shorter than the lease")
	assert.Equal(t, rec, v.record(cut.name), "no release and no wake reached the bucket")
	// The close event is tried again while the bucket does not answer, and
	// would wake the room as soon as the link is back (before the release's
	// next try): the room's state stays unreadable, so that it cannot run.
	fault.refuse(http.MethodGet, ownership.StateKey(ownership.Actor{Class: "chat", Name: cut.name}))
	link.restore()
	free := v.awaitFree(cut.name)
	assert.Equal(t, rec.Generation, free.Generation, "the freed slot's release landed; no wake did")
	require.Eventually(t, func() bool {
		return sample(t, a.node(), "wasmkeep_parked_releases_total", `reason="last_socket"`) == lastSocket+1
	}, wait, 50*time.Millisecond, "the parked record was released for its last socket")
	require.Eventually(t, func() bool { return fault.refused.Load() > 0 }, wait, 50*time.Millisecond,
		"the close event is tried, and cannot run")
	fault.refuse("", "")
	require.Eventually(t, func() bool {
		st := a.status(t)
		return !v.record(cut.name).Held && st.Parked == 0 && st.Pending == 0 && st.Unresolved == 0 && st.Held == 0
	}, wait, 50*time.Millisecond, "nothing held or pending once the bucket answers")
	assert.True(t, a.status(t).LeaseValid)

	// 5. A move of a parked room waits while its release is pending.
	moved := v.join("move", "cy")
	rec = v.awaitParked(moved)
	closed := closeCode(moved.ws)
	fault.refuse(http.MethodPut, ownership.OwnerKey(ownership.Actor{Class: "chat", Name: moved.name}))
	refused := fault.refused.Load()
	out := v.operate("cluster", "move", "chat/"+moved.name, "--to", "b", "--bucket", direct)
	assert.Contains(t, out, "requested from its holder, node a")
	require.Eventually(t, func() bool { return fault.refused.Load() >= refused+3 }, wait, 50*time.Millisecond,
		"a tries the move's release again and again")
	st = a.status(t)
	assert.Equal(t, 0, st.Parked, "the moving room is no longer parked")
	assert.Equal(t, 1, st.Pending, "its release is pending")
	select {
	case code := <-closed:
		t.Fatalf("the socket closed (%d) while the move's release was pending", code)
	default:
	}
	assert.Equal(t, rec, v.record(moved.name), "the record is still a's parked one")
	assert.Equal(t, 0, b.status(t).Held, "b has not taken the room")
	assert.Len(t, v.list(ownership.MoveRequestPrefix("a")), 1, "the move request waits")
	fault.refuse("", "")
	select {
	case code := <-closed:
		assert.Equal(t, 1012, code, "the moved room's socket closes with 1012")
	case <-time.After(wait):
		t.Fatal("the moved room's socket stayed open")
	}
	require.Eventually(t, func() bool {
		r := v.record(moved.name)
		return r.Node == "b" && r.Generation > rec.Generation
	}, wait, 50*time.Millisecond, "b takes the room")
	assert.Equal(t, 1.0, sample(t, a.node(), "wasmkeep_websocket_owner_closes_total", `reason="move"`), "the move closed the socket")
	assert.Zero(t, sample(t, a.node(), "wasmkeep_websocket_owner_closes_total", `reason="sweep"`), "the sweep closed nothing")
	assert.Equal(t, 1.0, sample(t, a.node(), "wasmkeep_parked_releases_total", `reason="move"`), "the parked record was released for the move")
	require.Eventually(t, func() bool { return len(v.list(ownership.MoveRequestPrefix("a"))) == 0 },
		wait, 50*time.Millisecond, "the move request is deleted once acted on")

	// 4. A drain of a releases a parked room's record and closes its socket.
	drained := v.join("drain", "dee")
	rec = v.awaitParked(drained)
	closed = closeCode(drained.ws)
	undelivered := sample(t, a.node(), "wasmkeep_websocket_event_failures_total", `reason="draining"`)
	out = v.operate("cluster", "drain", "a", "--bucket", direct)
	assert.Contains(t, out, "drain of node a requested")
	select {
	case code := <-closed:
		assert.Equal(t, 1012, code, "the drained node's socket closes with 1012")
	case <-time.After(wait):
		t.Fatal("the drained node's socket stayed open")
	}
	require.Eventually(t, func() bool {
		return sample(t, a.node(), "wasmkeep_websocket_event_failures_total", `reason="draining"`) > undelivered
	}, wait, 50*time.Millisecond, "the room's close event is not run on the draining node")
	free = v.awaitFree(drained.name)
	assert.Equal(t, rec.Generation, free.Generation, "released at its generation; nothing woke the room")
	require.Eventually(t, func() bool {
		return sample(t, a.node(), "wasmkeep_parked_releases_total", `reason="drain"`) == 1
	}, wait, 50*time.Millisecond, "the parked record was released for the drain")
	require.Eventually(t, func() bool {
		st := a.status(t)
		return st.Draining && st.Parked+st.Pending+st.Held == 0
	}, wait, 50*time.Millisecond, "nothing held, parked or pending on the draining node")
	require.Eventually(t, func() bool {
		return strings.Contains(a.node().Stderr.String(), "drained: no hold, parked record or pending release left")
	}, wait, 50*time.Millisecond, "a reports itself drained")
	a.node().Alive(t)
	b.node().Alive(t)
}

// verification is the cluster of TestVerification2 and the bucket it
// shares, read directly.
type verification struct {
	t        *testing.T
	a, b     *member
	bucket   ownership.Bucket
	instance ownership.InstanceID // a's
}

// The readers below (record, list, status, sample) report what goes wrong
// without stopping the test: they run in conditions that require.Eventually
// calls on goroutines of its own.

// record reads a chat room's ownership record from the bucket.
func (v *verification) record(room string) ownership.Record {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	obj, err := v.bucket.Get(ctx, ownership.OwnerKey(ownership.Actor{Class: "chat", Name: room}))
	if !assert.NoError(v.t, err) {
		return ownership.Record{}
	}
	rec, err := ownership.DecodeRecord(obj.Body)
	assert.NoError(v.t, err)
	return rec
}

func (v *verification) list(prefix string) []ownership.ListEntry {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	page, err := v.bucket.List(ctx, prefix, "", 0)
	assert.NoError(v.t, err)
	return page.Entries
}

// awaitParked waits until r's room is parked on a, its only room: out of
// memory, its record held by a. It returns the record.
func (v *verification) awaitParked(r *chatClient) ownership.Record {
	v.t.Helper()
	var rec ownership.Record
	require.Eventually(v.t, func() bool {
		st := v.a.status(v.t)
		if st.Parked != 1 || st.Held != 0 {
			return false
		}
		rec = v.record(r.name)
		return true
	}, wait, 50*time.Millisecond, "room %s parks on a", r.name)
	require.True(v.t, rec.Names("a", v.instance), "a parked room's record names a: %+v", rec)
	return rec
}

// awaitFree waits until a room's record is released, and returns it.
func (v *verification) awaitFree(room string) ownership.Record {
	v.t.Helper()
	var rec ownership.Record
	require.Eventually(v.t, func() bool {
		rec = v.record(room)
		return !rec.Held
	}, wait, 50*time.Millisecond, "room %s's record is released", room)
	assert.Equal(v.t, ownership.NodeID("a"), rec.Node, "released by a")
	return rec
}

// operate runs a wasmkeep command, as an operator would, and returns what
// it printed.
func (v *verification) operate(args ...string) string {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out, errs bytes.Buffer
	require.Equal(v.t, 0, cli.Run(ctx, args, &out, &errs), "%s: %s", strings.Join(args, " "), errs.String())
	return out.String()
}

// join opens a socket to room "v2-NAME" on a and joins it as who.
func (v *verification) join(name, who string) *chatClient {
	v.t.Helper()
	c := &chatClient{name: "v2-" + name, who: who}
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+v.a.node().Addr+"/actor/chat/"+c.name, nil)
	require.NoError(v.t, err)
	v.t.Cleanup(func() { ws.Close() })
	c.ws = ws
	c.send(v.t, map[string]string{"type": "join", "name": who})
	assert.Equal(v.t, "history", c.read(v.t).Type)
	presence := c.read(v.t)
	assert.Equal(v.t, "presence", presence.Type)
	assert.Equal(v.t, []string{who}, presence.Names)
	return c
}

// chatClient is one member of a chat room, on one socket.
type chatClient struct {
	name, who string
	ws        *websocket.Conn
}

// chatFrame is a frame the chat class sends its members.
type chatFrame struct {
	Type     string         `json:"type"`
	Messages []chat.Message `json:"messages"`
	Message  *chat.Message  `json:"message"`
	Names    []string       `json:"names"`
}

func (c *chatClient) send(t *testing.T, m map[string]string) {
	t.Helper()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, c.ws.WriteMessage(websocket.TextMessage, b))
}

func (c *chatClient) read(t *testing.T) chatFrame {
	t.Helper()
	require.NoError(t, c.ws.SetReadDeadline(time.Now().Add(wait)))
	_, b, err := c.ws.ReadMessage()
	require.NoError(t, err, "room %s", c.name)
	var f chatFrame
	require.NoError(t, json.Unmarshal(b, &f), "%s", b)
	return f
}

// say sends text and waits for the room to broadcast it back, from the
// name this socket joined with.
func (c *chatClient) say(t *testing.T, text string) {
	t.Helper()
	c.send(t, map[string]string{"type": "say", "text": text})
	f := c.read(t)
	require.Equal(t, "said", f.Type)
	require.NotNil(t, f.Message)
	assert.Equal(t, text, f.Message.Text)
	assert.Equal(t, c.who, f.Message.From, "the room knows who joined before it hibernated")
}

// close closes the socket from the client's side and returns the code the
// node echoed.
func (c *chatClient) close(t *testing.T) int {
	t.Helper()
	closed := closeCode(c.ws)
	require.NoError(t, c.ws.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(wait)))
	select {
	case code := <-closed:
		return code
	case <-time.After(wait):
		t.Fatalf("room %s: no close echoed", c.name)
		return 0
	}
}

// nodeStatus is what the tests read of a node's status page.
type nodeStatus struct {
	Instance   ownership.InstanceID `json:"instance"`
	LeaseValid bool                 `json:"lease_valid"`
	Draining   bool                 `json:"draining"`
	Held       int                  `json:"held"`
	Parked     int                  `json:"parked"`
	Pending    int                  `json:"pending"`
	Unresolved int                  `json:"unresolved"`
	Sockets    int                  `json:"sockets"`
}

func (m *member) status(t *testing.T) nodeStatus {
	t.Helper()
	var st nodeStatus
	code, body, err := m.node().Get("/status?format=json")
	if assert.NoError(t, err) && assert.Equal(t, http.StatusOK, code, body) {
		assert.NoError(t, json.Unmarshal([]byte(body), &st))
	}
	return st
}

// sample sums the samples of metric name on n whose labels include every
// one of labels (each `key="value"`); a labelled counter not counted yet
// has no sample and reads 0.
func sample(t *testing.T, n *proctest.Node, name string, labels ...string) float64 {
	t.Helper()
	code, body, err := n.Get("/metrics")
	if !assert.NoError(t, err) || !assert.Equal(t, http.StatusOK, code) {
		return 0
	}
	sum := 0.0
	for line := range strings.SplitSeq(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		var set string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.Index(rest, "} ")
			if !assert.Positive(t, end, line) {
				continue
			}
			set, rest = rest[1:end], rest[end+2:]
		case strings.HasPrefix(rest, " "):
			rest = rest[1:]
		default:
			continue // another metric whose name begins with name
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(","+set+",", ","+l+",")
		}
		if all {
			v, err := strconv.ParseFloat(rest, 64)
			assert.NoError(t, err, line)
			sum += v
		}
	}
	return sum
}

// keyFault stands between a node and the bucket, passing every request
// on, except, while refuse has named a method and a key, the node's
// requests of that kind for that key: they are answered 503 unsent, a
// request without an answer as over a cut link, while the node still
// renews its lease and lists the bucket.
type keyFault struct {
	srv     *httptest.Server
	req     atomic.Pointer[[2]string] // method, key
	refused atomic.Int64
}

func newKeyFault(t *testing.T, upstream string) *keyFault {
	t.Helper()
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	f := &keyFault{}
	// The node signs the Host it sends; the proxy keeps it.
	proxy := httputil.NewSingleHostReverseProxy(u)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := f.req.Load(); q != nil && q[1] != "" && r.Method == q[0] && strings.HasSuffix(r.URL.Path, "/"+q[1]) {
			_, _ = io.Copy(io.Discard, r.Body)
			f.refused.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// refuse leaves the node's requests with method for key unanswered; an
// empty key ends it.
func (f *keyFault) refuse(method, key string) { f.req.Store(&[2]string{method, key}) }
