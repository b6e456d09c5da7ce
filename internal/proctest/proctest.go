// Package proctest runs real node processes for tests: the test binary
// itself becomes a node (`wasmkeep serve` with the arguments it is given),
// or a program the test built does (StartCmd), so a test can signal, kill,
// stop and restart nodes as an operator would, and talk to them over
// 127.0.0.1 only.
package proctest

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
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/cli"
)

// nodeEnv, when set, makes the test binary a node: it holds the serve
// command's arguments as JSON.
const nodeEnv = "WASMKEEP_PROCTEST_NODE"

// Main is a test package's TestMain: it runs the node when the binary was
// started as one (with opts: the classes it serves beside the built-in
// ones), and the tests otherwise.
func Main(m *testing.M, opts ...cli.Option) {
	if args := os.Getenv(nodeEnv); args != "" {
		var a []string
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Run(ctx, append([]string{"serve"}, a...), os.Stdout, os.Stderr, opts...)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// Node is a node process.
type Node struct {
	Cmd    *exec.Cmd
	Addr   string
	Stderr *Buffer
	// Exited is closed once the process has ended; Err is its end then.
	Exited chan struct{}
	Err    error
}

// Buffer is a strings.Builder safe for concurrent use: a process's log.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Options shape a node process.
type Options struct {
	// Args are serve's arguments (--node, --bucket, the lease durations);
	// --classes and --cache-dir are given unless Args has them, and
	// --listen 127.0.0.1:0 unless Args names a --listen.
	Args []string
	// NoFile, when positive, lowers the process's file limit to it.
	NoFile int
	// Async: return at once, without waiting for the node to serve (Addr
	// is then the --listen of Args).
	Async bool
}

// Free returns an address of 127.0.0.1 nothing listens on now: one a
// node restarted on keeps.
func Free(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// Start starts a node process as o says; it is stopped with SIGTERM
// (SIGKILL 30 s on) when the test ends.
func Start(t testing.TB, o Options) *Node {
	t.Helper()
	args := o.Args
	if !has(args, "--classes") {
		args = append(args, "--classes", t.TempDir())
	}
	if !has(args, "--cache-dir") {
		args = append(args, "--cache-dir", "")
	}
	listen := value(args, "--listen")
	if listen == "" {
		args = append(args, "--listen", "127.0.0.1:0")
	}
	js, err := json.Marshal(args)
	require.NoError(t, err)
	var cmd *exec.Cmd
	if o.NoFile > 0 {
		// Any process may lower its own limits: the shell lowers both and
		// becomes the node.
		cmd = exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0"`, o.NoFile), os.Args[0])
	} else {
		cmd = exec.Command(os.Args[0])
	}
	cmd.Env = append(os.Environ(), nodeEnv+"="+string(js))
	if o.Async {
		n := launch(t, cmd, nil)
		n.Addr = listen
		return n
	}
	return StartCmd(t, cmd)
}

// StartCmd starts cmd, a program that runs `wasmkeep serve` (a build of
// cmd/wasmkeep, or a program of your own on package cli, its arguments
// set), and waits for it to serve, as Start does: its Addr is the address
// the node says it serves on. It is stopped with SIGTERM (SIGKILL 30 s on)
// when the test ends.
func StartCmd(t testing.TB, cmd *exec.Cmd) *Node {
	t.Helper()
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
	case n.Addr = <-addr:
	case <-n.Exited:
		t.Fatalf("node exited: %v\n%s", n.Err, n.Stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("node did not start\n%s", n.Stderr.String())
	}
	return n
}

func has(args []string, flag string) bool { return value(args, flag) != "" || contains(args, flag) }

func contains(args []string, s string) bool {
	for _, a := range args {
		if a == s {
			return true
		}
	}
	return false
}

func value(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// launch starts cmd as a node process: its log kept, its end awaited
// (after wait, when given, has read what it needs of the process's
// output), and stopped with SIGTERM (SIGKILL 30 s on) when the test ends.
func launch(t testing.TB, cmd *exec.Cmd, wait func()) *Node {
	t.Helper()
	n := &Node{Cmd: cmd, Stderr: &Buffer{}, Exited: make(chan struct{})}
	cmd.Stderr = n.Stderr
	require.NoError(t, cmd.Start())
	go func() {
		if wait != nil {
			wait()
		}
		n.Err = cmd.Wait()
		close(n.Exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // if a test stopped it
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.Exited:
		case <-time.After(30 * time.Second):
			t.Errorf("node did not stop within 30 s of SIGTERM")
			_ = cmd.Process.Kill()
			<-n.Exited
		}
		if t.Failed() {
			t.Logf("node %s log:\n%s", n.Addr, Tail(n.Stderr.String(), 4000))
		}
	})
	return n
}

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// Alive fails the test if the node has exited.
func (n *Node) Alive(t testing.TB) {
	t.Helper()
	select {
	case <-n.Exited:
		t.Fatalf("node exited: %v\n%s", n.Err, Tail(n.Stderr.String(), 4000))
	default:
	}
}

// Signal sends the node process sig.
func (n *Node) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	require.NoError(t, n.Cmd.Process.Signal(sig))
}

// Wait waits for the node to exit, at most d, and returns its exit code.
func (n *Node) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-n.Exited:
	case <-time.After(d):
		t.Fatalf("node %s did not exit within %s\n%s", n.Addr, d, Tail(n.Stderr.String(), 4000))
	}
	return n.Cmd.ProcessState.ExitCode()
}

// Get makes one request on a connection of its own.
func (n *Node) Get(path string) (int, string, error) {
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get("http://" + n.Addr + path)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// Post posts body to path, on a connection of its own.
func (n *Node) Post(path, body string) (int, string, error) {
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Post("http://"+n.Addr+path, "text/plain", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// RSS is the node's resident memory in bytes.
func (n *Node) RSS(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.Cmd.Process.Pid))
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

// Metric reads one sample of the node's /metrics.
func (n *Node) Metric(t testing.TB, sample string) float64 {
	t.Helper()
	code, body, err := n.Get("/metrics")
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
