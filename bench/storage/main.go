// Command storage measures what an actor's storage costs in the bucket
// today: one `wasmkeep serve` process on a directory bucket, the built-in
// kv class. For actors holding about 1 KiB and about 1 MiB (the default
// state limit; a larger one is refused), it reports the bytes the node
// process wrote per 100-byte put (the same key overwritten, so the state
// keeps its size; the directory store's appends, and the few bytes of each
// HTTP answer), and the time to the first answer of an actor
// after the node restarted (its wake: the record's read and write, the
// seal and the load of its whole state).
//
//	go run ./bench/storage -bin ./bin/wasmkeep [-puts 200] [-wakes 20]
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
	"time"

	"github.com/wasmkeep/wasmkeep/bench/internal/procs"
)

var client = &http.Client{Timeout: 30 * time.Second}

func main() {
	bin := flag.String("bin", "wasmkeep", "the wasmkeep binary")
	puts := flag.Int("puts", 200, "100-byte puts per actor size")
	wakes := flag.Int("wakes", 20, "actors of each size woken after a restart")
	flag.Parse()
	dir, bucket := procs.Workdir("storage")
	defer procs.StopAll()
	n := procs.New(*bin, dir, bucket, "n1", false, "--idle-timeout", "5m")
	n.Start()

	sizes := []struct {
		label string
		bytes int
	}{{"1 KiB", 1 << 10}, {"1 MiB", 1<<20 - 64<<10}} // under the 1 MiB bound, with room for the keys
	for _, sz := range sizes {
		for i := range *wakes {
			fill(n.Addr, fmt.Sprintf("s%d-%d", sz.bytes, i), sz.bytes)
		}
	}
	// The bound itself, as a user meets it: a 100 MiB actor is refused.
	status, msg := put(n.Addr, "big", "k0", bytes.Repeat([]byte("x"), 128<<10))
	for i := 1; status < 400 && i < 10; i++ {
		status, msg = put(n.Addr, "big", fmt.Sprintf("k%d", i), bytes.Repeat([]byte("x"), 128<<10))
	}
	fmt.Printf("an actor past the state bound: %d %s", status, msg)

	for _, sz := range sizes {
		name := fmt.Sprintf("s%d-0", sz.bytes)
		before := n.Written()
		for i := range *puts {
			if st, m := put(n.Addr, name, "hot", bytes.Repeat([]byte{'a' + byte(i%26)}, 100)); st >= 300 {
				procs.Fail(fmt.Errorf("put: %d %s", st, m))
			}
		}
		wrote := n.Written() - before
		fmt.Printf("actor of %s: %d bytes written per 100-byte put (%d puts)\n", sz.label, wrote/int64(*puts), *puts)
	}

	n.Stop()
	n.Start()
	for _, sz := range sizes {
		var took []time.Duration
		for i := range *wakes {
			start := time.Now()
			res, err := client.Get(fmt.Sprintf("http://%s/actor/kv/s%d-%d/hot", n.Addr, sz.bytes, i))
			if err != nil {
				procs.Fail(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		fmt.Printf("actor of %s: first answer after a restart p50 %v, max %v (%d actors)\n", sz.label,
			took[len(took)/2].Round(10*time.Microsecond), took[len(took)-1].Round(10*time.Microsecond), len(took))
	}
}

// fill stores about size bytes in actor name, in values of up to 64 KiB.
func fill(addr, name string, size int) {
	for i := 0; size > 0; i++ {
		v := min(size, 64<<10)
		if st, m := put(addr, name, fmt.Sprintf("f%04d", i), bytes.Repeat([]byte("v"), v)); st >= 300 {
			procs.Fail(fmt.Errorf("fill %s: %d %s", name, st, m))
		}
		size -= v
	}
}

func put(addr, name, key string, body []byte) (int, string) {
	req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://%s/actor/kv/%s/%s", addr, name, key), bytes.NewReader(body))
	res, err := client.Do(req)
	if err != nil {
		procs.Fail(err)
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(msg)
}
