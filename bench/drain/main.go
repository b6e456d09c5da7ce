// Command drain measures how long a node takes to drain: two `wasmkeep
// serve` processes on one directory bucket; the first holds ACTORS resident
// counters and ROOMS parked chat rooms (each with one WebSocket held open by
// this program, the room hibernated); `wasmkeep cluster drain` is run for it,
// and the time until its status page shows nothing held, parked or pending
// is recorded, with when its last socket was closed (1012) and the counters
// served through its peer afterwards, every count intact.
//
//	go run ./bench/drain -bin /tmp/wasmkeep [-actors 1000] [-rooms 1000]
//
// Every process is started here on 127.0.0.1 and stopped by PID; every
// wait is bounded.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

func main() {
	bin := flag.String("bin", "wasmkeep", "the wasmkeep binary")
	actors := flag.Int("actors", 1000, "resident counters on the drained node")
	rooms := flag.Int("rooms", 1000, "parked chat rooms on the drained node, one socket each")
	flag.Parse()
	dir, err := os.MkdirTemp("", "wasmkeep-drain-")
	if err != nil {
		fail(err)
	}
	bucket := filepath.Join(dir, "bucket")
	n1 := &node{name: "n1", addr: free(), admin: free(), bin: *bin, bucket: bucket, log: filepath.Join(dir, "n1.log"),
		extra: []string{"--idle-timeout", "2s"}}
	n2 := &node{name: "n2", addr: free(), admin: free(), bin: *bin, bucket: bucket, log: filepath.Join(dir, "n2.log")}
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
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var closed atomic.Int64
	var lastClose atomic.Int64 // unix nanoseconds
	var conns []*websocket.Conn
	for i := range *rooms {
		ws, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("ws://%s/actor/chat/room%d?name=u%d", n1.addr, i, i), nil)
		if err != nil {
			fail(fmt.Errorf("room %d: %w", i, err))
		}
		conns = append(conns, ws)
		go func() {
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					closed.Add(1)
					lastClose.Store(time.Now().UnixNano())
					return
				}
			}
		}()
	}
	time.Sleep(4 * time.Second) // every room hibernates with its socket: parked
	// Counters last: resident (idle 2 s) while the drain begins.
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < *actors; i += 16 {
				get(client, n1.addr, fmt.Sprintf("/actor/counter/c%d", i), "1")
			}
		}()
	}
	wg.Wait()
	st := n1.status()
	fmt.Printf("before: %d held, %d parked on n1, %d sockets\n", st.Held, st.Parked, st.Sockets)
	start := time.Now()
	if out, err := exec.Command(*bin, "cluster", "drain", "n1", "--bucket", bucket).CombinedOutput(); err != nil {
		fail(fmt.Errorf("cluster drain: %v\n%s", err, out))
	}
	deadline := start.Add(2 * time.Minute)
	var drained time.Duration
	for time.Now().Before(deadline) {
		st := n1.status()
		if st.Draining && st.Held == 0 && st.Parked == 0 && st.Pending == 0 && st.Unresolved == 0 {
			drained = time.Since(start)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if drained == 0 {
		fail(fmt.Errorf("n1 did not drain within 2 minutes: %+v", n1.status()))
	}
	socketsAt := time.Duration(0)
	if l := lastClose.Load(); l > 0 {
		socketsAt = time.Unix(0, l).Sub(start)
	}
	for i := range *actors {
		get(client, n2.addr, fmt.Sprintf("/actor/counter/c%d", i), "2")
	}
	for _, ws := range conns {
		ws.Close()
	}
	fmt.Printf("drained in %s (request written to the bucket to nothing held, parked or pending); %d of %d sockets closed, the last after %s\n",
		drained.Round(time.Millisecond), closed.Load(), *rooms, socketsAt.Round(time.Millisecond))
	fmt.Printf("RESULT {\"actors\":%d,\"rooms\":%d,\"drained_ms\":%d,\"sockets_closed\":%d,\"last_socket_ms\":%d}\n",
		*actors, *rooms, drained.Milliseconds(), closed.Load(), socketsAt.Milliseconds())
}

type node struct {
	name, addr, admin, bin, bucket, log string
	extra                               []string
	cmd                                 *exec.Cmd
}

type status struct {
	Draining                                   bool
	Held, Parked, Pending, Unresolved, Sockets int
}

func (n *node) status() status {
	req, _ := http.NewRequest(http.MethodGet, "http://"+n.admin+"/status", nil)
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fail(err)
	}
	defer res.Body.Close()
	var s struct {
		Draining   bool `json:"draining"`
		Held       int  `json:"held"`
		Parked     int  `json:"parked"`
		Pending    int  `json:"pending"`
		Unresolved int  `json:"unresolved"`
		Sockets    int  `json:"sockets"`
	}
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		fail(err)
	}
	return status{s.Draining, s.Held, s.Parked, s.Pending, s.Unresolved, s.Sockets}
}

func (n *node) start() {
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fail(err)
	}
	args := append([]string{"serve", "--node", n.name, "--bucket", n.bucket, "--listen", n.addr, "--admin-listen", n.admin,
		"--cache-dir", "", "--classes", filepath.Join(filepath.Dir(n.bucket), "none")}, n.extra...)
	n.cmd = exec.Command(n.bin, args...)
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

func get(c *http.Client, addr, path, want string) {
	res, err := c.Get("http://" + addr + path)
	if err != nil {
		fail(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != want {
		fail(fmt.Errorf("%s via %s: %d %q, want %q", path, addr, res.StatusCode, b, want))
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
	fmt.Fprintln(os.Stderr, "drain:", err)
	for _, n := range started {
		n.stop()
	}
	os.Exit(1)
}
