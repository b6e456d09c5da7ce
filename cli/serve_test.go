package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
)

// lockedBuffer is a bytes.Buffer safe for a node's goroutines and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

func TestServeHelp(t *testing.T) {
	code, stdout, _ := runTest(t, "serve", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	setupServe(fs)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(stdout, "  -"+f.Name+" ") && !strings.Contains(stdout, "  -"+f.Name+"\n") {
			t.Errorf("--help does not document --%s", f.Name)
		}
	})
	for _, name := range []string{"listen", "bucket", "node", "takeover", "idle-timeout", "max-resident", "max-body",
		"lease-period", "lease-ttl", "lease-safety", "lease-grace", "classes", "cache-dir", "wasm-memory", "wasm-event-timeout"} {
		if fs.Lookup(name) == nil {
			t.Errorf("no --%s flag", name)
		}
	}
	if n == 0 || !strings.Contains(stdout, `default "127.0.0.1:8080"`) {
		t.Errorf("help:\n%s", stdout)
	}
}

// shortKeyFile writes a cluster key too short to use.
func shortKeyFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte(" too short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unsafe lease", []string{"--lease-ttl", "4s"}, exitUsage, "lease lapses between renewals"},
		{"sockets over the file limit", []string{"--max-sockets", "2000000000", "--bucket", "mem://", "--listen", "127.0.0.1:0"}, exitUsage, "descriptors the file limit"},
		{"conns over the file limit", []string{"--max-conns", "2000000000", "--bucket", "mem://", "--listen", "127.0.0.1:0"}, exitUsage, "raise the limit (ulimit -n)"},
		{"bodies in flight under a body", []string{"--max-body", "2MiB", "--max-body-inflight", "1MiB"}, exitUsage, "must be at least --max-body"},
		{"bad node", []string{"--node", "a/b"}, exitUsage, "may hold only letters"},
		{"bad listen", []string{"--listen", "8080"}, exitUsage, `--listen "8080": want host:port, such as 127.0.0.1:8080 (or :8080 for every interface)`},
		{"bad size", []string{"--max-body", "1GB"}, exitUsage, "max-body"},
		{"no wasm memory", []string{"--wasm-memory", "0"}, exitUsage, "--wasm-memory 0: must be positive"},
		{"tiny wasm memory", []string{"--wasm-memory", "1KiB"}, exitUsage, "under one 64 KiB page"},
		{"cache in bucket", []string{"--bucket", "data", "--cache-dir", "data/.cache/wasm"}, exitUsage, "lies in the bucket directory data"},
		{"cache in sqlite bucket", []string{"--bucket", "sqlite:data", "--cache-dir", "data/.cache/wasm"}, exitUsage, "lies in the bucket directory data"},
		{"no wasm time", []string{"--wasm-event-timeout", "0s"}, exitUsage, "--wasm-event-timeout 0s: must be positive"},
		{"classes not a directory", []string{"--classes", "serve.go", "--listen", "127.0.0.1:0", "--bucket", "mem://"}, exitProblem, "--classes: "},
		{"unsound bucket", []string{"--bucket", ignoringURL, "--listen", "127.0.0.1:0"}, exitProblem, "is not sound: missing"},
		{"short cluster key", []string{"--cluster-key-file", shortKeyFile(t), "--listen", "127.0.0.1:0", "--bucket", "mem://"}, exitUsage, "9 bytes, under 16"},
		{"missing cluster key", []string{"--cluster-key-file", "no-such-key", "--listen", "127.0.0.1:0", "--bucket", "mem://"}, exitProblem, "--cluster-key-file: open no-such-key"},
		{"no call time", []string{"--call-timeout", "0s"}, exitUsage, "--call-timeout 0s: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runTest(t, append([]string{"serve"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) || (tc.name == "bad listen" && strings.Contains(stderr, "node id")) {
				t.Fatalf("exit %d, stderr %q; want %d containing %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
}

// TestServeRunsAndStops: serve with a directory bucket, and with an SQLite
// one, answers the counter; cancelling its context (what SIGINT and SIGTERM
// do) stops it cleanly, and a second run on the same directory goes on
// counting.
func TestServeRunsAndStops(t *testing.T) {
	for _, bucket := range []string{t.TempDir(), "sqlite://" + t.TempDir()} {
		t.Run(bucket, func(t *testing.T) { serveRunsAndStops(t, bucket) })
	}
}

func serveRunsAndStops(t *testing.T, dir string) {
	for i, want := range []string{"1", "2"} {
		ctx, cancel := context.WithCancel(t.Context())
		var stdout, stderr lockedBuffer
		addrs := make(chan string, 1)
		e := testEnv(new(bytes.Buffer), new(bytes.Buffer))
		e.out, e.err = &stdout, &stderr
		e.started = func(addr string) { addrs <- addr }
		codes := make(chan int, 1)
		go func() {
			codes <- runEnv(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--bucket", dir, "--node", "n1"}, e)
		}()
		var addr string
		select {
		case addr = <-addrs:
		case code := <-codes:
			t.Fatalf("run %d: exit %d before serving: %s", i, code, stderr.String())
		}
		resp, err := http.Get("http://" + addr + "/actor/counter/c")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != want {
			t.Fatalf("run %d: %d %q, want %q", i, resp.StatusCode, body, want)
		}
		cancel()
		if code := <-codes; code != exitOK {
			t.Fatalf("run %d: exit %d after stop: %s", i, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "stopped cleanly") || !strings.Contains(stdout.String(), "serving on http://") {
			t.Fatalf("run %d: stdout %q, stderr %q", i, stdout.String(), stderr.String())
		}
	}
}

// buildCounterWasm builds the wasm counter example into a file in a fresh
// temporary directory and returns its path.
func buildCounterWasm(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "counter-wasm.wasm")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-buildmode=c-shared", "-o", out, "../examples/counter-wasm")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the wasm counter: %v\n%s", err, msg)
	}
	return out
}

// serving is one `wasmkeep serve` run in the test's process.
type serving struct {
	addr           string
	stdout, stderr *lockedBuffer
	cancel         context.CancelFunc
	codes          chan int
}

// startServe runs `wasmkeep serve args...` and returns once it serves.
func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	return startServeWith(t, nil, args...)
}

// startServeWith is startServe for a program that embeds the node with opts.
func startServeWith(t *testing.T, opts []Option, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &serving{stdout: new(lockedBuffer), stderr: new(lockedBuffer), cancel: cancel, codes: make(chan int, 1)}
	addrs := make(chan string, 1)
	e := testEnv(new(bytes.Buffer), new(bytes.Buffer))
	for _, o := range opts {
		o(&e)
	}
	e.out, e.err = s.stdout, s.stderr
	e.started = func(addr string) { addrs <- addr }
	go func() { s.codes <- runEnv(ctx, append([]string{"serve"}, args...), e) }()
	select {
	case s.addr = <-addrs:
	case code := <-s.codes:
		cancel()
		t.Fatalf("exit %d before serving: %s", code, s.stderr.String())
	}
	return s
}

// stop stops the node as SIGINT does and expects a clean exit.
func (s *serving) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	if code := <-s.codes; code != exitOK {
		t.Fatalf("exit %d after stop: %s", code, s.stderr.String())
	}
}

// get expects 200 and want from path.
func (s *serving) get(t *testing.T, path, want string) {
	t.Helper()
	resp, err := http.Get("http://" + s.addr + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != want {
		t.Fatalf("GET %s: %d %q, want 200 %q", path, resp.StatusCode, body, want)
	}
}

// TestServeWasmClasses: every NAME.wasm in --classes is served as class
// NAME next to the built-in Go classes, its state survives a restart, a
// module compiled on an earlier start compiles after the node serves, and
// a name taken by a Go class or a file that is not wasm stops the start,
// naming the file.
func TestServeWasmClasses(t *testing.T) {
	wasm, err := os.ReadFile(buildCounterWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	classes, bucket, cache := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(classes, "counter-wasm.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(classes, "README"), []byte("not a class"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The extension in any case: a file named on a system that writes it
	// in capitals is served too.
	if err := os.WriteFile(filepath.Join(classes, "Upper.WASM"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--listen", "127.0.0.1:0", "--bucket", bucket, "--node", "n1", "--classes", classes, "--cache-dir", cache}

	s := startServe(t, args...)
	for _, want := range []string{"1", "2", "3"} {
		s.get(t, "/actor/counter-wasm/w", want)
	}
	s.get(t, "/actor/counter-wasm/w?read", "3")
	s.get(t, "/actor/counter/w", "1") // the Go counter: another class, another count
	s.get(t, "/actor/Upper/w", "1")
	// The wasm runtime's metrics are the node's (ABI.md names them).
	resp, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `wasmkeep_wasm_shared_guests{class="counter-wasm"}`) {
		t.Errorf("/metrics has no wasm runtime series")
	}
	s.stop(t)
	if log := s.stderr.String(); !strings.Contains(log, "wasm=\"[Upper counter-wasm]\"") || !strings.Contains(log, `go="[counter kv sql]"`) {
		t.Fatalf("the classes served are not logged:\n%s", log)
	}

	if log := s.stderr.String(); !strings.Contains(log, "class=counter-wasm isolation=class declared=class compiled_after_start=false") {
		t.Errorf("a module met for the first time is not compiled before the node serves:\n%s", log)
	}

	// Started again, the same build with the same module: it compiles
	// after the node serves, and its first event waits for it.
	s = startServe(t, args...)
	s.get(t, "/actor/counter-wasm/w", "4")
	s.stop(t)
	if log := s.stderr.String(); !strings.Contains(log, "class=counter-wasm isolation=class declared=class compiled_after_start=true") {
		t.Errorf("a module compiled on an earlier start is not compiled after the node serves:\n%s", log)
	}

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name, file string
			content    []byte
			stderr     []string
		}{
			{"go class name", "counter.wasm", wasm, []string{"counter.wasm", `wasm class "counter"`, `built-in Go class "counter"`}},
			{"corrupt", "broken.wasm", []byte("\x00asm but not really"), []string{"broken.wasm", `class "broken"`}},
			{"bad name", "\x01.wasm", wasm, []string{"not a class name", "control character"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, tc.file), tc.content, 0o644); err != nil {
					t.Fatal(err)
				}
				code, _, stderr := runTest(t, "serve", "--listen", "127.0.0.1:0", "--bucket", t.TempDir(), "--classes", dir, "--cache-dir", cache)
				if code != exitProblem {
					t.Errorf("exit %d, want %d", code, exitProblem)
				}
				for _, want := range append(tc.stderr, filepath.Join(dir, tc.file)) {
					if !strings.Contains(stderr, want) {
						t.Errorf("stderr %q does not contain %q", stderr, want)
					}
				}
			})
		}
	})
}

// TestServeNoClassesDir: with --classes "" the node serves the Go classes
// alone and says so, as it does when the default directory is missing;
// a --classes directory that is missing (a typo) stops the start, naming
// it, rather than serving without the classes it was meant to.
func TestServeNoClassesDir(t *testing.T) {
	s := startServe(t, "--listen", "127.0.0.1:0", "--bucket", t.TempDir(), "--node", "n1", "--classes", "", "--cache-dir", "")
	s.get(t, "/actor/counter/c", "1")
	s.stop(t)
	if log := s.stderr.String(); !strings.Contains(log, "no wasm classes: --classes is empty") || !strings.Contains(log, "wasm=[]") {
		t.Fatalf("log:\n%s", log)
	}
	missing := filepath.Join(t.TempDir(), "typo")
	code, _, stderr := runTest(t, "serve", "--listen", "127.0.0.1:0", "--bucket", t.TempDir(), "--classes", missing, "--cache-dir", "")
	if code != exitProblem || !strings.Contains(stderr, "--classes "+missing+": no such directory") {
		t.Fatalf("a missing --classes: exit %d, stderr %q", code, stderr)
	}
}

// TestServeWithGoClass: a program of its own registers a Go-native class
// and runs the standard node; the class is served next to the built-in
// ones, with durable storage; a bad or taken name stops the start.
func TestServeWithGoClass(t *testing.T) {
	visits := actors.ClassFunc(func(_ context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
		n := len(mustGetValue(st, "v")) + 1
		if err := st.Put("v", []byte(strings.Repeat("x", n))); err != nil {
			return nil, err
		}
		return actors.Text(http.StatusOK, fmt.Sprintf("%s %d\n", req.Query.Get("who"), n)), nil
	})
	bucket := t.TempDir()
	args := []string{"--listen", "127.0.0.1:0", "--bucket", bucket, "--node", "n1", "--classes", "", "--cache-dir", ""}
	s := startServeWith(t, []Option{WithClass("visits", visits)}, args...)
	s.get(t, "/actor/visits/lobby?who=ada", "ada 1")
	s.get(t, "/actor/visits/lobby?who=bob", "bob 2")
	s.get(t, "/actor/counter/c", "1") // the built-in classes are still there
	s.stop(t)
	s = startServeWith(t, []Option{WithClass("visits", visits)}, args...)
	s.get(t, "/actor/visits/lobby?who=cy", "cy 3")
	s.stop(t)

	for name, opt := range map[string]Option{
		"taken by a built-in class": WithClass("counter", visits),
		"not a class name":          WithClass("bad\x01name", visits),
	} {
		var out, errOut bytes.Buffer
		e := testEnv(&out, &errOut)
		opt(&e)
		code := runEnv(t.Context(), append([]string{"serve"}, args...), e)
		if code == exitOK || !strings.Contains(errOut.String(), "class") {
			t.Errorf("%s: exit %d, stderr %q; want a refusal naming the class", name, code, errOut.String())
		}
	}
}

func mustGetValue(st actors.Storage, key string) []byte {
	v, _ := st.Get(key)
	return v
}

// TestServeLogJSON: --log-format json writes every log record as one JSON
// object a line; a format it does not know is a usage error.
func TestServeLogJSON(t *testing.T) {
	s := startServe(t, "--listen", "127.0.0.1:0", "--bucket", t.TempDir(), "--node", "n1", "--classes", "", "--cache-dir", "", "--log-format", "json")
	s.get(t, "/actor/counter/c", "1")
	s.stop(t)
	lines := strings.Split(strings.TrimSpace(s.stderr.String()), "\n")
	var sawServing bool
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q (%v)", l, err)
		}
		sawServing = sawServing || rec["msg"] == "node serving"
	}
	if !sawServing {
		t.Errorf("no \"node serving\" record in:\n%s", s.stderr.String())
	}
	if code, _, stderr := runTest(t, "serve", "--log-format", "xml"); code != exitUsage || !strings.Contains(stderr, "want text or json") {
		t.Errorf("--log-format xml: exit %d, stderr %q", code, stderr)
	}
}
