// Command relay measures what reaching an actor through a node that does
// not hold it costs: two `wasmkeep serve` processes on one directory
// bucket; a counter and a chat room held by n1; the same load sent to n1
// directly and through n2 (which forwards the requests and relays the
// WebSocket), alternating, REPS times. It reports requests/s, p50 and p99
// of the HTTP runs, round trips/s of the socket echo, and the CPU both
// node processes spent per request or round trip (from /proc), with the
// ratios relayed / direct.
//
//	go run ./bench/relay -bin ./bin/wasmkeep [-requests 20000] [-echoes 20000] [-reps 3]
//
// Every process is started here on 127.0.0.1 and stopped by PID; every
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
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/bench/internal/procs"
)

func main() {
	bin := flag.String("bin", "wasmkeep", "the wasmkeep binary")
	requests := flag.Int("requests", 20000, "HTTP requests per run")
	echoes := flag.Int("echoes", 20000, "socket round trips per run")
	conns := flag.Int("conns", 16, "concurrent HTTP clients")
	reps := flag.Int("reps", 3, "alternated repetitions")
	flag.Parse()
	n1, n2 := procs.Pair(*bin, "relay", "--idle-timeout", "5m")
	defer procs.StopAll()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *conns}}
	get(client, n1.Addr, "/actor/counter/hot?read") // n1 holds it
	type sample struct{ rate, p50, p99, cpu float64 }
	results := map[string][]sample{}
	for range *reps {
		for _, via := range []*procs.Node{n1, n2} {
			cpu0 := n1.CPU() + n2.CPU()
			rate, p50, p99 := httpRun(client, via.Addr, *requests, *conns)
			cpu := (n1.CPU() + n2.CPU() - cpu0) / float64(*requests)
			key := "http direct"
			if via == n2 {
				key = "http relayed"
			}
			results[key] = append(results[key], sample{rate, p50, p99, cpu})
			fmt.Printf("%s: %.0f req/s, p50 %.0f us, p99 %.0f us, %.1f us CPU per request\n", key, rate, p50, p99, cpu*1e6)

			cpu0 = n1.CPU() + n2.CPU()
			erate := echoRun(via.Addr, *echoes)
			ecpu := (n1.CPU() + n2.CPU() - cpu0) / float64(*echoes)
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
		return procs.Median(v)
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
		procs.Fail(err)
	}
	defer ws.Close()
	read := func(want string) {
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				procs.Fail(err)
			}
			if strings.Contains(string(b), want) {
				return
			}
		}
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"join","name":"bench"}`)); err != nil {
		procs.Fail(err)
	}
	start := time.Now()
	for k := range n {
		text := "m" + strconv.Itoa(k)
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"say","text":"`+text+`"}`)); err != nil {
			procs.Fail(err)
		}
		read(`"` + text + `"`)
	}
	return float64(n) / time.Since(start).Seconds()
}

func get(c *http.Client, addr, path string) {
	res, err := c.Get("http://" + addr + path)
	if err != nil {
		procs.Fail(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		procs.Fail(fmt.Errorf("%s via %s: %d", path, addr, res.StatusCode))
	}
}
