package sockets

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// The memory benchmark measures what an idle socket costs the server
// process. Clients in the same process would cost memory too, so they run
// in a child process: this test binary re-executed with clientEnv set,
// which TestMain turns into a client that opens sockets when told to.
//
//	go test -run '^$' -bench IdleSocketMemory -benchtime 1x ./sockets/
//
// It reports the growth of VmRSS (after a GC that returns freed memory to
// the OS) between N/4 and N open sockets, divided by 3N/4, so one-time
// costs (pools, the listener, the first goroutines) are left out; heap and
// goroutine stacks per socket (runtime.MemStats) are reported next to it.
const clientEnv = "WASMKEEP_SOCKETS_CLIENT_URL"

func TestMain(m *testing.M) {
	if url := os.Getenv(clientEnv); url != "" {
		os.Exit(runClients(url))
	}
	if os.Getenv(serverEnv) != "" {
		os.Exit(runServer())
	}
	os.Exit(m.Run())
}

// runClients reads lines "open K" on stdin, opens K more sockets to url and
// answers "ok"; it exits (dropping every socket) when stdin ends.
func runClients(url string) int {
	in := bufio.NewScanner(os.Stdin)
	var conns []*websocket.Conn
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	for in.Scan() {
		k, err := strconv.Atoi(strings.TrimPrefix(in.Text(), "open "))
		if err != nil {
			fmt.Fprintln(os.Stderr, "client: bad command", in.Text())
			return 2
		}
		for range k {
			c, _, err := d.Dial(url, nil)
			if err != nil {
				fmt.Fprintln(os.Stderr, "client: dial:", err)
				return 1
			}
			conns = append(conns, c)
		}
		fmt.Println("ok")
	}
	return 0
}

// nopSink ignores every event.
type nopSink struct{}

func (nopSink) Opened(ownership.Actor)                          {}
func (nopSink) Gone(ownership.Actor)                            {}
func (nopSink) Message(ownership.Actor, ID, bool, []byte) error { return nil }
func (nopSink) Close(ownership.Actor, ID, int, string, bool)    {}
func (nopSink) Error(ownership.Actor, ID, error)                {}

func BenchmarkIdleSocketMemory(b *testing.B) {
	const n = 2000
	b.Run("owner", func(b *testing.B) {
		o, err := New(Config{Sink: nopSink{}})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = o.Shutdown(b.Context()) }()
		opened := make(chan struct{}, n)
		handler := func(w http.ResponseWriter, r *http.Request) {
			if _, err := o.Accept(w, r, ownership.Actor{Class: "bench", Name: "room"}, []string{"t"}); err == nil {
				opened <- struct{}{}
			}
		}
		for range b.N {
			measure(b, n, handler, opened)
		}
	})
	// The baseline: gorilla/websocket as its README shows it (default
	// buffers, one reading goroutine per socket).
	b.Run("gorilla-default", func(b *testing.B) {
		opened := make(chan struct{}, n)
		up := websocket.Upgrader{}
		handler := func(w http.ResponseWriter, r *http.Request) {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			opened <- struct{}{}
			go func() {
				defer c.Close()
				for {
					if _, _, err := c.ReadMessage(); err != nil {
						return
					}
				}
			}()
		}
		for range b.N {
			measure(b, n, handler, opened)
		}
	})
}

// measure opens n sockets from a child process to a server running handler,
// which signals opened once per accepted socket.
func measure(b *testing.B, n int, handler http.HandlerFunc, opened chan struct{}) {
	srv := httptest.NewServer(handler)
	defer srv.Close()
	child := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	child.Env = append(os.Environ(), clientEnv+"=ws"+strings.TrimPrefix(srv.URL, "http")+"/")
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = child.Wait() }()
	replies := bufio.NewScanner(stdout)
	open := func(k int) {
		fmt.Fprintf(stdin, "open %d\n", k)
		if !replies.Scan() || replies.Text() != "ok" {
			b.Fatalf("client process: %q %v", replies.Text(), replies.Err())
		}
		timeout := time.After(30 * time.Second)
		for i := range k { // the last Accepts may still be returning
			select {
			case <-opened:
			case <-timeout:
				b.Fatalf("%d of %d sockets accepted", i, k)
			}
		}
	}
	open(n / 4)
	rss1, heap1, stack1, g1 := footprint(b)
	open(n - n/4)
	rss2, heap2, stack2, g2 := footprint(b)
	k := float64(n - n/4)
	b.ReportMetric(float64(rss2-rss1)/k, "rss-B/socket")
	b.ReportMetric(float64(heap2-heap1)/k, "heap-B/socket")
	b.ReportMetric(float64(stack2-stack1)/k, "stack-B/socket")
	b.ReportMetric(float64(g2-g1)/k, "goroutines/socket")
	_ = stdin.Close()
	_, _ = io.Copy(io.Discard, stdout)
}

// footprint returns VmRSS, heap in use, stacks in use (bytes) and the
// goroutine count after a GC that returns free memory to the OS.
func footprint(b *testing.B) (rss, heap, stack int64, goroutines int) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return rss, int64(ms.HeapInuse), int64(ms.StackInuse), runtime.NumGoroutine()
}
