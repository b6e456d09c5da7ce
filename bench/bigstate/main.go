// Command bigstate drives actors that each hold a large state, through the
// kv routes both wasmkeep (its built-in class kv) and bench/bigstate's
// workerd Worker serve: PUT and GET /actor/kv/<name>/<key>. For one
// server at -url it fills -names actors with -size bytes each (values of
// 64 KiB, -conns at a time), then measures for -duration each:
//
//   - reads: GET of one of each actor's values, the actors round-robin;
//   - writes: PUT of a new 100-byte key, the actors round-robin;
//
// and prints one RESULT line of JSON (requests/s, p50 and p99, the server's
// RSS and the bytes under -dir, its storage). run.sh runs it against both
// servers, rep by rep. Every loop is bounded in count and time.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8080/actor/kv/", "the kv routes' base URL (127.0.0.1 only)")
	label := flag.String("label", "wasmkeep", "the result's label")
	names := flag.Int("names", 1000, "actors")
	size := flag.Int("size", 1<<20, "bytes each actor holds")
	conns := flag.Int("conns", 16, "requests at once")
	dur := flag.Duration("duration", 10*time.Second, "measured time of reads and of writes")
	pid := flag.Int("pid", 0, "the server's PID, for its RSS")
	dir := flag.String("dir", "", "the server's storage directory, for its size")
	fill := flag.Bool("fill", true, "fill the actors first (false: they are filled already)")
	rep := flag.Int("rep", 0, "the rep's number: its writes' keys are its own, new to every rep")
	flag.Parse()
	if !strings.HasPrefix(*base, "http://127.0.0.1:") {
		fail(fmt.Errorf("-url must be on 127.0.0.1"))
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *conns}}
	values := max(1, *size/(64<<10))
	res := map[string]any{"label": *label, "names": *names, "bytes_per_actor": *size}
	if *fill {
		start := time.Now()
		body := bytes.Repeat([]byte("v"), min(*size, 64<<10))
		var next atomic.Int64
		run(*conns, func() bool {
			i := int(next.Add(1)) - 1
			if i >= *names*values {
				return false
			}
			do(client, http.MethodPut, fmt.Sprintf("%sbig%d/f%05d", *base, i/values, i%values), body)
			return true
		})
		res["fill_s"] = round(time.Since(start).Seconds())
		fmt.Printf("%s: filled %d actors of %d bytes in %v\n", *label, *names, *size, time.Since(start).Round(time.Millisecond))
	}
	var seq atomic.Int64
	read := measure(*conns, *dur, func() {
		i := int(seq.Add(1))
		do(client, http.MethodGet, fmt.Sprintf("%sbig%d/f%05d", *base, i%*names, (i / *names)%values), nil)
	})
	small := bytes.Repeat([]byte("a"), 100)
	write := measure(*conns, *dur, func() {
		i := int(seq.Add(1))
		do(client, http.MethodPut, fmt.Sprintf("%sbig%d/new%03d-%09d", *base, i%*names, *rep, i), small)
	})
	res["reads"], res["writes"] = read, write
	if *pid > 0 {
		res["server_rss_kb"] = rssKB(*pid)
	}
	if *dir != "" {
		res["storage_bytes"] = du(*dir)
	}
	fmt.Printf("%s: reads %v/s p50 %vms p99 %vms; writes %v/s p50 %vms p99 %vms\n", *label,
		read["rps"], read["p50_ms"], read["p99_ms"], write["rps"], write["p50_ms"], write["p99_ms"])
	j, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", j)
}

// run runs f on n goroutines until it returns false on each.
func run(n int, f func() bool) {
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
// reports the rate and latencies.
func measure(n int, d time.Duration, f func()) map[string]any {
	var mu sync.Mutex
	var lat []time.Duration
	var count atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	run(n, func() bool {
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
	el := time.Since(start)
	slices.Sort(lat)
	q := func(p float64) float64 { return round(float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000) }
	return map[string]any{"n": len(lat), "rps": int(float64(len(lat)) / el.Seconds()), "p50_ms": q(0.5), "p99_ms": q(0.99)}
}

func do(c *http.Client, method, url string, body []byte) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		fail(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		fail(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		fail(fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, msg))
	}
}

func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func du(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bigstate:", err)
	os.Exit(1)
}
