package ingress_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
)

// raw is a client speaking HTTP/1.1 by hand over one connection.
type raw struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dialRaw(t *testing.T, n *nodetest.Node) *raw {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(n.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &raw{t: t, conn: conn, r: bufio.NewReader(conn)}
}

func (c *raw) send(s string) {
	c.t.Helper()
	_, err := io.WriteString(c.conn, s)
	require.NoError(c.t, err)
}

// response reads one response (its status line and headers, and a body
// of Content-Length bytes), within d.
func (c *raw) response(d time.Duration) (*http.Response, string, error) {
	c.conn.SetReadDeadline(time.Now().Add(d))
	res, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, "", err
	}
	if res.StatusCode == http.StatusContinue {
		return res, "", nil
	}
	b, err := io.ReadAll(res.Body)
	return res, string(b), err
}

// closed says whether the server closed the connection within d.
func (c *raw) closed(d time.Duration) bool {
	c.conn.SetReadDeadline(time.Now().Add(d))
	_, err := c.r.ReadByte()
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// sizeOf answers every request with the size of its body.
type sizeOf struct{}

func (sizeOf) Handle(_ context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
	return actors.Text(http.StatusOK, strconv.Itoa(len(req.Body))), nil
}

func bodyNode(t *testing.T, configure func(*node.Config)) *nodetest.Node {
	return nodetest.Start(t, nodetest.Options{Configure: configure, Classes: map[string]actors.Class{"size": sizeOf{}}})
}

func TestBodyOverMaxRefusedBeforeContinue(t *testing.T) {
	n := bodyNode(t, func(c *node.Config) { c.HTTP.MaxBody = 1000 })
	c := dialRaw(t, n)
	c.send("POST /actor/size/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\nExpect: 100-continue\r\n\r\n")
	res, body, err := c.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, "answered %d (no 100 Continue may come first)", res.StatusCode)
	require.Contains(t, body, "over 1000 bytes")

	// Within the bound: 100 Continue, then the answer.
	c = dialRaw(t, n)
	c.send("POST /actor/size/a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	res, _, err = c.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusContinue, res.StatusCode)
	c.send("hello")
	res, _, err = c.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)

	// Chunked past the bound: 413 once it passes.
	c = dialRaw(t, n)
	c.send("POST /actor/size/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	for range 3 {
		c.send(fmt.Sprintf("%x\r\n%s\r\n", 400, strings.Repeat("a", 400)))
	}
	res, body, err = c.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, body)
}

func TestBodiesInFlightBounded(t *testing.T) {
	n := bodyNode(t, func(c *node.Config) {
		c.HTTP.MaxBody, c.HTTP.MaxBodyInflight, c.HTTP.BodyTimeout = 1000, 1500, 10*time.Second
	})
	// One body of 1000 bytes stalls with 999 sent: its 1000 bytes stay
	// reserved. It asks for 100 Continue, which the server sends at the
	// body's first read, after its bytes were reserved: the answer is the
	// sign that they are.
	stalled := dialRaw(t, n)
	stalled.send("POST /actor/size/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
	res, _, err := stalled.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusContinue, res.StatusCode)
	require.Equal(t, "1000", metric(t, n, "wasmkeep_http_body_inflight_bytes"), "the stalled body's bytes were not reserved")
	stalled.send(strings.Repeat("a", 999))
	// A second one of 1000 does not fit beside it: 503 before it is read.
	c := dialRaw(t, n)
	c.send("POST /actor/size/b HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("a", 1000))
	res, _, err = c.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.NotEmpty(t, res.Header.Get("Retry-After"))
	// One of 400 fits.
	c = dialRaw(t, n)
	c.send("POST /actor/size/c HTTP/1.1\r\nHost: x\r\nContent-Length: 400\r\n\r\n" + strings.Repeat("a", 400))
	res, _, err = c.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	// Once the stalled one completes and is answered, its bytes are free.
	stalled.send("a")
	res, _, err = stalled.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	c = dialRaw(t, n)
	c.send("POST /actor/size/b HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("a", 1000))
	res, _, err = c.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
}

func TestSlowBodyCut(t *testing.T) {
	n := bodyNode(t, func(c *node.Config) {
		c.HTTP.BodyTimeout, c.HTTP.BodyMinRate = 300*time.Millisecond, 100_000
	})
	// 100 bytes: due within 0.3 s and a millisecond. A byte every 200 ms
	// would take 20 s.
	c := dialRaw(t, n)
	c.send("POST /actor/size/a HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			if _, err := c.conn.Write([]byte("a")); err != nil {
				return
			}
			// The client's pace over real TCP is what is tested: a body
			// that keeps arriving, too slowly, against the server's
			// deadline on its socket.
			time.Sleep(200 * time.Millisecond)
		}
	}()
	res, body, err := c.response(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestTimeout, res.StatusCode, body)
	require.Less(t, time.Since(start), 5*time.Second)
	require.True(t, c.closed(5*time.Second), "the connection of a cut body stays open")
	<-done

	// A chunked trickle is cut too (due within 0.3 s plus 32 KiB at the
	// rate).
	c = dialRaw(t, n)
	c.send("POST /actor/size/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	go func() {
		for range 50 {
			if _, err := c.conn.Write([]byte("1\r\na\r\n")); err != nil {
				return
			}
			// The client's pace, as above.
			time.Sleep(200 * time.Millisecond)
		}
	}()
	res, body, err = c.response(10 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestTimeout, res.StatusCode, body)
}

func TestConnectionBudget(t *testing.T) {
	metrics := prometheus.NewRegistry()
	n := bodyNode(t, func(c *node.Config) { c.HTTP.MaxConns, c.HTTP.OverflowConns, c.Metrics = 4, 2, metrics })
	// overflowEmpty waits for the server's books to count no connection in
	// the overflow band. net/http reports a connection closed to the
	// server's hook only after it closed the socket, so a client sees the
	// close first, and nothing marks the moment after: the band's gauge is
	// read, in the process, until it is zero.
	overflowEmpty := func() {
		t.Helper()
		require.Eventually(t, func() bool { return connections(t, metrics, "overflow") == 0 }, 5*time.Second, time.Millisecond,
			"connections the server closed still count in the overflow band")
	}
	get := func(c *raw, path string) (*http.Response, string) {
		t.Helper()
		c.send("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")
		res, body, err := c.response(5 * time.Second)
		require.NoError(t, err)
		return res, body
	}
	// Four idle keep-alive connections fill the band; each new one closes
	// the oldest idle one.
	var idle []*raw
	for range 4 {
		c := dialRaw(t, n)
		res, _ := get(c, "/healthz")
		require.Equal(t, http.StatusOK, res.StatusCode)
		idle = append(idle, c)
	}
	// Idle for under a second: kept (a busy client's, between requests).
	c := dialRaw(t, n)
	c.send("GET /actor/size/a HTTP/1.1\r\nHost: x\r\n\r\n")
	res, _, err := c.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "a fifth connection with the band's quiet for under a second")
	// The server measures quietMin (a second) on its wall clock, against
	// connections over real TCP: no fake clock reaches it from here.
	time.Sleep(1100 * time.Millisecond)
	c = dialRaw(t, n)
	res, _ = get(c, "/actor/size/a")
	require.Equal(t, http.StatusOK, res.StatusCode)
	// One of them was closed to make room. (Which is the oldest in the
	// server's eyes is when each went idle, after its answer was written:
	// on a loaded machine not always the order the client read them in.)
	require.Equal(t, 1, countClosed(idle), "idle connections closed to make room for one")

	// Four busy ones (a request under way) cannot be closed: the next
	// are admitted for health checks and peers only, each closed after
	// its answer, and past those closed at once.
	for _, c := range idle {
		c.conn.Close()
	}
	c.conn.Close()
	var busy []*raw
	for range 4 {
		b := dialRaw(t, n)
		b.send("POST /actor/size/a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
		busy = append(busy, b)
	}
	// Each is busy in the served band once its 100 Continue comes (sent
	// at its body's first read). A busy one the server admitted while it
	// still counted a connection closed above waits in the overflow band
	// for that place, which frees as the server sees the close.
	for _, b := range busy {
		res, _, err := b.response(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, http.StatusContinue, res.StatusCode, "a busy connection was not served")
	}
	o := dialRaw(t, n)
	o.send("GET /actor/size/a HTTP/1.1\r\nHost: x\r\n\r\n")
	res, _, err = o.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "an actor request past the band was not refused")
	o = dialRaw(t, n)
	res, _ = get(o, "/readyz")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.True(t, res.Close, "an overflow connection is kept after its answer")
	require.True(t, o.closed(5*time.Second))

	// Two requests waiting in the overflow band for a place (a second)
	// fill it; a connection past it is closed at once.
	overflowEmpty()
	held := []*raw{dialRaw(t, n), dialRaw(t, n)}
	for _, h := range held {
		h.send("GET /actor/size/a HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	// Until the server has read a held request, its connection is a
	// silent one, which a newcomer may take the place of after 200 ms (on
	// a loaded machine): nothing the client can see says it was read, so
	// a newcomer kept is closed and another tried, within the held
	// requests' second.
	require.Eventually(t, func() bool {
		x := dialRaw(t, n)
		if x.closed(100 * time.Millisecond) {
			return true
		}
		x.conn.Close()
		return false
	}, 900*time.Millisecond, 20*time.Millisecond, "a connection past every band was not closed at once")
	// The held requests get their 503 after their second, or, where the
	// server had not read them yet when a newcomer came, give way to it as
	// silent connections: either is right (the wait itself is
	// TestOverflowRequestTakesAFreedPlace's). Either way they leave the band.
	for _, h := range held {
		if res, _, err := h.response(5 * time.Second); err == nil {
			require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
		}
		require.True(t, h.closed(5*time.Second), "an overflow connection stayed after its answer")
	}

	// Silent connections in the overflow band give way to a newcomer
	// once quiet for 200 ms.
	overflowEmpty()
	silent := []*raw{dialRaw(t, n), dialRaw(t, n)}
	// The server measures overflowQuiet (200 ms) on its wall clock, as
	// quietMin above.
	time.Sleep(300 * time.Millisecond)
	o = dialRaw(t, n)
	res, _ = get(o, "/healthz")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, 1, countClosed(silent), "silent overflow connections closed to make room for one")

	for _, b := range busy {
		b.send("0123456789")
		res, _, err := b.response(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode)
	}
}

func TestOverflowRequestTakesAFreedPlace(t *testing.T) {
	n := bodyNode(t, func(c *node.Config) { c.HTTP.MaxConns, c.HTTP.OverflowConns = 1, 1 })
	busy := dialRaw(t, n)
	busy.send("POST /actor/size/a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
	// Its 100 Continue (at its body's first read) says it was admitted
	// first, and is busy in the served band.
	res, _, err := busy.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusContinue, res.StatusCode)
	waiting := dialRaw(t, n)
	waiting.send("GET /actor/size/b HTTP/1.1\r\nHost: x\r\n\r\n")
	// Nothing the client can see says that the server has read the
	// waiting request and holds it for a place: it is given 200 ms of the
	// second it may wait. Had the server not read it yet, it would find
	// the freed place when it does, and be served all the same.
	time.Sleep(200 * time.Millisecond)
	busy.conn.Close() // its place frees while the other waits
	res, body, err := waiting.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.False(t, res.Close, "a promoted connection is kept alive")
}

// A body the node does not read (a route that takes none, or a request
// refused before its body) is never waited for: the answer comes, and the
// connection ends, though the client never sends the body it announced.
func TestUnreadBodyDoesNotHoldItsConnection(t *testing.T) {
	n := bodyNode(t, nil)
	for _, req := range []string{
		"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n",
		"GET /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n",
		"PATCH /actor/size/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n",
		"POST /actor/nosuchclass/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n",
		"POST /actor/size/a HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n",
	} {
		c := dialRaw(t, n)
		c.send(req)
		res, _, err := c.response(5 * time.Second)
		require.NoError(t, err, req)
		require.True(t, res.Close, "%q: answered %d without closing", req, res.StatusCode)
		require.True(t, c.closed(5*time.Second), "%q: the connection stays open waiting for the body", req)
	}
}

// Bodies announced but not sent hold a step of the bound each, not their
// announced size: an honest body still fits beside them.
func TestAnnouncedBodiesDoNotLockOut(t *testing.T) {
	n := bodyNode(t, func(c *node.Config) { c.HTTP.MaxBody, c.HTTP.MaxBodyInflight = 100<<10, 150<<10 })
	// Each of the four asks for 100 Continue, which the server sends at
	// its body's first read, once its first step is reserved: the honest
	// one comes after all four hold theirs.
	for range 4 {
		c := dialRaw(t, n)
		c.send(fmt.Sprintf("POST /actor/size/s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", 100<<10))
		res, _, err := c.response(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, http.StatusContinue, res.StatusCode)
	}
	c := dialRaw(t, n)
	c.send("POST /actor/size/h HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n" + strings.Repeat("a", 10000))
	res, body, err := c.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Equal(t, "10000", body)
}

// A chunked body that keeps above the least rate is taken, however long
// it takes.
func TestChunkedBodyAboveTheRateTaken(t *testing.T) {
	n := bodyNode(t, func(c *node.Config) { c.HTTP.BodyTimeout, c.HTTP.BodyMinRate = 300*time.Millisecond, 100_000 })
	c := dialRaw(t, n)
	c.send("POST /actor/size/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	// 12,000 bytes every 100 ms: 1.2 times the least rate, for 1.5 s.
	chunk := strings.Repeat("a", 12000)
	for range 15 {
		c.send(fmt.Sprintf("%x\r\n%s\r\n", len(chunk), chunk))
		// The client's pace over real TCP is what is tested: a body that
		// keeps to the rate against the server's deadline on its socket.
		time.Sleep(100 * time.Millisecond)
	}
	c.send("0\r\n\r\n")
	res, body, err := c.response(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Equal(t, "180000", body)
}

// A WebSocket relayed to the node that holds its room takes two of the
// relaying node's socket slots while it lives (its client's connection and
// the one to the peer); past the bound a relay is refused with 503.
func TestRelayedSocketsCountInTheSocketBudget(t *testing.T) {
	dir := t.TempDir()
	room := map[string]actors.Class{"chat": chat.Room{}}
	a := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "a", Instance: "ai", Classes: room})
	b := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "b", Instance: "bi", Classes: room,
		Configure: func(c *node.Config) { c.Sockets.MaxSockets = 3 }})
	a.Dial(t, "chat", "relayed") // the room is held by a
	dial := func() (int, error) {
		url := "ws" + strings.TrimPrefix(b.URL, "http") + "/actor/chat/relayed"
		conn, resp, err := websocket.DefaultDialer.Dial(url, nil)
		if conn != nil {
			t.Cleanup(func() { conn.Close() })
		}
		if resp != nil {
			return resp.StatusCode, err
		}
		return 0, err
	}
	status, err := dial()
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, status)
	require.Equal(t, 2, b.Sockets(), "a relayed socket holds two slots")
	status, _ = dial()
	require.Equal(t, http.StatusServiceUnavailable, status, "a relay past the socket bound")
}

// metric reads one sample of n's /metrics ("" if absent).
func metric(t *testing.T, n *nodetest.Node, sample string) string {
	t.Helper()
	res, err := http.Get(n.URL + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// connections reads the server's count of connections in band (served
// or overflow) from its metrics registry.
func connections(t *testing.T, reg *prometheus.Registry, band string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "wasmkeep_http_connections" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "band" && l.GetValue() == band {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no wasmkeep_http_connections{band=%q}", band)
	return 0
}

// countClosed counts the connections the server closed: each is given a
// moment to show it.
func countClosed(conns []*raw) int {
	n := 0
	for _, c := range conns {
		if c.closed(time.Second) {
			n++
		}
	}
	return n
}
