// Package hostile runs real node processes and attacks them as a client
// that reaches the port would: floods of idle connections under a lowered
// file limit, and stalled request bodies. The node must keep its lease and
// serve, and its memory must stay bounded.
package hostile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/cli"
)

// nodeEnv, when set, makes this test binary a node: it holds the serve
// command's arguments as JSON.
const nodeEnv = "WASMKEEP_HOSTILE_NODE"

func TestMain(m *testing.M) {
	if args := os.Getenv(nodeEnv); args != "" {
		var a []string
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Run(ctx, append([]string{"serve"}, a...), os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// node is a node process.
type node struct {
	cmd    *exec.Cmd
	addr   string
	stderr *lockedBuffer
	exited chan struct{} // closed once the process has ended
	err    error         // its end, once exited is closed
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startNode starts a node process under the file limit nofile (0: this
// process's), serving args on a fresh directory bucket.
func startNode(t *testing.T, nofile int, args ...string) *node {
	t.Helper()
	args = append([]string{"--listen", "127.0.0.1:0", "--node", "h1", "--bucket", t.TempDir(), "--classes", t.TempDir(),
		"--cache-dir", ""}, args...)
	js, err := json.Marshal(args)
	require.NoError(t, err)
	var cmd *exec.Cmd
	if nofile > 0 {
		// Any process may lower its own limits: the shell lowers both and
		// becomes the node.
		cmd = exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0"`, nofile), os.Args[0])
	} else {
		cmd = exec.Command(os.Args[0])
	}
	cmd.Env = append(os.Environ(), nodeEnv+"="+string(js))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	addr := make(chan string, 1)
	n := launch(t, cmd, func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "serving on http://"); ok {
				a, _, _ := strings.Cut(rest, " ")
				addr <- a
			}
		}
	})
	select {
	case n.addr = <-addr:
	case <-n.exited:
		t.Fatalf("node exited: %v\n%s", n.err, n.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("node did not start\n%s", n.stderr.String())
	}
	return n
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// alive fails the test if the node has exited.
func (n *node) alive(t *testing.T) {
	t.Helper()
	select {
	case <-n.exited:
		t.Fatalf("node exited: %v\n%s", n.err, tail(n.stderr.String(), 4000))
	default:
	}
}

// get makes one request on a connection of its own.
func (n *node) get(path string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get("http://" + n.addr + path)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// rss is the node's resident memory in bytes.
func (n *node) rss(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// metric reads one sample of the node's /metrics.
func (n *node) metric(t *testing.T, sample string) float64 {
	t.Helper()
	code, body, err := n.get("/metrics")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	for line := range strings.SplitSeq(body, "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatalf("no sample %s in /metrics", sample)
	return 0
}

// TestIdleFloodUnderLowFileLimit floods a node whose file limit is 2,000
// with 3,000 connections that each ask /healthz once and then stay silent.
// Without a connection budget they take every descriptor, the directory
// store cannot open its files, the lease lapses and the node exits.
func TestIdleFloodUnderLowFileLimit(t *testing.T) {
	const limit, flood = 2000, 3000
	lease := []string{"--lease-period", "500ms", "--lease-ttl", "4s", "--lease-safety", "1s", "--lease-grace", "1s"}
	n := startNode(t, limit, lease...)
	require.Contains(t, n.stderr.String(), "file_limit=2000")

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
			c, err := net.DialTimeout("tcp", n.addr, 5*time.Second)
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
	code, body, err := n.get("/readyz")
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
		n.alive(t)
		code, body, err := n.get("/readyz")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		code, body, err = n.get("/actor/counter/flood")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		count++
		require.Equal(t, strconv.Itoa(count), strings.TrimSpace(body))
		time.Sleep(250 * time.Millisecond)
	}
	n.alive(t)
	require.NotContains(t, n.stderr.String(), "node stopped acting")
	require.Positive(t, n.metric(t, `wasmkeep_http_connections_shed_total{reason="evicted"}`))
}

// TestStalledBodiesBounded sends 1,000 request bodies that each announce
// 1 MiB, send all but its last byte and stop. The node reserves what its
// bound of bodies in flight allows and refuses the rest at once; those it
// took are cut at their deadline; its memory stays bounded, during and
// after.
func TestStalledBodiesBounded(t *testing.T) {
	const stalled, size = 1000, 1 << 20
	n := startNode(t, 0, "--max-body-inflight", "64MiB", "--body-timeout", "2s", "--body-min-rate", "1MiB")
	before := n.rss(t)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := n.rss(t); r > peak.Load() {
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
			c, err := net.DialTimeout("tcp", n.addr, 5*time.Second)
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
	after := n.rss(t)
	t.Logf("%d stalled bodies: %d refused (503), %d cut (408), %d other; RSS %d MB before, peak %d MB, %d MB after",
		stalled, refused.Load(), cut.Load(), other.Load(), before>>20, peak.Load()>>20, after>>20)
	n.alive(t)
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
	require.Zero(t, n.metric(t, "wasmkeep_http_body_inflight_bytes"))
	code, _, err := n.get("/actor/counter/after")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
}

// TestRestartAfterCrashAnswersWhileItWaits: a node killed with SIGKILL
// leaves its lease live until it lapses. The same node started again
// waits for it, and meanwhile its port answers /healthz 200 and /readyz
// 503 (it used to stay closed), then serves once the lease is its own.
func TestRestartAfterCrashAnswersWhileItWaits(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	lis.Close()
	dir := t.TempDir()
	args := []string{"--listen", addr, "--bucket", dir, "--lease-period", "500ms", "--lease-ttl", "4s", "--lease-safety", "1s", "--lease-grace", "1s"}
	first := startNode(t, 0, args...)
	code, _, err := first.get("/actor/counter/c")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, first.cmd.Process.Kill())
	<-first.exited

	second := startNodeAsync(t, args...)
	// Within the ttl and grace the old lease may still act: the new start
	// waits, answering health checks.
	var sawWaiting bool
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		health, _, herr := second.get("/healthz")
		ready, body, rerr := second.get("/readyz")
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
	code, body, err := second.get("/actor/counter/c")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "2", strings.TrimSpace(body), "the count goes on from the bucket")
	require.Contains(t, second.stderr.String(), "watching it for", "the log says why it waits")
}

// startNodeAsync starts a node process with args (which name its address)
// and returns without waiting for it to serve.
func startNodeAsync(t *testing.T, args ...string) *node {
	t.Helper()
	js, err := json.Marshal(append([]string{"--node", "h1", "--classes", t.TempDir(), "--cache-dir", ""}, args...))
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), nodeEnv+"="+string(js))
	n := launch(t, cmd, nil)
	for i, a := range args {
		if a == "--listen" {
			n.addr = args[i+1]
		}
	}
	return n
}

// launch starts cmd as a node process: its log kept, its end awaited
// (after wait, when given, has read what it needs of the process's
// output), and stopped with SIGTERM (SIGKILL 30 s on) when the test ends.
func launch(t *testing.T, cmd *exec.Cmd, wait func()) *node {
	t.Helper()
	n := &node{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = n.stderr
	require.NoError(t, cmd.Start())
	go func() {
		if wait != nil {
			wait()
		}
		n.err = cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("node did not stop within 30 s of SIGTERM")
			cmd.Process.Kill()
			<-n.exited
		}
		if t.Failed() {
			t.Logf("node log:\n%s", tail(n.stderr.String(), 4000))
		}
	})
	return n
}
