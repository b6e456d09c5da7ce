// Command storelag measures how long a small conditional write waits in an
// embedded store (the directory store, or with -store sqlite the SQLite
// store) that big writes drive as fast as the disk goes: the
// write a node's lease renewal makes, beside the runs and merge parts of
// big actors. Writers overwrite objects of -size bytes at random among
// enough keys to hold -live bytes (so the store's own compaction runs),
// while one goroutine renews a small object under If-Match every 250 ms,
// as a keeper does. It reports the compactions the directory store made, the renewal's latency (p50, p99, max), how
// many renewals took longer than 2 s (the attempt timeout of a lease
// renewal), and the bytes the writers wrote per second.
//
//	go run ./bench/storelag [-dir DIR] [-store dir|sqlite] [-live 4294967296] [-size 8388608] [-writers 4] [-duration 90s]
//
// The fill is bounded by its count, every other loop by -duration; the
// store's directory, if the command made it, is removed however it ends.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io/fs"
	"log"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/bucketurl"
)

func main() {
	dir := flag.String("dir", "", "the store's directory (a new temporary one if empty; removed at the end)")
	store := flag.String("store", "dir", "the store kept in the directory: dir (the directory store) or sqlite (the SQLite store, bucket URL sqlite:DIR)")
	live := flag.Int64("live", 4<<30, "bytes the writers keep live")
	size := flag.Int("size", 8<<20, "bytes of each big write")
	writers := flag.Int("writers", 4, "goroutines writing big objects, each one write at a time")
	duration := flag.Duration("duration", 90*time.Second, "how long the writers run after the fill")
	flag.Parse()
	d := *dir
	var cleanup func()
	if d == "" {
		var err error
		if d, err = os.MkdirTemp("", "storelag-"); err != nil {
			log.Fatal(err)
		}
		cleanup = func() { os.RemoveAll(d) }
	}
	url := d
	switch *store {
	case "dir":
	case "sqlite":
		url = "sqlite:" + d
	default:
		fail(cleanup, fmt.Errorf("-store %q: want dir or sqlite", *store))
	}
	st, closeStore, err := bucketurl.Open(context.Background(), url)
	if err != nil {
		fail(cleanup, err)
	}
	defer func() {
		closeStore()
		if cleanup != nil {
			cleanup()
		}
	}()
	fatal := func(err error) { closeStore(); fail(cleanup, err) }
	ctx := context.Background()
	keys := int(*live / int64(*size))
	body := make([]byte, *size)
	rand.Read(body)

	// The fill: every key once, by the writers.
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range *writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= keys {
					return
				}
				if _, err := st.Put(ctx, fmt.Sprintf("big/%06d", i), body, ownership.Condition{}); err != nil {
					fatal(err)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("filled %d objects of %d bytes (%.1f GiB) in %v\n", keys, *size, float64(*live)/(1<<30), time.Since(start).Round(time.Millisecond))

	etag, err := st.Put(ctx, "lease", []byte("holder n1 until …"), ownership.Condition{})
	if err != nil {
		fatal(err)
	}
	stop := time.Now().Add(*duration)
	var written atomic.Int64
	for range *writers {
		wg.Go(func() {
			for time.Now().Before(stop) {
				k := fmt.Sprintf("big/%06d", mrand.IntN(keys))
				if _, err := st.Put(ctx, k, body, ownership.Condition{}); err != nil {
					fatal(err)
				}
				written.Add(int64(len(body)))
			}
		})
	}
	var lat []time.Duration
	slow := 0
	for time.Now().Before(stop) {
		t := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		e, err := st.Put(cctx, "lease", []byte("holder n1 until …"), ownership.Condition{Kind: ownership.ReplaceOnly, ETag: etag})
		cancel()
		el := time.Since(t)
		if err != nil {
			fatal(fmt.Errorf("renewal after %v: %w", el, err))
		}
		etag = e
		lat = append(lat, el)
		if el > 2*time.Second {
			slow++
		}
		time.Sleep(250 * time.Millisecond)
	}
	wg.Wait()
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Microsecond) }
	fmt.Printf("renewals %d: p50 %v p99 %v max %v, over 2 s: %d\n", len(lat), q(0.5), q(0.99), lat[len(lat)-1].Round(time.Microsecond), slow)
	fmt.Printf("writers: %.0f MB/s\n", float64(written.Load())/duration.Seconds()/1e6)
	fmt.Printf("bytes in %s: %d MiB\n", d, du(d)>>20)
	// Each compaction moves the store to the next segment, whose name
	// `current` holds: seg-<sequence number in hex>, the first 1.
	if cur, err := os.ReadFile(filepath.Join(d, "current")); err == nil {
		if seq, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(cur)), "seg-"), 16, 64); err == nil {
			fmt.Printf("compactions: %d\n", seq-1)
		}
	}
}

// fail reports err and exits, after cleanup (if any).
func fail(cleanup func(), err error) {
	if cleanup != nil {
		cleanup()
	}
	log.Fatal(err)
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
