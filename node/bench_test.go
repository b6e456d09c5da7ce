package node_test

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/wasmkeep/wasmkeep/internal/nodetest"
)

// BenchmarkRequest: GETs through a whole node over loopback HTTP, read-only
// (?read: no commit), spread over 1,000 counters, from parallel clients:
// the way of an event (ingress, Dispatch, the keeper's live holds, the
// director, the resident actor, the output gate) without the bucket.
func BenchmarkRequest(b *testing.B) { benchRequest(b, "?read") }

// BenchmarkRequestCommit: the same with a commit each (the counter counts).
func BenchmarkRequestCommit(b *testing.B) { benchRequest(b, "") }

func benchRequest(b *testing.B, query string) {
	n := nodetest.Start(b, nodetest.Options{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for i := range 1000 {
		res, err := client.Get(fmt.Sprintf("%s/actor/counter/c%d", n.URL, i))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	var next atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) % 1000
			res, err := client.Get(fmt.Sprintf("%s/actor/counter/c%d%s", n.URL, i, query))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
}
