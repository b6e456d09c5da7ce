// Command drain measures how long a node takes to drain: two `wasmkeep
// serve` processes on one directory bucket; the first holds ACTORS resident
// counters and ROOMS parked chat rooms (each with one WebSocket held open by
// this program, the room hibernated); `wasmkeep cluster drain` is run for it,
// and the time until its status page shows nothing held, parked or pending
// is recorded, with when its last socket was closed (1012) and the counters
// served through its peer afterwards, every count intact.
//
//	go run ./bench/drain -bin ./bin/wasmkeep [-actors 1000] [-rooms 1000]
//
// Every process is started here on 127.0.0.1 and stopped by PID; every
// wait is bounded.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/bench/internal/procs"
)

func main() {
	bin := flag.String("bin", "wasmkeep", "the wasmkeep binary")
	actors := flag.Int("actors", 1000, "resident counters on the drained node")
	rooms := flag.Int("rooms", 1000, "parked chat rooms on the drained node, one socket each")
	flag.Parse()
	dir, bucket := procs.Workdir("drain")
	n1 := procs.New(*bin, dir, bucket, "n1", true, "--idle-timeout", "2s")
	n2 := procs.New(*bin, dir, bucket, "n2", true)
	n1.Start()
	n2.Start()
	defer procs.StopAll()
	time.Sleep(6 * time.Second) // the nodes list each other
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var closed atomic.Int64
	var lastClose atomic.Int64 // unix nanoseconds
	var conns []*websocket.Conn
	for i := range *rooms {
		ws, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("ws://%s/actor/chat/room%d?name=u%d", n1.Addr, i, i), nil)
		if err != nil {
			procs.Fail(fmt.Errorf("room %d: %w", i, err))
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
				get(client, n1.Addr, fmt.Sprintf("/actor/counter/c%d", i), "1")
			}
		}()
	}
	wg.Wait()
	st := status(n1)
	fmt.Printf("before: %d held, %d parked on n1, %d sockets\n", st.Held, st.Parked, st.Sockets)
	start := time.Now()
	if out, err := exec.Command(*bin, "cluster", "drain", "n1", "--bucket", bucket).CombinedOutput(); err != nil {
		procs.Fail(fmt.Errorf("cluster drain: %v\n%s", err, out))
	}
	deadline := start.Add(2 * time.Minute)
	var drained time.Duration
	for time.Now().Before(deadline) {
		st := status(n1)
		if st.Draining && st.Held == 0 && st.Parked == 0 && st.Pending == 0 && st.Unresolved == 0 {
			drained = time.Since(start)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if drained == 0 {
		procs.Fail(fmt.Errorf("n1 did not drain within 2 minutes: %+v", status(n1)))
	}
	socketsAt := time.Duration(0)
	if l := lastClose.Load(); l > 0 {
		socketsAt = time.Unix(0, l).Sub(start)
	}
	for i := range *actors {
		get(client, n2.Addr, fmt.Sprintf("/actor/counter/c%d", i), "2")
	}
	for _, ws := range conns {
		ws.Close()
	}
	fmt.Printf("drained in %s (request written to the bucket to nothing held, parked or pending); %d of %d sockets closed, the last after %s\n",
		drained.Round(time.Millisecond), closed.Load(), *rooms, socketsAt.Round(time.Millisecond))
	fmt.Printf("RESULT {\"actors\":%d,\"rooms\":%d,\"drained_ms\":%d,\"sockets_closed\":%d,\"last_socket_ms\":%d}\n",
		*actors, *rooms, drained.Milliseconds(), closed.Load(), socketsAt.Milliseconds())
}

type nodeStatus struct {
	Draining                                   bool
	Held, Parked, Pending, Unresolved, Sockets int
}

func status(n *procs.Node) nodeStatus {
	req, _ := http.NewRequest(http.MethodGet, "http://"+n.Admin+"/status", nil)
	req.Header.Set("Accept", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		procs.Fail(err)
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
		procs.Fail(err)
	}
	return nodeStatus{s.Draining, s.Held, s.Parked, s.Pending, s.Unresolved, s.Sockets}
}

func get(c *http.Client, addr, path, want string) {
	res, err := c.Get("http://" + addr + path)
	if err != nil {
		procs.Fail(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != want {
		procs.Fail(fmt.Errorf("%s via %s: %d %q, want %q", path, addr, res.StatusCode, b, want))
	}
}
