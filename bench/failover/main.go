// Command failover measures how long a cluster takes to serve again the
// actors of a node killed with SIGKILL: three `wasmkeep serve` processes on
// one directory bucket (default lease settings unless given), KILLS times:
// the victim holds ACTORS counters, is killed, and a client asks for each
// through a peer; the time from the kill to the last counter served, and
// to the first, is recorded; the victim is started again for the next
// round. With -fence, `wasmkeep cluster fence` runs right after the kill,
// which is the takeover an operator can force.
//
//	go run ./bench/failover -bin ./bin/wasmkeep [-kills 10] [-fence]
//
// Every process is started here on 127.0.0.1 and stopped by PID; every
// wait is bounded.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/bench/internal/procs"
)

func main() {
	bin := flag.String("bin", "wasmkeep", "the wasmkeep binary")
	kills := flag.Int("kills", 10, "rounds of kill and failover")
	actors := flag.Int("actors", 20, "counters the victim holds each round")
	fence := flag.Bool("fence", false, "run cluster fence on the victim right after the kill")
	extra := flag.String("serve-flags", "", "more flags for every node, space separated (e.g. --lease-ttl 5s)")
	flag.Parse()
	dir, bucket := procs.Workdir("failover")
	var nodes []*procs.Node
	for i := range 3 {
		n := procs.New(*bin, dir, bucket, fmt.Sprintf("n%d", i+1), false, strings.Fields(*extra)...)
		n.Start()
		nodes = append(nodes, n)
	}
	defer procs.StopAll()
	time.Sleep(6 * time.Second) // every node lists the others
	var lasts, firsts []time.Duration
	client := &http.Client{Timeout: 60 * time.Second}
	for round := range *kills {
		victim := nodes[round%3]
		peers := []*procs.Node{}
		for _, n := range nodes {
			if n != victim {
				peers = append(peers, n)
			}
		}
		for i := range *actors {
			get(client, victim.Addr, fmt.Sprintf("/actor/counter/r%d-%d", round, i))
		}
		killed := time.Now()
		victim.Kill()
		if *fence {
			out, err := exec.Command(*bin, "cluster", "fence", victim.Name, "--bucket", bucket).CombinedOutput()
			if err != nil {
				procs.Fail(fmt.Errorf("fence: %v\n%s", err, out))
			}
		}
		var first time.Duration
		for i := range *actors {
			p := peers[i%2]
			if code, body := get(client, p.Addr, fmt.Sprintf("/actor/counter/r%d-%d", round, i)); code != http.StatusOK || body != "2" {
				procs.Fail(fmt.Errorf("round %d: r%d-%d through %s: %d %q", round, round, i, p.Name, code, body))
			}
			if i == 0 {
				first = time.Since(killed)
			}
		}
		last := time.Since(killed)
		firsts, lasts = append(firsts, first), append(lasts, last)
		fmt.Printf("round %d: %s killed; first actor served after %s, all %d after %s\n", round, victim.Name,
			first.Round(time.Millisecond), *actors, last.Round(time.Millisecond))
		victim.Start()
		time.Sleep(3 * time.Second)
	}
	slices.Sort(firsts)
	slices.Sort(lasts)
	fmt.Printf("RESULT {\"kills\":%d,\"fence\":%t,\"first_p50_ms\":%d,\"first_max_ms\":%d,\"all_p50_ms\":%d,\"all_max_ms\":%d}\n",
		*kills, *fence, firsts[len(firsts)/2].Milliseconds(), firsts[len(firsts)-1].Milliseconds(),
		lasts[len(lasts)/2].Milliseconds(), lasts[len(lasts)-1].Milliseconds())
}

func get(c *http.Client, addr, path string) (int, string) {
	res, err := c.Get("http://" + addr + path)
	if err != nil {
		procs.Fail(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}
