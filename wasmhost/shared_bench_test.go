package wasmhost

import (
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// Whole-node benchmarks of what class isolation is for: the memory of a
// resident wasm actor, the first request to a new name, and the first
// touch of many names, each beside the Go-native counter in the same run.
// The nodes run in this process on the in-memory bucket (as wasmkeep serve
// --bucket mem://), their actors kept resident (no idle timeout within a
// run), over HTTP on 127.0.0.1.

// benchClass is a class a node serves in a benchmark: the Go counter, or a
// wasm example in an isolation.
type benchClass struct {
	name  string // the sub-benchmark's
	class string // the class's, in the URL
	pkg   string // the wasm example; "": the Go counter
	iso   Isolation
}

var (
	goCounter    = benchClass{name: "go-counter", class: "counter"}
	wasmCounter  = benchClass{name: "counter-wasm/class", class: "counter-wasm", pkg: counterGuest, iso: IsolationClass}
	wasmRoom     = benchClass{name: "room-wasm/class", class: "room-wasm", pkg: roomGuest, iso: IsolationClass}
	actorCounter = benchClass{name: "counter-wasm/actor", class: "counter-wasm", pkg: counterGuest, iso: IsolationActor}
)

// benchNode starts a node serving c, actors staying resident.
func benchNode(b *testing.B, c benchClass) *nodetest.Node {
	b.Helper()
	classes := map[string]actors.Class{}
	if c.pkg != "" {
		r := newRuntime(b, Config{Isolation: map[string]Isolation{c.class: c.iso}})
		m := mustCompile(b, r, c.class, guest(b, c.pkg))
		classes[c.class] = m
	}
	return nodetest.Start(b, nodetest.Options{Classes: classes, IdleTimeout: time.Hour, Configure: func(cfg *node.Config) {
		cfg.Bucket = memstore.New(memstore.Faults{})
		cfg.Actors.MaxResident = 1 << 20
	}})
}

// client is one keep-alive connection's worth of HTTP client.
func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
}

// touch GETs /actor/<class>/<name> and fails unless it is answered 200.
func touch(tb testing.TB, cl *http.Client, n *nodetest.Node, class, name string) {
	resp, err := cl.Get(n.URL + "/actor/" + class + "/" + name)
	if err != nil {
		tb.Error(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Errorf("%s/%s: %d", class, name, resp.StatusCode)
	}
}

// touchAll touches names prefix0 .. prefix(n-1) from conns clients at once
// and returns how long it took.
func touchAll(tb testing.TB, n *nodetest.Node, class, prefix string, count, conns int) time.Duration {
	cl := benchClient()
	defer cl.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(count) {
					return
				}
				touch(tb, cl, n, class, fmt.Sprint(prefix, i))
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkResidentActors measures the memory of resident actors: a node
// is given 1,000 or 10,000 new actors (one request each), which stay
// resident; rss-per-actor is the growth of the process's resident set per
// actor, after a garbage collection that returns freed memory to the
// system, rss-MiB the process's resident set then (the node, the test
// binary and its client included, and what earlier sub-benchmarks left:
// run one alone for a node's total). The counter in isolation actor, a
// guest per actor, is measured at 1,000 only.
func BenchmarkResidentActors(b *testing.B) {
	for _, c := range []benchClass{goCounter, wasmCounter, wasmRoom, actorCounter} {
		for _, count := range []int{1000, 10000} {
			if c == actorCounter && count > 1000 {
				continue
			}
			b.Run(fmt.Sprintf("%s/n=%d", c.name, count), func(b *testing.B) {
				var per, total float64
				for i := 0; b.Loop(); i++ {
					n := benchNode(b, c)
					touchAll(b, n, c.class, "warm", 50, 8)
					debug.FreeOSMemory()
					before := rss(b)
					touchAll(b, n, c.class, fmt.Sprint("r", i, "-"), count, 8)
					debug.FreeOSMemory()
					after := rss(b)
					per, total = float64(after-before)/float64(count), float64(after)/(1<<20)
					b.StopTimer()
					if err := n.Stop(b.Context()); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(per, "rss-per-actor")
				b.ReportMetric(total, "rss-MiB")
			})
		}
	}
}

// BenchmarkFirstRequest measures the latency of the first request to a
// new name, one after another on one keep-alive connection (as the peer
// benchmark's cold scenario): p50-ms and p99-ms over 200 names per
// iteration.
func BenchmarkFirstRequest(b *testing.B) {
	for _, c := range []benchClass{goCounter, wasmCounter, actorCounter} {
		b.Run(c.name, func(b *testing.B) {
			n := benchNode(b, c)
			cl := benchClient()
			defer cl.CloseIdleConnections()
			touch(b, cl, n, c.class, "warm")
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				for j := range 200 {
					start := time.Now()
					touch(b, cl, n, c.class, fmt.Sprint("f", i, "-", j))
					lat = append(lat, time.Since(start))
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
		})
	}
}

// BenchmarkFirstTouch measures the first touch of 1,000 names, 32
// connections at once (as the peer benchmark's priming pass): req/s, and
// x-go, its ratio to the Go counter's in the same run.
func BenchmarkFirstTouch(b *testing.B) {
	var goRate float64
	for _, c := range []benchClass{goCounter, wasmCounter, actorCounter} {
		b.Run(c.name, func(b *testing.B) {
			n := benchNode(b, c)
			touchAll(b, n, c.class, "warm", 50, 8)
			var took time.Duration
			count := 0
			for i := 0; b.Loop(); i++ {
				took += touchAll(b, n, c.class, fmt.Sprint("t", i, "-"), 1000, 32)
				count += 1000
			}
			rate := float64(count) / took.Seconds()
			b.ReportMetric(rate, "req/s")
			if c == goCounter {
				goRate = rate
			} else if goRate > 0 {
				b.ReportMetric(rate/goRate, "x-go")
			}
		})
	}
}
