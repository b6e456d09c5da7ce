package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
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
		"lease-period", "lease-ttl", "lease-safety", "lease-grace"} {
		if fs.Lookup(name) == nil {
			t.Errorf("no --%s flag", name)
		}
	}
	if n == 0 || !strings.Contains(stdout, `default "127.0.0.1:8080"`) {
		t.Errorf("help:\n%s", stdout)
	}
}

func TestServeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unsafe lease", []string{"--lease-ttl", "4s"}, exitUsage, "lease lapses between renewals"},
		{"bad node", []string{"--node", "a/b"}, exitUsage, "may hold only letters"},
		{"bad listen", []string{"--listen", "8080"}, exitUsage, "--listen"},
		{"bad size", []string{"--max-body", "1GB"}, exitUsage, "max-body"},
		{"unsound bucket", []string{"--bucket", ignoringURL, "--listen", "127.0.0.1:0"}, exitProblem, "is not sound: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runTest(t, append([]string{"serve"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d containing %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
}

// TestServeRunsAndStops: serve with a directory bucket answers the counter;
// cancelling its context (what SIGINT and SIGTERM do) stops it cleanly, and
// a second run on the same directory goes on counting.
func TestServeRunsAndStops(t *testing.T) {
	dir := t.TempDir()
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
