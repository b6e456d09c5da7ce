// Command embedstore measures the two embedded stores against each other
// in one process: the directory store (ownership/dirstore) and the SQLite
// store (ownership/sqlitestore), each in a fresh directory of its own, the
// same workloads, alternating which store goes first at every rep. The
// workloads, each for -duration:
//
//   - renew-1, renew-16: If-Match renewals of 200-byte objects (a lease, an
//     actor's head), from 1 and from 16 goroutines, each its own key;
//   - put-1MiB: unconditional puts of 1 MiB objects from 4 goroutines,
//     over 256 keys (so both stores reclaim what is overwritten);
//   - get-200B, get-1MiB: Gets of 200-byte objects (1,000 keys) and of
//     1 MiB objects (the put's keys), from 16 goroutines;
//   - range-16KiB: range reads of 16 KiB at random offsets of the 1 MiB
//     objects (a block of a run), from 16 goroutines;
//   - list-1000: List of one page of 1,000 keys, from 1 goroutine.
//
// It prints each rep's ops/s and the process's CPU per op, then a table of
// the medians, the ratio sqlite/dir of the medians and the median of the
// reps' own ratios (each rep's two runs ran back to back), and the bytes
// each directory holds at the end.
//
//	go run ./bench/embedstore [-reps 3] [-duration 3s] [-dir /tmp]
//
// Every loop is bounded by -duration; the directories are removed at the
// end.
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
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/sqlitestore"
)

type store struct {
	name string
	open func(dir string) (ownership.RangeReader, func() error, error)
}

var stores = []store{
	{"dir", func(dir string) (ownership.RangeReader, func() error, error) {
		s, err := dirstore.Open(dir)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}},
	{"sqlite", func(dir string) (ownership.RangeReader, func() error, error) {
		s, err := sqlitestore.Open(dir, sqlitestore.Options{})
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}},
}

type workload struct {
	name string
	// prepare writes what the workload reads or renews; run does one op
	// of goroutine g.
	goroutines int
	prepare    func(b ownership.RangeReader, st *state)
	run        func(b ownership.RangeReader, st *state, g int) error
}

// state is what one store's workloads share within a rep.
type state struct {
	small []ownership.ETag // renew keys' ETags, by goroutine
	mu    sync.Mutex
}

var (
	small = make([]byte, 200)
	big   = make([]byte, 1<<20)
	ctx   = context.Background()
)

const bigKeys = 256

var workloads = []workload{
	{"renew-1", 1, prepareRenew, renew},
	{"renew-16", 16, prepareRenew, renew},
	{"put-1MiB", 4, nil, func(b ownership.RangeReader, _ *state, _ int) error {
		_, err := b.Put(ctx, fmt.Sprintf("big/%04d", mrand.IntN(bigKeys)), big, ownership.Always())
		return err
	}},
	{"get-200B", 16, func(b ownership.RangeReader, _ *state) {
		for i := range 1000 {
			must(b.Put(ctx, fmt.Sprintf("small/%04d", i), small, ownership.Always()))
		}
	}, func(b ownership.RangeReader, _ *state, _ int) error {
		_, err := b.Get(ctx, fmt.Sprintf("small/%04d", mrand.IntN(1000)))
		return err
	}},
	{"get-1MiB", 16, fillBig, func(b ownership.RangeReader, _ *state, _ int) error {
		_, err := b.Get(ctx, fmt.Sprintf("big/%04d", mrand.IntN(bigKeys)))
		return err
	}},
	{"range-16KiB", 16, fillBig, func(b ownership.RangeReader, _ *state, _ int) error {
		_, err := b.GetRange(ctx, fmt.Sprintf("big/%04d", mrand.IntN(bigKeys)), int64(mrand.IntN(64))<<14, 16<<10)
		return err
	}},
	{"list-1000", 1, nil, func(b ownership.RangeReader, _ *state, _ int) error {
		page, err := b.List(ctx, "small/", "", 1000)
		if err == nil && len(page.Entries) != 1000 {
			err = fmt.Errorf("listed %d keys, want 1000", len(page.Entries))
		}
		return err
	}},
}

func prepareRenew(b ownership.RangeReader, st *state) {
	st.small = make([]ownership.ETag, 16)
	for g := range st.small {
		e, err := b.Put(ctx, fmt.Sprintf("renew/%02d", g), small, ownership.Always())
		must(e, err)
		st.small[g] = e
	}
}

func renew(b ownership.RangeReader, st *state, g int) error {
	e, err := b.Put(ctx, fmt.Sprintf("renew/%02d", g), small, ownership.IfMatch(st.small[g]))
	if err == nil {
		st.small[g] = e
	}
	return err
}

// fillBig writes every big key once, unless the put workload has.
func fillBig(b ownership.RangeReader, _ *state) {
	for i := range bigKeys {
		k := fmt.Sprintf("big/%04d", i)
		if _, err := b.Get(ctx, k); err == nil {
			continue
		}
		must(b.Put(ctx, k, big, ownership.Always()))
	}
}

func main() {
	reps := flag.Int("reps", 3, "reps of every workload on every store")
	dur := flag.Duration("duration", 3*time.Second, "time of each workload on each store")
	parent := flag.String("dir", "", "where the stores' directories go (the system's temporary directory if empty)")
	flag.Parse()
	rand.Read(small)
	rand.Read(big)
	// rates[workload][store] are the reps' ops/s; cpus the CPU µs per op.
	rates := map[string]map[string][]float64{}
	cpus := map[string]map[string][]float64{}
	sizes := map[string][]float64{}
	for _, w := range workloads {
		rates[w.name], cpus[w.name] = map[string][]float64{}, map[string][]float64{}
	}
	for rep := range *reps {
		order := slices.Clone(stores)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		type opened struct {
			b     ownership.RangeReader
			close func() error
			dir   string
			st    *state
		}
		open := map[string]*opened{}
		for _, s := range stores {
			dir, err := os.MkdirTemp(*parent, "embedstore-"+s.name+"-")
			if err != nil {
				log.Fatal(err)
			}
			b, closeFn, err := s.open(dir)
			if err != nil {
				log.Fatal(err)
			}
			open[s.name] = &opened{b, closeFn, dir, &state{}}
		}
		for _, w := range workloads {
			for _, s := range order {
				o := open[s.name]
				if w.prepare != nil {
					w.prepare(o.b, o.st)
				}
				n, el, cpu := measure(o.b, o.st, w, *dur)
				rate, perOp := float64(n)/el.Seconds(), float64(cpu.Microseconds())/float64(n)
				rates[w.name][s.name] = append(rates[w.name][s.name], rate)
				cpus[w.name][s.name] = append(cpus[w.name][s.name], perOp)
				fmt.Printf("rep %d %-12s %-6s %10.0f ops/s %8.1f cpu-µs/op\n", rep, w.name, s.name, rate, perOp)
			}
		}
		for _, s := range stores {
			o := open[s.name]
			sizes[s.name] = append(sizes[s.name], float64(du(o.dir)))
			if err := o.close(); err != nil {
				log.Print(err)
			}
			os.RemoveAll(o.dir)
		}
	}
	fmt.Printf("\n| workload | dir ops/s | sqlite ops/s | sqlite/dir | sqlite/dir of each rep, median (range) | dir CPU µs/op | sqlite CPU µs/op |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range workloads {
		d, q := median(rates[w.name]["dir"]), median(rates[w.name]["sqlite"])
		var pairs []float64
		for i := range rates[w.name]["dir"] {
			pairs = append(pairs, rates[w.name]["sqlite"][i]/rates[w.name]["dir"][i])
		}
		slices.Sort(pairs)
		fmt.Printf("| %s | %.0f | %.0f | %.3f | %.3f (%.3f to %.3f) | %.1f | %.1f |\n", w.name, d, q, q/d,
			median(pairs), pairs[0], pairs[len(pairs)-1], median(cpus[w.name]["dir"]), median(cpus[w.name]["sqlite"]))
	}
	fmt.Printf("\nbytes in the directory at the end of a rep (median): dir %.0f MiB, sqlite %.0f MiB\n",
		median(sizes["dir"])/(1<<20), median(sizes["sqlite"])/(1<<20))
}

// measure runs w on b for d and returns the ops done, the time taken and
// the process's CPU time meanwhile.
func measure(b ownership.RangeReader, st *state, w workload, d time.Duration) (int64, time.Duration, time.Duration) {
	var n atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	cpu0, t0 := cpuTime(), time.Now()
	for g := range w.goroutines {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := w.run(b, st, g); err != nil {
					log.Fatalf("%s: %v", w.name, err)
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), time.Since(t0), cpuTime() - cpu0
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(vs []float64) float64 {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// du is the disk space the files under dir take, as du counts it (their
// blocks).
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

func must(_ ownership.ETag, err error) {
	if err != nil {
		log.Fatal(err)
	}
}
