// Command keys measures what an event key costs: two `wasmkeep serve`
// processes on one directory bucket, a counter held by n1, incremented by
// the same load in three ways, alternating, REPS times: directly without a
// key, directly with a fresh Idempotency-Key on every request, and through
// n2, which forwards each request with a key of its own (every forward
// carries one). It reports requests/s, p50 and p99, the CPU both nodes
// spent per request, and, from n1's /metrics, the bucket writes and bytes
// per request of its actors' storage (heads, and runs flushed or merged),
// with the ratios keyed / plain.
//
//	go run ./bench/keys -bin ./bin/wasmkeep [-requests 20000] [-conns 32] [-reps 3]
//
// Every process is started here on 127.0.0.1 and stopped by its PID; every
// run is bounded in count.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmkeep/wasmkeep/bench/internal/procs"
)

// storage counters read from a node's /metrics.
var storageMetrics = []string{
	"wasmkeep_storage_head_writes_total", "wasmkeep_storage_head_written_bytes_total",
	"wasmkeep_storage_run_writes_total", "wasmkeep_storage_run_written_bytes_total",
}

type sample struct {
	rate, p50, p99, cpu float64
	perReq              map[string]float64 // storage metric deltas per request
}

func main() {
	bin := flag.String("bin", "wasmkeep", "the wasmkeep binary")
	requests := flag.Int("requests", 20000, "requests per run")
	conns := flag.Int("conns", 32, "concurrent HTTP clients")
	reps := flag.Int("reps", 3, "alternated repetitions")
	flag.Parse()
	n1, n2 := procs.Pair(*bin, "keys", "--idle-timeout", "5m")
	defer procs.StopAll()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *conns}}
	get(client, n1.Addr, "/actor/counter/hot", "") // n1 holds it
	var keySeq atomic.Int64
	type way struct {
		name  string
		via   *procs.Node
		keyed bool
	}
	ways := []way{{"plain", n1, false}, {"keyed", n1, true}, {"forwarded", n2, false}}
	results := map[string][]sample{}
	for range *reps {
		for _, w := range ways {
			before := metrics(n1)
			cpu0 := n1.CPU() + n2.CPU()
			rate, p50, p99 := run(client, w.via.Addr, *requests, *conns, func() string {
				if !w.keyed {
					return ""
				}
				return "bench-" + strconv.FormatInt(keySeq.Add(1), 10)
			})
			s := sample{rate: rate, p50: p50, p99: p99, cpu: (n1.CPU() + n2.CPU() - cpu0) / float64(*requests), perReq: map[string]float64{}}
			after := metrics(n1)
			for _, m := range storageMetrics {
				s.perReq[m] = (after[m] - before[m]) / float64(*requests)
			}
			results[w.name] = append(results[w.name], s)
			fmt.Printf("%-9s %6.0f req/s, p50 %5.0f us, p99 %6.0f us, %5.1f us CPU/req; per request: %.3f head writes, %.0f head bytes, %.4f run writes, %.0f run bytes\n",
				w.name, rate, p50, p99, s.cpu*1e6, s.perReq[storageMetrics[0]], s.perReq[storageMetrics[1]], s.perReq[storageMetrics[2]], s.perReq[storageMetrics[3]])
		}
	}
	med := func(key string, f func(sample) float64) float64 {
		var v []float64
		for _, s := range results[key] {
			v = append(v, f(s))
		}
		return procs.Median(v)
	}
	rate := func(s sample) float64 { return s.rate }
	p99 := func(s sample) float64 { return s.p99 }
	cpu := func(s sample) float64 { return s.cpu }
	bytes := func(s sample) float64 { return s.perReq[storageMetrics[1]] + s.perReq[storageMetrics[3]] }
	writes := func(s sample) float64 { return s.perReq[storageMetrics[0]] + s.perReq[storageMetrics[2]] }
	fmt.Printf("RESULT {\"keyed_rate_ratio\":%.3f,\"keyed_p99_ratio\":%.3f,\"keyed_cpu_ratio\":%.3f,"+
		"\"plain_bytes_per_req\":%.0f,\"keyed_bytes_per_req\":%.0f,\"forwarded_bytes_per_req\":%.0f,"+
		"\"plain_writes_per_req\":%.3f,\"keyed_writes_per_req\":%.3f,\"forwarded_writes_per_req\":%.3f}\n",
		med("keyed", rate)/med("plain", rate), med("keyed", p99)/med("plain", p99), med("keyed", cpu)/med("plain", cpu),
		med("plain", bytes), med("keyed", bytes), med("forwarded", bytes),
		med("plain", writes), med("keyed", writes), med("forwarded", writes))
}

// run sends n increments of the hot counter to addr from conns clients,
// each with the key next gives ("": none), and returns requests/s and the
// p50 and p99 latency (us).
func run(c *http.Client, addr string, n, conns int, next func() string) (rate, p50, p99 float64) {
	lat := make([]float64, n)
	var i atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Go(func() {
			for {
				k := int(i.Add(1)) - 1
				if k >= n {
					return
				}
				t := time.Now()
				get(c, addr, "/actor/counter/hot", next())
				lat[k] = float64(time.Since(t).Microseconds())
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	return float64(n) / elapsed.Seconds(), lat[n/2], lat[n*99/100]
}

func get(c *http.Client, addr, path, key string) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		procs.Fail(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := c.Do(req)
	if err != nil {
		procs.Fail(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		procs.Fail(fmt.Errorf("%s via %s: %d", path, addr, res.StatusCode))
	}
}

// metrics reads the storage counters of n's /metrics.
func metrics(n *procs.Node) map[string]float64 {
	res, err := http.Get("http://" + n.Addr + "/metrics")
	if err != nil {
		procs.Fail(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		procs.Fail(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		for _, m := range storageMetrics {
			if v, ok := strings.CutPrefix(line, m+" "); ok {
				out[m], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return out
}
