package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
)

var (
	flagSeed  = flag.Int64("seed", -1, "run only this seed (with -show, print its trace)")
	flagSeeds = flag.Int("seeds", 2000, "how many seeds TestSeeds runs")
	flagFirst = flag.Uint64("first", 0, "the first seed TestSeeds runs")
	flagTrace = flag.Bool("show", false, "print the trace of -seed, readable")
)

func replayCommand(seed uint64) string {
	return fmt.Sprintf("go test ./tests/sim -run 'TestSeeds$' -seed=%d -show", seed)
}

// runSeeds runs seeds on every core and returns the failing ones in order.
func runSeeds(first uint64, count int, each func(w *World)) map[uint64]string {
	// Worlds are small and short-lived: collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	var mu sync.Mutex
	failures := map[uint64]string{}
	next := first
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				seed := next
				next++
				mu.Unlock()
				if seed >= first+uint64(count) {
					return
				}
				w := New(Default(), seed, nil)
				f := w.Run()
				mu.Lock()
				if each != nil {
					each(w)
				}
				if f != "" {
					failures[seed] = f
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failures
}

func TestSeeds(t *testing.T) {
	if *flagSeed >= 0 {
		var tr *os.File
		if *flagTrace {
			tr = os.Stdout
		}
		w := New(Default(), uint64(*flagSeed), tr)
		if f := w.Run(); f != "" {
			t.Fatalf("seed %d: %s\nstats: %+v", *flagSeed, f, w.Stats)
		}
		t.Logf("seed %d: ok, hash %016x, stats %+v", *flagSeed, w.TraceHash(), w.Stats)
		return
	}
	var total Stats
	total.Releases = map[string]int{}
	failures := runSeeds(*flagFirst, *flagSeeds, func(w *World) { total.add(w.Stats) })
	t.Logf("%d seeds: %s", *flagSeeds, total.summary())
	if total.Runs == 0 {
		t.Errorf("%d seeds wrote no run: the simulation does not drive the fence of runs", *flagSeeds)
	}
	if total.LateReleases == 0 || total.Refusals == 0 {
		t.Errorf("%d seeds released no event after its hold ended, or refused none after it ran: the simulation does not drive the output gate", *flagSeeds)
	}
	if total.AlarmsFired == 0 || total.AlarmEnded == 0 {
		t.Errorf("%d seeds fired no alarm, or deleted no index entry: the simulation does not drive alarms", *flagSeeds)
	}
	for seed := *flagFirst; seed < *flagFirst+uint64(*flagSeeds); seed++ {
		if f, ok := failures[seed]; ok {
			t.Errorf("seed %d failed (%d of %d seeds failed): %s\nreplay: %s", seed, len(failures), *flagSeeds, f, replayCommand(seed))
			break
		}
	}
}

// BenchmarkSeed measures one seed of the default run (a few minutes of
// virtual time, three nodes, every fault). The 20,000-seed target: ns/op ×
// 20,000 / cores under two minutes.
func BenchmarkSeed(b *testing.B) {
	var events int
	for i := range b.N {
		w := New(Default(), uint64(i), nil)
		if f := w.Run(); f != "" {
			b.Fatalf("seed %d: %s", i, f)
		}
		events += w.Stats.SimEvents
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/seed")
}
