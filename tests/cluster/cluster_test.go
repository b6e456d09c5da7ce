// Package cluster runs clusters of real node processes on one directory
// bucket and operates them as an operator would: rolling restarts that
// drain each node before it stops, a node killed, a node hung. Every
// acknowledged write must survive, and a client that retries as a balancer
// does must be served throughout.
package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/cli"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/examples/reminders"
	"github.com/wasmkeep/wasmkeep/internal/proctest"
	"github.com/wasmkeep/wasmkeep/internal/s3test"
)

func TestMain(m *testing.M) {
	proctest.Main(m, cli.WithClass("chat", chat.Room{}), cli.WithClass("reminders", reminders.Reminders{}), cli.WithFront(chat.Front{}))
}

// lease are short lease durations: a dead node is fenced 5 s after its
// last renewal.
var lease = []string{"--lease-period", "500ms", "--lease-ttl", "4s", "--lease-safety", "1s", "--lease-grace", "1s"}

// member is one node of a test cluster: its arguments, kept for restarts.
type member struct {
	name string
	args []string
	p    atomic.Pointer[proctest.Node] // replaced by a restart
}

// node is the member's process now.
func (m *member) node() *proctest.Node { return m.p.Load() }

// startCluster starts n nodes on one directory bucket, each on an address
// of its own that it keeps across restarts, and waits until every node
// sees every other live.
func startCluster(t *testing.T, n int, extra ...string) []*member {
	t.Helper()
	return startClusterOn(t, t.TempDir(), n, extra...)
}

// startS3Cluster is startCluster on a bucket of a versitygw of the test's
// own. A test that hangs a node (SIGSTOP) runs on it: nodes on one
// directory bucket share a lock around each write, and one stopped while
// it holds it would stop the others' writes too (ownership/dirstore).
func startS3Cluster(t *testing.T, n int, extra ...string) []*member {
	t.Helper()
	srv := s3test.Start(t)
	for k, v := range srv.Env() {
		t.Setenv(k, v)
	}
	return startClusterOn(t, s3Bucket(srv, srv.Endpoint, "cluster"), n, extra...)
}

// startClusterOn starts n nodes on bucket (see startCluster).
func startClusterOn(t *testing.T, bucket string, n int, extra ...string) []*member {
	t.Helper()
	ms := make([]*member, n)
	for i := range ms {
		name := fmt.Sprintf("n%d", i+1)
		args := append([]string{"--node", name, "--bucket", bucket, "--listen", proctest.Free(t), "--public-admin"}, lease...)
		ms[i] = &member{name: name, args: append(args, extra...)}
		ms[i].start(t)
	}
	for _, m := range ms {
		m.awaitPeers(t, n-1)
	}
	return ms
}

func (m *member) start(t *testing.T) {
	t.Helper()
	m.p.Store(proctest.Start(t, proctest.Options{Args: m.args}))
	m.awaitReady(t)
}

func (m *member) awaitReady(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		code, _, err := m.node().Get("/readyz")
		return err == nil && code == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "%s ready", m.name)
}

// awaitPeers waits until the node's tree page lists want live peers in
// its status (through /debug/tree's JSON sibling, the status page).
func (m *member) awaitPeers(t *testing.T, want int) {
	t.Helper()
	require.Eventually(t, func() bool {
		code, body, err := m.node().Get("/status?format=json")
		return err == nil && code == http.StatusOK && strings.Count(body, `"live":true`) >= want
	}, 30*time.Second, 50*time.Millisecond, "%s sees %d live peers", m.name, want)
}

// closeCode reads ws until it ends and then sends its close code (-1 for
// an end without a close frame).
func closeCode(ws *websocket.Conn) <-chan int {
	closed := make(chan int, 1)
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				code := -1
				if ce, ok := err.(*websocket.CloseError); ok {
					code = ce.Code
				}
				closed <- code
				return
			}
		}
	}()
	return closed
}

// TestKilledNodeFailsOver kills a node holding counters (SIGKILL: nothing
// is released): requests for them through the other nodes wait for the
// peers to fence it (5 s here) and are then served with every
// acknowledged count, none answered 503.
func TestKilledNodeFailsOver(t *testing.T) {
	ms := startCluster(t, 3)
	for i := range 10 {
		code, body, err := ms[0].node().Get(fmt.Sprintf("/actor/counter/k%d", i))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
	}
	ms[0].node().Signal(t, syscall.SIGKILL)
	ms[0].node().Wait(t, 10*time.Second)
	start := time.Now()
	for i := range 10 {
		code, body, err := ms[1+i%2].node().Get(fmt.Sprintf("/actor/counter/k%d", i))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "k%d: %s", i, body)
		require.Equal(t, "2", strings.TrimSpace(body), "k%d: the count n1 acknowledged survives", i)
	}
	t.Logf("served after the kill in %s", time.Since(start).Round(time.Millisecond))
}

// TestKilledNodesAlarmsFire kills a node holding actors whose alarms are
// due two seconds later (SIGKILL: nothing is released): each alarm fires
// once, on another node, within the failover bound (the peers fence the
// node 5 s after its last renewal) plus 1 s of the killing.
func TestKilledNodesAlarmsFire(t *testing.T) {
	ms := startCluster(t, 3)
	const actors = 6
	for i := range actors {
		code, body, err := ms[0].node().Post(fmt.Sprintf("/actor/reminders/k%d?in=2s&text=hi", i), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, code, body)
	}
	killed := time.Now()
	ms[0].node().Signal(t, syscall.SIGKILL)
	ms[0].node().Wait(t, 10*time.Second)
	for i := range actors {
		via := ms[1+i%2]
		var body string
		require.Eventually(t, func() bool {
			var code int
			var err error
			code, body, err = via.node().Get(fmt.Sprintf("/actor/reminders/k%d", i))
			return err == nil && code == http.StatusOK && strings.HasPrefix(body, "fired r1 ")
		}, 30*time.Second, 100*time.Millisecond, "k%d's reminder fired", i)
		require.Equal(t, 1, strings.Count(body, "fired "), "k%d fired once: %s", i, body)
		require.NotContains(t, body, "due ", "k%d's alarm ended with its event", i)
		at, err := time.Parse(time.RFC3339Nano, strings.Fields(body)[2])
		require.NoError(t, err, body)
		took := at.Sub(killed)
		t.Logf("k%d fired %s after the kill: %s", i, took.Round(time.Millisecond), strings.TrimSpace(body))
		require.Less(t, took, 6*time.Second+500*time.Millisecond, "within the failover bound plus 1 s (and a poll's rounding)")
	}
}

// TestHungNodeFailsOver stops a node holding counters (SIGSTOP: it takes
// connections, answers nothing and renews no lease), in clusters of two,
// three and four: requests through the other nodes, some sent before the
// peers take it for dead and held in their forwards, are served once a
// peer fences the hung node (whichever peer it is: a fence by another is
// read at once), within the failover wait, each count going on from what
// the hung node acknowledged; the hung node, resumed, finds itself fenced
// and exits non-zero without acting. The failover wait is 9 s here: more
// than the 5 s after which the hung node is taken for dead plus a listing
// and a read (1 s), less than twice the 5 s (a watcher that started its 5 s
// again when another node's fence changed the lease would answer 503).
func TestHungNodeFailsOver(t *testing.T) {
	for _, size := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("%d nodes", size), func(t *testing.T) {
			ms := startS3Cluster(t, size, "--failover-wait", "9s")
			hung := ms[size-1]
			const counters = 6
			for i := range counters {
				code, body, err := hung.node().Get(fmt.Sprintf("/actor/counter/h%d", i))
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, code, body)
			}
			hung.node().Signal(t, syscall.SIGSTOP)
			start := time.Now()
			var wg sync.WaitGroup
			for i := range counters {
				// Through every peer in turn, the first ones at once: they
				// wait in forwards to the hung node until it is fenced.
				via := ms[i%(size-1)]
				wg.Go(func() {
					code, body, err := via.node().Get(fmt.Sprintf("/actor/counter/h%d", i))
					assert.NoError(t, err)
					assert.Equal(t, http.StatusOK, code, "h%d through %s: %s", i, via.name, body)
					assert.Equal(t, "2", strings.TrimSpace(body), "h%d through %s", i, via.name)
				})
			}
			wg.Wait()
			t.Logf("%d counters served through %d peers after the hang, within %s", counters, size-1, time.Since(start).Round(time.Millisecond))
			hung.node().Signal(t, syscall.SIGCONT)
			assert.NotEqual(t, 0, hung.node().Wait(t, 30*time.Second), "the fenced node exits non-zero")
		})
	}
}

// TestRestartAfterCrashServesAtOnce kills a node on a directory bucket
// (SIGKILL: its lease stays live for ttl + grace, a minute and a half
// here) and starts it again: the node's claim beside the store is free,
// which proves that the process before has ended, so the new one takes the
// lease at once and serves, with every count acknowledged. A second process
// started while the node runs is refused, naming why.
func TestRestartAfterCrashServesAtOnce(t *testing.T) {
	dir := t.TempDir()
	m := &member{name: "n1", args: []string{"--node", "n1", "--bucket", dir, "--listen", proctest.Free(t),
		"--lease-ttl", "60s", "--lease-grace", "30s", "--lease-safety", "5s", "--lease-period", "5s"}}
	m.start(t)
	code, body, err := m.node().Get("/actor/counter/c")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)

	twin := proctest.Start(t, proctest.Options{Args: []string{"--node", "n1", "--bucket", dir, "--listen", proctest.Free(t)}, Async: true})
	assert.Equal(t, 1, twin.Wait(t, 30*time.Second), "a second process of a running node exits 1")
	assert.Contains(t, twin.Stderr.String(), "served by another process", "and says why")

	m.node().Signal(t, syscall.SIGKILL)
	m.node().Wait(t, 10*time.Second)
	start := time.Now()
	m.start(t) // proctest.Start waits a minute at most: less than the old lease's ttl
	assert.Contains(t, m.node().Stderr.String(), "which has ended (its claim on the node is free): taking the lease at once")
	code, body, err = m.node().Get("/actor/counter/c")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "2", strings.TrimSpace(body))
	t.Logf("served again %s after the crash", time.Since(start).Round(time.Millisecond))
}

// TestFrontCallWakesAParkedRoom: three node processes with the chat's
// front. A room whose person is connected to n1 through its front parks
// there; a call to it from n2's front and from n3's wakes it on n1, where
// the person hears both, and neither n2 nor n3 ever holds it.
func TestFrontCallWakesAParkedRoom(t *testing.T) {
	ms := startCluster(t, 3, "--idle-timeout", "300ms")
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+ms[0].node().Addr+"/room/hall", nil)
	require.NoError(t, err)
	defer ws.Close()
	require.NoError(t, ws.WriteJSON(map[string]string{"type": "join", "name": "ada"}))
	heard := make(chan string, 8)
	go func() {
		for {
			var f struct {
				Type    string        `json:"type"`
				Message *chat.Message `json:"message"`
			}
			if err := ws.ReadJSON(&f); err != nil {
				close(heard)
				return
			}
			if f.Type == "said" {
				heard <- f.Message.Text
			}
		}
	}()
	parked := func(m *member) float64 {
		_, body, err := m.node().Get("/metrics")
		require.NoError(t, err)
		for l := range strings.SplitSeq(body, "\n") {
			if v, ok := strings.CutPrefix(l, "wasmkeep_parked_records "); ok {
				f, err := strconv.ParseFloat(v, 64)
				require.NoError(t, err)
				return f
			}
		}
		return 0
	}
	for _, via := range ms[1:] {
		require.Eventually(t, func() bool { return parked(ms[0]) == 1 }, 10*time.Second, 20*time.Millisecond, "the room parks on n1")
		code, body, err := via.node().Post("/room/hall/say?from=ops&text=via+"+via.name, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		select {
		case got := <-heard:
			require.Equal(t, "via "+via.name, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("the person on n1 did not hear the call from %s's front", via.name)
		}
	}
	for _, m := range ms[1:] {
		code, body, err := m.node().Get("/status?format=json")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
		var st struct {
			Held   int `json:"held"`
			Parked int `json:"parked"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &st))
		require.Zero(t, st.Held+st.Parked, "%s holds nothing: %s", m.name, body)
	}
}
