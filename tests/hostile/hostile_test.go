// Package hostile runs real node processes and attacks them as a client
// that reaches the port would: floods of idle connections under a lowered
// file limit, and stalled request bodies. The node must keep its lease and
// serve, and its memory must stay bounded.
package hostile

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/internal/proctest"
	"github.com/wasmkeep/wasmkeep/internal/s3test"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// startNode starts a node process under the file limit nofile (0: this
// process's), serving args on a fresh directory bucket.
func startNode(t *testing.T, nofile int, args ...string) *proctest.Node {
	t.Helper()
	return proctest.Start(t, proctest.Options{Args: append([]string{"--node", "h1", "--bucket", t.TempDir()}, args...), NoFile: nofile})
}

// TestIdleFloodUnderLowFileLimit floods a node whose file limit is 2,000
// with 3,000 connections that each ask /healthz once and then stay silent.
// Without a connection budget they take every descriptor, the directory
// store cannot open its files, the lease lapses and the node exits.
func TestIdleFloodUnderLowFileLimit(t *testing.T) {
	const limit, flood = 2000, 3000
	lease := []string{"--lease-period", "500ms", "--lease-ttl", "4s", "--lease-safety", "1s", "--lease-grace", "1s"}
	n := startNode(t, limit, lease...)
	require.Contains(t, n.Stderr.String(), "file_limit=2000")

	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	var answered, shed atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for range flood {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", n.Addr, 5*time.Second)
			if err != nil {
				shed.Add(1)
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				shed.Add(1)
				return
			}
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				shed.Add(1)
				return
			}
			res.Body.Close()
			answered.Add(1)
		})
	}
	wg.Wait()
	t.Logf("flood of %d: %d answered, %d shed", flood, answered.Load(), shed.Load())
	require.Positive(t, answered.Load())

	// Health checks are answered at once, in the overflow band if need be.
	code, body, err := n.Get("/readyz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	// Once the flood's connections have been quiet a second, each new
	// client takes the place of the oldest. Every connection the flood
	// left open stays open (silent) while the node goes on renewing its
	// lease for three ttls, serving new clients.
	time.Sleep(1100 * time.Millisecond)
	deadline := time.Now().Add(12 * time.Second)
	count := 0
	for time.Now().Before(deadline) {
		n.Alive(t)
		code, body, err := n.Get("/readyz")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		code, body, err = n.Get("/actor/counter/flood")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		count++
		require.Equal(t, strconv.Itoa(count), strings.TrimSpace(body))
		time.Sleep(250 * time.Millisecond)
	}
	n.Alive(t)
	require.NotContains(t, n.Stderr.String(), "node stopped acting")
	require.Positive(t, n.Metric(t, `wasmkeep_http_connections_shed_total{reason="evicted"}`))
}

// TestStalledBodiesBounded sends 1,000 request bodies that each announce
// 1 MiB, send all but its last byte and stop. The node reserves what its
// bound of bodies in flight allows and refuses the rest at once; those it
// took are cut at their deadline; its memory stays bounded, during and
// after.
func TestStalledBodiesBounded(t *testing.T) {
	const stalled, size = 1000, 1 << 20
	n := startNode(t, 0, "--max-body-inflight", "64MiB", "--body-timeout", "2s", "--body-min-rate", "1MiB")
	before := n.RSS(t)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := n.RSS(t); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	var refused, cut, other atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 200)
	chunk := []byte(strings.Repeat("a", 64<<10))
	for i := range stalled {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", n.Addr, 5*time.Second)
			if err != nil {
				other.Add(1)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(c, "POST /actor/counter/s%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", i, size)
			r := bufio.NewReader(c)
			// Send all but the last byte, unless the node answers first.
			go func() {
				for left := size - 1; left > 0; {
					k := min(left, len(chunk))
					if _, err := c.Write(chunk[:k]); err != nil {
						return
					}
					left -= k
				}
			}()
			res, err := http.ReadResponse(r, nil)
			switch {
			case err != nil:
				other.Add(1)
			case res.StatusCode == http.StatusServiceUnavailable:
				refused.Add(1)
			case res.StatusCode == http.StatusRequestTimeout:
				cut.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	after := n.RSS(t)
	t.Logf("%d stalled bodies: %d refused (503), %d cut (408), %d other; RSS %d MB before, peak %d MB, %d MB after",
		stalled, refused.Load(), cut.Load(), other.Load(), before>>20, peak.Load()>>20, after>>20)
	n.Alive(t)
	require.Zero(t, other.Load(), "every stalled body is refused or cut")
	require.Positive(t, cut.Load())
	require.Positive(t, refused.Load())
	// 64 MiB of bodies, and the connections' own buffers and goroutines
	// (without the bound: over 1 GB). The race detector's shadow memory
	// takes several times what the heap does.
	bound := int64(256 << 20)
	if raceEnabled {
		bound = 768 << 20
	}
	require.Less(t, peak.Load()-before, bound, "RSS grew by %d MB", (peak.Load()-before)>>20)
	require.Less(t, after-before, bound, "RSS after: %d MB over before", (after-before)>>20)
	require.Zero(t, n.Metric(t, "wasmkeep_http_body_inflight_bytes"))
	code, _, err := n.Get("/actor/counter/after")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
}

// TestRestartAfterCrashAnswersWhileItWaits: a node killed with SIGKILL
// leaves its lease live until it lapses. On S3 nothing proves that the
// process has ended (on a directory bucket its claim does: see
// tests/cluster TestRestartAfterCrashServesAtOnce), so the same node
// started again waits for the lease, and meanwhile its port answers
// /healthz 200 and /readyz 503 (it used to stay closed), then serves once
// the lease is its own.
func TestRestartAfterCrashAnswersWhileItWaits(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	lis.Close()
	srv := s3test.Start(t)
	for k, v := range srv.Env() {
		t.Setenv(k, v)
	}
	args := []string{"--listen", addr, "--bucket", srv.URL("restart"), "--lease-period", "500ms", "--lease-ttl", "4s", "--lease-safety", "1s", "--lease-grace", "1s"}
	first := startNode(t, 0, args...)
	code, _, err := first.Get("/actor/counter/c")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, first.Cmd.Process.Kill())
	<-first.Exited

	second := startNodeAsync(t, args...)
	// Within the ttl and grace the old lease may still act: the new start
	// waits, answering health checks.
	var sawWaiting bool
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		health, _, herr := second.Get("/healthz")
		ready, body, rerr := second.Get("/readyz")
		if herr == nil && rerr == nil && health == http.StatusOK && ready == http.StatusServiceUnavailable {
			sawWaiting = true
			require.Contains(t, body, "waiting for its lease")
		}
		if rerr == nil && ready == http.StatusOK {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.True(t, sawWaiting, "the restarted node's port did not answer while it waited for its lease")
	code, body, err := second.Get("/actor/counter/c")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "2", strings.TrimSpace(body), "the count goes on from the bucket")
	require.Contains(t, second.Stderr.String(), "watching it for", "the log says why it waits")
}

// startNodeAsync starts a node process with args (which name its address)
// and returns without waiting for it to serve.
func startNodeAsync(t *testing.T, args ...string) *proctest.Node {
	t.Helper()
	return proctest.Start(t, proctest.Options{Args: append([]string{"--node", "h1"}, args...), Async: true})
}
