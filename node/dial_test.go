package node_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	relayexample "github.com/wasmkeep/wasmkeep/examples/relay"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// feedService is a WebSocket service on 127.0.0.1 that relays dial: it
// hands each connection to the test.
type feedService struct {
	srv   *httptest.Server
	conns chan *websocket.Conn
}

func newFeedService(t *testing.T) *feedService {
	f := &feedService{conns: make(chan *websocket.Conn, 8)}
	up := websocket.Upgrader{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := up.Upgrade(w, r, nil); err == nil {
			f.conns <- c
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *feedService) url() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/feed" }

func (f *feedService) next(t *testing.T) *websocket.Conn {
	t.Helper()
	select {
	case c := <-f.conns:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(nodetest.Wait):
		t.Fatal("no socket reached the feed")
		return nil
	}
}

// relayNode starts a node serving the relay example, allowed to reach
// the feed.
func relayNode(t *testing.T, f *feedService, dir, id string) *nodetest.Node {
	return nodetest.Start(t, nodetest.Options{Dir: dir, Node: id, Instance: id + "-i", IdleTimeout: 50 * time.Millisecond,
		Classes: map[string]actors.Class{"relay": relayexample.Relay{}}, Configure: func(c *node.Config) {
			shortLeases(c)
			allow, err := egress.ParseAllow([]string{f.srv.Listener.Addr().String()})
			require.NoError(t, err)
			c.Egress.Allow = allow
		}})
}

// TestOutboundSocketHibernates: a relay dials its feed and goes to sleep
// with the feed's socket open (its room parked on the node); each message
// of the feed wakes it and reaches its client; the socket counts in the
// node's sockets; a feed the egress does not allow is refused.
func TestOutboundSocketHibernates(t *testing.T) {
	f := newFeedService(t)
	n := relayNode(t, f, t.TempDir(), "n1")
	u := n.URL + "/actor/relay/r1"
	require.Equal(t, "400", post(t, u+"?url="+url.QueryEscape("ws://10.1.2.3/feed"))[:3], "refused by the allow-list")
	client := n.Dial(t, "relay", "r1")
	got := post(t, u+"?url="+url.QueryEscape(f.url()))
	require.True(t, strings.HasPrefix(got, "200 following "+f.url()+" on socket "), got)
	feed := f.next(t)
	require.Equal(t, 2.0, metricValue(t, n, "wasmkeep_websockets_open"), "the client's and the feed's")

	for i, msg := range []string{"one", "two", "three"} {
		n.AwaitIdle(t, "relay/r1")
		require.Equal(t, 1, n.Status().Parked, "the relay sleeps, parked where its sockets are")
		wakes := metricValue(t, n, "wasmkeep_websocket_wakes_total")
		require.NoError(t, feed.WriteMessage(websocket.TextMessage, []byte(msg)))
		require.NoError(t, client.SetReadDeadline(time.Now().Add(nodetest.Wait)))
		_, b, err := client.ReadMessage()
		require.NoError(t, err)
		require.Equal(t, msg, string(b))
		require.Eventually(t, func() bool { return metricValue(t, n, "wasmkeep_websocket_wakes_total") == wakes+1 },
			nodetest.Wait, 5*time.Millisecond, "message %d woke the relay (counted once its event is done)", i)
	}
	_, body := get(t, u)
	require.Contains(t, body, "relayed 3")

	// The feed ends it: the relay is told, with the URL, and dials again.
	require.NoError(t, feed.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "rotate"), time.Now().Add(time.Second)))
	f.next(t)
	require.Eventually(t, func() bool {
		_, body := get(t, u)
		return strings.Contains(body, "closed 4000 "+f.url()) && strings.Contains(body, "on socket")
	}, nodetest.Wait, 10*time.Millisecond)
}

// TestOutboundSocketClosedOnDrain: a drain of the node that holds the
// relay closes its feed's socket (the feed sees 1012); the relay is told
// at its next wake, on the node that takes it, exactly once, and dials
// the feed again from there.
func TestOutboundSocketClosedOnDrain(t *testing.T) {
	f := newFeedService(t)
	dir := t.TempDir()
	n1, n2 := relayNode(t, f, dir, "n1"), relayNode(t, f, dir, "n2")
	u := "/actor/relay/r2"
	require.Equal(t, "200", post(t, n1.URL+u+"?url="+url.QueryEscape(f.url()))[:3])
	feed := f.next(t)

	b, err := dirstore.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	_, err = cluster.RequestDrain(t.Context(), b, "n1", "test", time.Now())
	require.NoError(t, err)
	require.NoError(t, feed.SetReadDeadline(time.Now().Add(nodetest.Wait)))
	_, _, err = feed.ReadMessage()
	var ce *websocket.CloseError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 1012, ce.Code, "the drain closed the feed's socket")
	require.Eventually(t, func() bool { st := n1.Status(); return st.Draining && st.Live+st.Parked+st.Pending == 0 },
		nodetest.Wait, 10*time.Millisecond, "n1 drains")

	// Its next wake is on n2: the close comes first, and it dials again.
	_, body := get(t, n2.URL+u)
	again := f.next(t)
	require.Eventually(t, func() bool {
		_, body = get(t, n2.URL+u)
		return strings.Contains(body, "on socket")
	}, nodetest.Wait, 10*time.Millisecond)
	require.Equal(t, 1, strings.Count(body, " closed "), "one close event:\n%s", body)
	require.Contains(t, body, f.url())
	require.NoError(t, again.WriteMessage(websocket.TextMessage, []byte("after")))
	require.Eventually(t, func() bool { _, body := get(t, n2.URL+u); return strings.Contains(body, "relayed 1") },
		nodetest.Wait, 10*time.Millisecond)
	// Other wakes on n2 do not tell it again.
	n2.AwaitIdle(t, "relay/r2")
	_, body = get(t, n2.URL+u)
	require.Equal(t, 1, strings.Count(body, " closed "), "still one close event:\n%s", body)
}
