// Command actorlist measures what `wasmkeep actors list` costs on a class
// of many actors: it writes -actors actors' objects straight into a bucket
// (a state object each, a run for one in ten, an ownership record each, a
// third of them held by a live node, the others free, and that node's
// lease), then lists the class -reps times in each of three ways: the
// listings alone (--records=false), with the records (the default), and
// with the records and the state objects' headers (--writes). For each it
// reports the bucket requests (LIST, GET, ranged GET) that
// cluster.ListActors made, counted by a wrapper of the bucket, and the
// median time; then the median time of the command itself, run
// in-process, opening the bucket as it does.
//
//	go run ./bench/actorlist [-actors 10000] [-store dir,s3] [-reps 3]
//
// The directory bucket is in a temporary directory; the S3 bucket is a
// versitygw (internal/s3test) on 127.0.0.1, with explicit credentials.
// Both are removed, and the server stopped, however the run ends; every
// loop is bounded by its count.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmkeep/wasmkeep/cli"
	"github.com/wasmkeep/wasmkeep/internal/s3test"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/s3store"
)

const class = "bench"

func main() {
	n := flag.Int("actors", 10000, "actors of the class")
	stores := flag.String("store", "dir,s3", "the buckets to measure: dir, s3, or both")
	reps := flag.Int("reps", 3, "listings of each kind")
	flag.Parse()
	for _, s := range strings.Split(*stores, ",") {
		var err error
		switch s {
		case "dir":
			err = onDir(*n, *reps)
		case "s3":
			err = onS3(*n, *reps)
		default:
			err = fmt.Errorf("unknown store %q", s)
		}
		if err != nil {
			log.Fatal(err)
		}
	}
}

func onDir(n, reps int) error {
	dir, err := os.MkdirTemp("", "wasmkeep-actorlist-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b, err := dirstore.Open(dir)
	if err != nil {
		return err
	}
	defer b.Close()
	return measure("directory bucket", b, dir, n, reps)
}

func onS3(n, reps int) error {
	srv, stop, err := s3test.StartMain()
	if err != nil {
		return err
	}
	defer stop()
	for k, v := range srv.Env() {
		os.Setenv(k, v)
	}
	b, err := s3store.New(context.Background(), srv.Config("bench/"))
	if err != nil {
		return err
	}
	return measure("versitygw "+s3test.VersitygwVersion+" on 127.0.0.1", b, srv.URL("bench/"), n, reps)
}

// fill writes n actors' objects into b, 64 writes at a time.
func fill(ctx context.Context, b ownership.Bucket, n int) error {
	lease := ownership.Lease{Node: "n1", Instance: "i1", Addr: "127.0.0.1:1", TTLMilli: 10000, State: ownership.LeaseLive,
		Seq: 1, Nonce: "bench", WrittenAt: time.Now().UnixMilli()}
	if _, err := b.Put(ctx, ownership.NodeKey("n1"), ownership.EncodeLease(lease), ownership.Always()); err != nil {
		return err
	}
	var failed atomic.Value
	next := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				a := ownership.Actor{Class: class, Name: fmt.Sprintf("a%05d", i)}
				put := func(key string, body []byte) {
					if _, err := b.Put(ctx, key, body, ownership.Always()); err != nil {
						failed.Store(err)
					}
				}
				put(ownership.StateKey(a), ownership.EncodeState(ownership.StateHeader{Gen: 1, Seq: uint64(i%7 + 1)},
					[]byte(strings.Repeat("x", 40+i%100))))
				if i%10 == 0 {
					put(ownership.RunKey(a, 1, uint64(i)), make([]byte, 4096))
				}
				put(ownership.OwnerKey(a), ownership.EncodeRecord(ownership.Record{Class: class, Name: a.Name,
					Node: "n1", Instance: "i1", Generation: 1, Held: i%3 == 0, Nonce: fmt.Sprint("bench-", i)}))
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return err
	}
	return nil
}

// counting counts the requests made of a bucket.
type counting struct {
	ownership.Bucket
	lists, gets, ranges atomic.Int64
}

func (c *counting) Get(ctx context.Context, key string) (ownership.Object, error) {
	c.gets.Add(1)
	return c.Bucket.Get(ctx, key)
}

func (c *counting) List(ctx context.Context, prefix, startAfter string, limit int) (ownership.ListPage, error) {
	c.lists.Add(1)
	return c.Bucket.List(ctx, prefix, startAfter, limit)
}

func (c *counting) GetRange(ctx context.Context, key string, off, n int64) (ownership.Object, error) {
	c.ranges.Add(1)
	return ownership.ReadRange(ctx, c.Bucket, key, off, n)
}

func measure(name string, b ownership.Bucket, url string, n, reps int) error {
	ctx := context.Background()
	start := time.Now()
	if err := fill(ctx, b, n); err != nil {
		return fmt.Errorf("%s: fill: %w", name, err)
	}
	fmt.Printf("%s: %d actors written in %v\n\n", name, n, time.Since(start).Round(time.Millisecond))
	fmt.Printf("| listing | LIST | GET | ranged GET | median time (of %d) | command, median |\n| --- | --- | --- | --- | --- | --- |\n", reps)
	for _, way := range []struct {
		name string
		opt  cluster.ActorOptions
		args []string
	}{
		{"listings alone (`--records=false`)", cluster.ActorOptions{}, []string{"--records=false"}},
		{"with records (default)", cluster.ActorOptions{Records: true}, nil},
		{"with records and headers (`--writes`)", cluster.ActorOptions{Records: true, Headers: true}, []string{"--writes"}},
	} {
		var times, cmdTimes []time.Duration
		var c *counting
		for range reps {
			c = &counting{Bucket: b}
			t0 := time.Now()
			l, err := cluster.ListActors(ctx, c, class, way.opt, time.Now())
			times = append(times, time.Since(t0))
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if len(l.Actors) != n {
				return fmt.Errorf("%s: listed %d actors, want %d", name, len(l.Actors), n)
			}
			var errOut strings.Builder
			t0 = time.Now()
			args := append([]string{"actors", "list", class, "--bucket", url}, way.args...)
			if code := cli.Run(ctx, args, io.Discard, &errOut); code != 0 {
				return fmt.Errorf("%s: %s: exit %d: %s", name, strings.Join(args, " "), code, errOut.String())
			}
			cmdTimes = append(cmdTimes, time.Since(t0))
		}
		fmt.Printf("| %s | %d | %d | %d | %v | %v |\n", way.name, c.lists.Load(), c.gets.Load(), c.ranges.Load(),
			median(times), median(cmdTimes))
	}
	fmt.Println()
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}
