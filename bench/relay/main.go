// Command relay measures what reaching an actor through a node that does
// not hold it costs: two `wasmkeep serve` processes on one directory
// bucket; a counter and a chat room held by n1; the same load sent to n1
// directly and through n2 (which forwards the requests and relays the
// WebSocket), alternating, REPS times. It reports requests/s, p50 and p99
// of the HTTP runs, round trips/s of the socket echo, and the CPU both
// node processes spent per request or round trip (from /proc), with the
// ratios relayed / direct.
//
//	go run ./bench/relay -bin /tmp/wasmkeep [-requests 20000] [-echoes 20000] [-reps 3]
//
// Every process is started here on 127.0.0.1 and stopped by PID; every
// run is bounded in count.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

func main() {
	bin := flag.String("bin", "wasmkeep", "the wasmkeep binary")
	requests := flag.Int("requests", 20000, "HTTP requests per run")
	echoes := flag.Int("echoes", 20000, "socket round trips per run")
	conns := flag.Int("conns", 16, "concurrent HTTP clients")
	reps := flag.Int("reps", 3, "alternated repetitions")
	flag.Parse()
	dir, err := os.MkdirTemp("", "wasmkeep-relay-")
	if err != nil {
		fail(err)
	}
	bucket := filepath.Join(dir, "bucket")
	n1 := &node{name: "n1", addr: free(), bin: *bin, bucket: bucket, log: filepath.Join(dir, "n1.log")}
	n2 := &node{name: "n2", addr: free(), bin: *bin, bucket: bucket, log: filepath.Join(dir, "n2.log")}
	started = []*node{n1, n2}
	n1.start()
	n2.start()
	defer func() {
		for _, n := range started {
			n.stop()
		}
		os.RemoveAll(dir)
	}()
	time.Sleep(6 * time.Second) // the nodes list each other
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *conns}}
	get(client, n1.addr, "/actor/counter/hot?read") // n1 holds it
	type sample struct{ rate, p50, p99, cpu float64 }
	results := map[string][]sample{}
	for range *reps {
		for _, via := range []*node{n1, n2} {
			cpu0 := n1.cpu() + n2.cpu()
			rate, p50, p99 := httpRun(client, via.addr, *requests, *conns)
			cpu := (n1.cpu() + n2.cpu() - cpu0) / float64(*requests)
			key := "http direct"
			if via == n2 {
				key = "http relayed"
			}
			results[key] = append(results[key], sample{rate, p50, p99, cpu})
			fmt.Printf("%s: %.0f req/s, p50 %.0f us, p99 %.0f us, %.1f us CPU per request\n", key, rate, p50, p99, cpu*1e6)

			cpu0 = n1.cpu() + n2.cpu()
			erate := echoRun(via.addr, *echoes)
			ecpu := (n1.cpu() + n2.cpu() - cpu0) / float64(*echoes)
			ekey := "echo direct"
			if via == n2 {
				ekey = "echo relayed"
			}
			results[ekey] = append(results[ekey], sample{rate: erate, cpu: ecpu})
			fmt.Printf("%s: %.0f round trips/s, %.1f us CPU per round trip\n", ekey, erate, ecpu*1e6)
		}
	}
	med := func(key string, f func(sample) float64) float64 {
		var v []float64
		for _, s := range results[key] {
			v = append(v, f(s))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	rate := func(s sample) float64 { return s.rate }
	p99 := func(s sample) float64 { return s.p99 }
	cpu := func(s sample) float64 { return s.cpu }
	fmt.Printf("RESULT {\"http_rate_ratio\":%.3f,\"http_p99_ratio\":%.3f,\"http_cpu_ratio\":%.3f,\"echo_rate_ratio\":%.3f,\"echo_cpu_ratio\":%.3f}\n",
		med("http relayed", rate)/med("http direct", rate), med("http relayed", p99)/med("http direct", p99),
		med("http relayed", cpu)/med("http direct", cpu), med("echo relayed", rate)/med("echo direct", rate),
		med("echo relayed", cpu)/med("echo direct", cpu))
}

// httpRun sends n read-only requests for the hot counter to addr from
// conns clients and returns requests/s and the p50 and p99 latency (us).
func httpRun(c *http.Client, addr string, n, conns int) (rate, p50, p99 float64) {
	lat := make([]float64, n)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= n {
					return
				}
				t := time.Now()
				get(c, addr, "/actor/counter/hot?read")
				lat[k] = float64(time.Since(t).Microseconds())
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	return float64(n) / elapsed.Seconds(), lat[n/2], lat[n*99/100]
}

// echoRun opens a socket to the chat room at addr and makes n round trips
// (a message said, its echo read), returning round trips/s.
func echoRun(addr string, n int) float64 {
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/actor/chat/relayroom?name=bench", nil)
	if err != nil {
		fail(err)
	}
	defer ws.Close()
	read := func(want string) {
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				fail(err)
			}
			if strings.Contains(string(b), want) {
				return
			}
		}
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"join","name":"bench"}`)); err != nil {
		fail(err)
	}
	start := time.Now()
	for k := range n {
		text := "m" + strconv.Itoa(k)
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"say","text":"`+text+`"}`)); err != nil {
			fail(err)
		}
		read(`"` + text + `"`)
	}
	return float64(n) / time.Since(start).Seconds()
}

type node struct {
	name, addr, bin, bucket, log string
	cmd                          *exec.Cmd
}

// cpu is the process's user and system time so far, in seconds.
func (n *node) cpu() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
	if err != nil {
		fail(err)
	}
	fields := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // clock ticks of 10 ms
}

func (n *node) start() {
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fail(err)
	}
	n.cmd = exec.Command(n.bin, "serve", "--node", n.name, "--bucket", n.bucket, "--listen", n.addr, "--cache-dir", "",
		"--classes", filepath.Join(filepath.Dir(n.bucket), "none"), "--idle-timeout", "5m")
	n.cmd.Stdout, n.cmd.Stderr = f, f
	if err := n.cmd.Start(); err != nil {
		fail(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := http.Get("http://" + n.addr + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	fail(fmt.Errorf("%s did not get ready; see %s", n.name, n.log))
}

func (n *node) stop() {
	if n.cmd == nil || n.cmd.ProcessState != nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
	}
}

func get(c *http.Client, addr, path string) {
	res, err := c.Get("http://" + addr + path)
	if err != nil {
		fail(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		fail(fmt.Errorf("%s via %s: %d", path, addr, res.StatusCode))
	}
}

func free() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// started are the node processes to stop, also when the run fails.
var started []*node

func fail(err error) {
	fmt.Fprintln(os.Stderr, "relay:", err)
	for _, n := range started {
		n.stop()
	}
	os.Exit(1)
}
