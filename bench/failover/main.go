// Command failover measures how long a cluster takes to serve again the
// actors of a node killed with SIGKILL: three `wasmkeep serve` processes on
// one directory bucket (default lease settings unless given), KILLS times:
// the victim holds ACTORS counters, is killed, and a client asks for each
// through a peer; the time from the kill to the last counter served, and
// to the first, is recorded; the victim is started again for the next
// round. With -fence, `wasmkeep cluster fence` runs right after the kill,
// which is the takeover an operator can force.
//
//	go run ./bench/failover -bin /tmp/wasmkeep [-kills 10] [-fence]
//
// Every process is started here on 127.0.0.1 and stopped by PID; every
// wait is bounded.
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
	"strings"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "wasmkeep", "the wasmkeep binary")
	kills := flag.Int("kills", 10, "rounds of kill and failover")
	actors := flag.Int("actors", 20, "counters the victim holds each round")
	fence := flag.Bool("fence", false, "run cluster fence on the victim right after the kill")
	extra := flag.String("serve-flags", "", "more flags for every node, space separated (e.g. --lease-ttl 5s)")
	flag.Parse()
	dir, err := os.MkdirTemp("", "wasmkeep-failover-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	bucket := filepath.Join(dir, "bucket")
	var nodes []*node
	for i := range 3 {
		n := &node{name: fmt.Sprintf("n%d", i+1), addr: free(), bin: *bin, bucket: bucket, extra: strings.Fields(*extra),
			log: filepath.Join(dir, fmt.Sprintf("n%d.log", i+1))}
		started = append(started, n)
		n.start()
		nodes = append(nodes, n)
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	time.Sleep(6 * time.Second) // every node lists the others
	var lasts, firsts []time.Duration
	client := &http.Client{Timeout: 60 * time.Second}
	for round := range *kills {
		victim := nodes[round%3]
		peers := []*node{}
		for _, n := range nodes {
			if n != victim {
				peers = append(peers, n)
			}
		}
		for i := range *actors {
			get(client, victim.addr, fmt.Sprintf("/actor/counter/r%d-%d", round, i))
		}
		killed := time.Now()
		victim.kill()
		if *fence {
			out, err := exec.Command(*bin, "cluster", "fence", victim.name, "--bucket", bucket).CombinedOutput()
			if err != nil {
				fail(fmt.Errorf("fence: %v\n%s", err, out))
			}
		}
		var first time.Duration
		for i := range *actors {
			p := peers[i%2]
			if code, body := get(client, p.addr, fmt.Sprintf("/actor/counter/r%d-%d", round, i)); code != http.StatusOK || body != "2" {
				fail(fmt.Errorf("round %d: r%d-%d through %s: %d %q", round, round, i, p.name, code, body))
			}
			if i == 0 {
				first = time.Since(killed)
			}
		}
		last := time.Since(killed)
		firsts, lasts = append(firsts, first), append(lasts, last)
		fmt.Printf("round %d: %s killed; first actor served after %s, all %d after %s\n", round, victim.name,
			first.Round(time.Millisecond), *actors, last.Round(time.Millisecond))
		victim.start()
		time.Sleep(3 * time.Second)
	}
	slices.Sort(firsts)
	slices.Sort(lasts)
	fmt.Printf("RESULT {\"kills\":%d,\"fence\":%t,\"first_p50_ms\":%d,\"first_max_ms\":%d,\"all_p50_ms\":%d,\"all_max_ms\":%d}\n",
		*kills, *fence, firsts[len(firsts)/2].Milliseconds(), firsts[len(firsts)-1].Milliseconds(),
		lasts[len(lasts)/2].Milliseconds(), lasts[len(lasts)-1].Milliseconds())
}

type node struct {
	name, addr, bin, bucket, log string
	extra                        []string
	cmd                          *exec.Cmd
}

func (n *node) start() {
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fail(err)
	}
	args := append([]string{"serve", "--node", n.name, "--bucket", n.bucket, "--listen", n.addr, "--cache-dir", "",
		"--classes", filepath.Join(filepath.Dir(n.bucket), "none")}, n.extra...)
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

func (n *node) kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	_ = n.cmd.Wait()
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

func get(c *http.Client, addr, path string) (int, string) {
	res, err := c.Get("http://" + addr + path)
	if err != nil {
		fail(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
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
	fmt.Fprintln(os.Stderr, "failover:", err)
	for _, n := range started {
		n.stop()
	}
	os.Exit(1)
}
