// Command storage measures what an actor's storage costs in the bucket:
// one `wasmkeep serve` process on a directory bucket (with -store sqlite,
// an SQLite bucket in that directory), the built-in kv class. For actors
// holding about 1 KiB, 1 MiB and 100 MiB it reports the
// bytes the node's actors put to the bucket per 100-byte put, and the bytes
// the node process wrote (the directory store's appends and compaction,
// the puts' answers, the lease's renewals), both for one key
// overwritten and for new keys (which flush runs and merge them), each
// with the writes of the background merges it caused; the time
// to the first answer of an actor after the node restarted (its wake: the
// record's read and write, the seal, the head, and the reads of the key);
// and the node's memory per resident actor of 100 MiB (and, with -huge, the
// same for actors of 1 GiB).
//
//	go run ./bench/storage -bin ./bin/wasmkeep [-store dir|sqlite] [-puts 200] [-new-puts 5000] [-big-new-puts 50000] [-wakes 20] [-big 10] [-huge 0]
//
// The process is started here on 127.0.0.1 and stopped by PID; every run
// is bounded in count.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wasmkeep/wasmkeep/bench/internal/procs"
)

var client = &http.Client{Timeout: 60 * time.Second}

func main() {
	bin := flag.String("bin", "wasmkeep", "the wasmkeep binary")
	puts := flag.Int("puts", 200, "100-byte puts of one key per actor size")
	newPuts := flag.Int("new-puts", 5000, "100-byte puts of new keys to the actors of 1 KiB and 1 MiB")
	bigPuts := flag.Int("big-new-puts", 50000, "100-byte puts of new keys to the actor of 100 MiB (enough for the merges they cause to average out)")
	wakes := flag.Int("wakes", 20, "actors of 1 KiB and of 1 MiB woken after a restart")
	big := flag.Int("big", 10, "actors of 100 MiB")
	huge := flag.Int("huge", 0, "actors of 1 GiB less 16 MiB, the room the puts after the fill take under the 1 GiB bound (each a few minutes to fill)")
	store := flag.String("store", "dir", "the bucket: dir (a directory store) or sqlite (an SQLite store, bucket URL sqlite:DIR)")
	flag.Parse()
	dir, bucket := procs.Workdir("storage")
	switch *store {
	case "dir":
	case "sqlite":
		bucket = "sqlite:" + bucket
	default:
		procs.Fail(fmt.Errorf("-store %q: want dir or sqlite", *store))
	}
	defer procs.StopAll()
	n := procs.New(*bin, dir, bucket, "n1", false, "--idle-timeout", "5m")
	n.Start()

	sizes := slices.DeleteFunc([]size{{"1 KiB", 1 << 10, *wakes}, {"1 MiB", 1 << 20, *wakes}, {"100 MiB", 100 << 20, *big}, {"1 GiB less 16 MiB", 1<<30 - 16<<20, *huge}},
		func(s size) bool { return s.actors == 0 })
	for _, sz := range sizes {
		start := time.Now()
		for i := range sz.actors {
			fill(n.Addr, fmt.Sprintf("s%d-%d", sz.bytes, i), sz.bytes)
		}
		fmt.Printf("filled %d actors of %s in %v (%d puts answered 503 and retried; the node's lease lapsed %.0f times so far)\n",
			sz.actors, sz.label, time.Since(start).Round(time.Millisecond), retried.Swap(0), metric(n.Addr, "wasmkeep_lease_lapses_total"))
	}
	quiet(n)

	for _, sz := range sizes {
		name := fmt.Sprintf("s%d-0", sz.bytes)
		for _, kind := range []string{"one key overwritten", "new keys"} {
			count := *puts
			if kind == "new keys" {
				count = *newPuts
				if sz.bytes >= 100<<20 {
					count = *bigPuts
				}
			}
			// The /metrics answer is written before the count starts,
			// and the one at the end after it ends.
			putBefore := bucketBytes(n.Addr)
			before := n.Written()
			for i := range count {
				key := "hot"
				if kind == "new keys" {
					key = fmt.Sprintf("new%06d", i)
				}
				if st, m := put(n.Addr, name, key, bytes.Repeat([]byte{'a' + byte(i%26)}, 100)); st >= 300 {
					procs.Fail(fmt.Errorf("put: %d %s", st, m))
				}
			}
			quiet(n) // the merges the puts caused, in the background, count too
			wrote, sent := n.Written()-before, bucketBytes(n.Addr)-putBefore
			fmt.Printf("actor of %s, %s: %d bytes put to the bucket per 100-byte put, %d written by the node process (the directory store's log and its compaction, the puts' answers and the lease's renewals included) (%d puts, the merges they caused included; %d answered 503 and retried)\n",
				sz.label, kind, sent/int64(count), wrote/int64(count), count, retried.Swap(0))
		}
	}

	fmt.Printf("the node's lease lapsed %.0f times before the restart\n", metric(n.Addr, "wasmkeep_lease_lapses_total"))
	n.Stop()
	n.Start()
	for _, sz := range sizes {
		rss := n.RSS()
		var took []time.Duration
		for i := range sz.actors {
			start := time.Now()
			res, err := client.Get(fmt.Sprintf("http://%s/actor/kv/s%d-%d/f%05d", n.Addr, sz.bytes, i, i%max(1, sz.bytes>>16)))
			if err != nil {
				procs.Fail(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				procs.Fail(fmt.Errorf("wake of s%d-%d: %d", sz.bytes, i, res.StatusCode))
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		fmt.Printf("actor of %s: first answer after a restart p50 %v, max %v (%d actors); node RSS %+d KiB per woken actor\n", sz.label,
			took[len(took)/2].Round(10*time.Microsecond), took[len(took)-1].Round(10*time.Microsecond), len(took), (n.RSS()-rss)/int64(len(took))>>10)
	}
}

// size is a size of actor the run measures, and how many of it.
type size struct {
	label  string
	bytes  int
	actors int
}

// bucketBytes is what the node's actors have put to the bucket (heads and
// runs), from its /metrics.
func bucketBytes(addr string) int64 {
	return int64(metric(addr, "wasmkeep_storage_head_written_bytes_total") + metric(addr, "wasmkeep_storage_run_written_bytes_total"))
}

// metric is the sum of the series of one metric without labels in the
// node's /metrics.
func metric(addr, name string) float64 {
	res, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		procs.Fail(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var n float64
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			n += f
		}
	}
	return n
}

// quiet waits until the node writes less than 64 KiB in 2 s (its merges
// are done; what is left is its lease, and the directory store's own
// upkeep), at most 5 minutes.
func quiet(n *procs.Node) {
	last := n.Written()
	for range 150 {
		time.Sleep(2 * time.Second)
		w := n.Written()
		if w-last < 64<<10 {
			return
		}
		last = w
	}
	fmt.Println("the node kept writing for 5 minutes")
}

// fill stores size bytes of keys and values in actor name, in values of
// up to 64 KiB under keys f00000, f00001, ...
func fill(addr, name string, size int) {
	for i := 0; size > 0; i++ {
		key := fmt.Sprintf("f%05d", i)
		v := max(1, min(size-len(key), 64<<10))
		size -= len(key)
		if st, m := put(addr, name, key, bytes.Repeat([]byte("v"), v)); st >= 300 {
			procs.Fail(fmt.Errorf("fill %s: %d %s", name, st, m))
		}
		size -= v
	}
}

// retried counts the puts answered 503 and sent again.
var retried atomic.Int64

// put stores body under key in kv actor name. A 503 (the actor unavailable
// for a moment, with Retry-After) is retried after a second, up to 30
// times, as a client would, and counted.
func put(addr, name, key string, body []byte) (int, string) {
	for try := 0; ; try++ {
		req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://%s/actor/kv/%s/%s", addr, name, key), bytes.NewReader(body))
		res, err := client.Do(req)
		if err != nil {
			procs.Fail(err)
		}
		msg, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || try == 30 {
			return res.StatusCode, string(msg)
		}
		retried.Add(1)
		time.Sleep(time.Second)
	}
}
