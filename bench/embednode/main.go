// Command embednode runs the node on each embedded store and compares them:
// one `wasmkeep serve` process on a fresh directory bucket, then one on a
// fresh SQLite bucket (bucket URL sqlite:DIR), rep by rep, alternating
// which goes first. On each it measures, through the built-in classes:
//
//   - the fill: -names kv actors of -size bytes each, values of 64 KiB
//     PUT by -conns clients (PUT /actor/kv/big<i>/f<j>), its wall time;
//   - the bytes on disk of the bucket's directory (as du counts them) right
//     after the fill, once the node has been quiet for -settle (its
//     merges done), and after the node stopped;
//   - reads: GET of one 64 KiB value of each actor in turn, -conns
//     clients, for -duration, once what the fill wrote is on disk (sync);
//   - a hot counter: GET /actor/counter/a from -hot-conns clients for
//     -duration (each request a commit of that one actor).
//
// It prints each run, with the node process's CPU, then a table of the
// medians, the ratio sqlite/dir of the medians, and the median of the
// reps' own ratios (each rep's two runs ran back to back).
//
//	go run ./bench/embednode -bin ./bin/wasmkeep [-reps 1] [-names 1000] [-size 1048576] [-duration 10s]
//
// The node processes are started on 127.0.0.1 and stopped by PID, also
// when a run fails; every loop is bounded in count or time.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wasmkeep/wasmkeep/bench/internal/procs"
)

var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// result is one run of one store.
type result struct {
	fill                        time.Duration
	retried                     int64
	afterFill, settled, stopped int64 // bytes on disk
	reads, hot                  float64
	// CPU of the node process: seconds for the fill, µs a hot request.
	fillCPU, hotCPU                 float64
	readP50, readP99, hotP50, hot99 time.Duration
	rss                             int64
}

func main() {
	bin := flag.String("bin", "wasmkeep", "the wasmkeep binary")
	reps := flag.Int("reps", 1, "runs of each store")
	names := flag.Int("names", 1000, "kv actors filled")
	size := flag.Int("size", 1<<20, "bytes each actor holds (in values of 64 KiB)")
	conns := flag.Int("conns", 16, "requests at once in the fill and the reads")
	hotConns := flag.Int("hot-conns", 32, "requests at once to the hot counter")
	dur := flag.Duration("duration", 10*time.Second, "time of the reads and of the hot counter")
	settle := flag.Duration("settle", 5*time.Second, "how long the bucket's size must hold still after the fill to count as settled (at most 2 minutes in all)")
	flag.Parse()
	defer procs.StopAll()
	results := map[string][]result{}
	stores := []string{"dir", "sqlite"}
	for rep := range *reps {
		order := slices.Clone(stores)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, store := range order {
			r := run(*bin, store, *names, *size, *conns, *hotConns, *dur, *settle)
			results[store] = append(results[store], r)
			fmt.Printf("rep %d %-6s fill %v (CPU %.1f s, %d retried 503s), on disk after the fill %d MiB, settled %d MiB, stopped %d MiB; reads %.0f/s p50 %v p99 %v; hot counter %.0f/s p50 %v p99 %v CPU %.0f µs a request; RSS %d MiB\n",
				rep, store, r.fill.Round(time.Millisecond), r.fillCPU, r.retried, r.afterFill>>20, r.settled>>20, r.stopped>>20,
				r.reads, r.readP50, r.readP99, r.hot, r.hotP50, r.hot99, r.hotCPU, r.rss>>20)
		}
	}
	med := func(store string, f func(result) float64) float64 {
		var vs []float64
		for _, r := range results[store] {
			vs = append(vs, f(r))
		}
		return procs.Median(vs)
	}
	// The ratio of each rep's pair (run back to back), then their median:
	// steadier than the ratio of the medians on a machine whose load
	// changes.
	pair := func(f func(result) float64) string {
		var rs []float64
		for i := range min(len(results["dir"]), len(results["sqlite"])) {
			rs = append(rs, f(results["sqlite"][i])/f(results["dir"][i]))
		}
		slices.Sort(rs)
		out := fmt.Sprintf("%.3f", rs[len(rs)/2])
		if len(rs) > 1 {
			out += fmt.Sprintf(" (%.3f to %.3f)", rs[0], rs[len(rs)-1])
		}
		return out
	}
	fmt.Printf("\n| measure | dir | sqlite | sqlite/dir of the medians | sqlite/dir of each rep, median (range) |\n|---|---:|---:|---:|---:|\n")
	for _, m := range []struct {
		name string
		f    func(result) float64
	}{
		{"fill, s", func(r result) float64 { return r.fill.Seconds() }},
		{"fill, node CPU s", func(r result) float64 { return r.fillCPU }},
		{"on disk after the fill, MiB", func(r result) float64 { return float64(r.afterFill) / (1 << 20) }},
		{"on disk settled, MiB", func(r result) float64 { return float64(r.settled) / (1 << 20) }},
		{"on disk stopped, MiB", func(r result) float64 { return float64(r.stopped) / (1 << 20) }},
		{"reads/s", func(r result) float64 { return r.reads }},
		{"read p50, ms", func(r result) float64 { return ms(r.readP50) }},
		{"hot counter req/s", func(r result) float64 { return r.hot }},
		{"hot counter p50, ms", func(r result) float64 { return ms(r.hotP50) }},
		{"hot counter p99, ms", func(r result) float64 { return ms(r.hot99) }},
		{"hot counter, node CPU µs a request", func(r result) float64 { return r.hotCPU }},
		{"RSS after, MiB", func(r result) float64 { return float64(r.rss) / (1 << 20) }},
	} {
		d, q := med("dir", m.f), med("sqlite", m.f)
		fmt.Printf("| %s | %.2f | %.2f | %.3f | %s |\n", m.name, d, q, q/d, pair(m.f))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// run starts a node on a fresh bucket of the store and measures it.
func run(bin, store string, names, size, conns, hotConns int, dur, settle time.Duration) result {
	dir, path := procs.Workdir("embednode-" + store)
	bucket := path
	if store == "sqlite" {
		bucket = "sqlite:" + path
	}
	n := procs.New(bin, dir, bucket, "n1", false, "--idle-timeout", "5m")
	n.Start()
	base := "http://" + n.Addr
	var r result

	values := max(1, size/(64<<10))
	body := bytes.Repeat([]byte("v"), min(size, 64<<10))
	var next, retried atomic.Int64
	cpu0 := n.CPU()
	start := time.Now()
	parallel(conns, func() bool {
		i := int(next.Add(1)) - 1
		if i >= names*values {
			return false
		}
		retried.Add(do(http.MethodPut, fmt.Sprintf("%s/actor/kv/big%d/f%05d", base, i/values, i%values), body))
		return true
	})
	r.fill, r.retried, r.fillCPU = time.Since(start), retried.Load(), n.CPU()-cpu0
	r.afterFill = du(path)

	// Settled: the size has not changed for settle (the merges after the
	// fill are done), or two minutes have passed.
	last, still, deadline := r.afterFill, time.Now(), time.Now().Add(2*time.Minute)
	for time.Now().Before(deadline) && time.Since(still) < settle {
		time.Sleep(500 * time.Millisecond)
		if now := du(path); now != last {
			last, still = now, time.Now()
		}
	}
	r.settled = last
	// What the fill left dirty goes to disk before the reads, so that
	// neither store's reads share the disk with its own writeback (nor
	// the next run's with this one's).
	syscall.Sync()

	var seq atomic.Int64
	var lat []time.Duration
	r.reads, lat = measure(conns, dur, func() {
		i := int(seq.Add(1))
		do(http.MethodGet, fmt.Sprintf("%s/actor/kv/big%d/f%05d", base, i%names, (i/names)%values), nil)
	})
	r.readP50, r.readP99 = quantile(lat, 0.5), quantile(lat, 0.99)
	cpu0 = n.CPU()
	r.hot, lat = measure(hotConns, dur, func() { do(http.MethodGet, base+"/actor/counter/a", nil) })
	r.hotCPU = (n.CPU() - cpu0) * 1e6 / float64(len(lat))
	r.hotP50, r.hot99 = quantile(lat, 0.5), quantile(lat, 0.99)
	r.rss = n.RSS()
	n.Stop()
	r.stopped = du(path)
	os.RemoveAll(dir) // StopAll removes it too, at the end; the next run starts on a clean disk
	syscall.Sync()
	return r
}

// do sends one request, again while it is answered 503, and returns how
// many times it was sent again; any other answer past 299 ends the run.
func do(method, url string, body []byte) int64 {
	for retries := int64(0); retries < 1000; retries++ {
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			procs.Fail(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			procs.Fail(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable:
			time.Sleep(10 * time.Millisecond)
			continue
		case resp.StatusCode >= 300:
			procs.Fail(fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, msg))
		}
		return retries
	}
	procs.Fail(fmt.Errorf("%s %s: answered 503 a thousand times", method, url))
	return 0
}

// parallel runs f on n goroutines until it returns false on each.
func parallel(n int, f func() bool) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for f() {
			}
		})
	}
	wg.Wait()
}

// measure runs f on n goroutines for d (at most 10 million calls) and
// returns the rate and the latencies, sorted.
func measure(n int, d time.Duration, f func()) (float64, []time.Duration) {
	var mu sync.Mutex
	var lat []time.Duration
	var count atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	parallel(n, func() bool {
		if time.Now().After(deadline) || count.Add(1) > 10_000_000 {
			return false
		}
		t0 := time.Now()
		f()
		el := time.Since(t0)
		mu.Lock()
		lat = append(lat, el)
		mu.Unlock()
		return true
	})
	slices.Sort(lat)
	return float64(len(lat)) / time.Since(start).Seconds(), lat
}

func quantile(sorted []time.Duration, p float64) time.Duration {
	return sorted[int(p*float64(len(sorted)-1))].Round(10 * time.Microsecond)
}

// du is the disk space the files under dir take, as du counts it.
func du(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				if st, ok := info.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				}
			}
		}
		return nil
	})
	return n
}
