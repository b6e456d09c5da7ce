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
	flagSeed       = flag.Int64("seed", -1, "run only this seed (with -show, print its trace)")
	flagSeeds      = flag.Int("seeds", 2000, "how many seeds TestSeeds runs")
	flagHeavySeeds = flag.Int("heavy-seeds", 1000, "how many seeds TestAlarmHeavySeeds runs")
	flagFirst      = flag.Uint64("first", 0, "the first seed TestSeeds and TestAlarmHeavySeeds run")
	flagTrace      = flag.Bool("show", false, "print the trace of -seed, readable")
	flagParams     = flag.String("params", "default", "the parameters of TestSeeds and TestVariantRun: default, or alarm-heavy (AlarmHeavy)")
)

// paramsByName names the parameters a run may take.
var paramsByName = map[string]func() Params{"default": Default, "alarm-heavy": AlarmHeavy}

// params are the parameters -params names.
func params() Params {
	p, ok := paramsByName[*flagParams]
	if !ok {
		panic(fmt.Sprintf("sim: unknown -params %q", *flagParams))
	}
	return p()
}

func replayCommand(name string, seed uint64) string {
	if name != "default" {
		return fmt.Sprintf("go test ./tests/sim -run 'TestSeeds$' -params=%s -seed=%d -show", name, seed)
	}
	return fmt.Sprintf("go test ./tests/sim -run 'TestSeeds$' -seed=%d -show", seed)
}

// runSeeds runs seeds of the parameters p on every core and returns the
// failing ones in order.
func runSeeds(p Params, first uint64, count int, each func(w *World)) map[uint64]string {
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
				w := New(p, seed, nil)
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

// testSeeds runs count seeds of the parameters name, fails the test at
// the first that fails, and returns the runs' counts.
func testSeeds(t *testing.T, name string, count int) Stats {
	var total Stats
	total.Releases = map[string]int{}
	failures := runSeeds(paramsByName[name](), *flagFirst, count, func(w *World) { total.add(w.Stats) })
	t.Logf("%d seeds (%s): %s", count, name, total.summary())
	for seed := *flagFirst; seed < *flagFirst+uint64(count); seed++ {
		if f, ok := failures[seed]; ok {
			t.Errorf("seed %d failed (%d of %d seeds failed): %s\nreplay: %s", seed, len(failures), count, f, replayCommand(name, seed))
			break
		}
	}
	return total
}

func TestSeeds(t *testing.T) {
	if *flagSeed >= 0 {
		var tr *os.File
		if *flagTrace {
			tr = os.Stdout
		}
		w := New(params(), uint64(*flagSeed), tr)
		if f := w.Run(); f != "" {
			t.Fatalf("seed %d: %s\nstats: %+v", *flagSeed, f, w.Stats)
		}
		t.Logf("seed %d: ok, hash %016x, stats %+v", *flagSeed, w.TraceHash(), w.Stats)
		return
	}
	params() // an unknown -params fails here
	total := testSeeds(t, *flagParams, *flagSeeds)
	if total.Runs == 0 {
		t.Errorf("%d seeds wrote no run: the simulation does not drive the fence of runs", *flagSeeds)
	}
	if total.LateReleases == 0 || total.Refusals == 0 {
		t.Errorf("%d seeds released no event after its hold ended, or refused none after it ran: the simulation does not drive the output gate", *flagSeeds)
	}
	if total.AlarmsFired == 0 || total.AlarmEnded == 0 {
		t.Errorf("%d seeds fired no alarm, or deleted no index entry: the simulation does not drive alarms", *flagSeeds)
	}
}

// TestAlarmHeavySeeds runs the correct code on the seeds of AlarmHeavy
// that the alarm variants run (reload-without-fence): what those catch is
// their fault, not the parameters'.
func TestAlarmHeavySeeds(t *testing.T) {
	if *flagSeed >= 0 {
		t.Skip("a single seed: TestSeeds -params=alarm-heavy runs it")
	}
	total := testSeeds(t, "alarm-heavy", *flagHeavySeeds)
	if total.AlarmsFired == 0 || total.Unknowns == 0 {
		t.Errorf("%d seeds fired no alarm, or left no commit's outcome unknown: the parameters do not drive alarms against commits in flight", *flagHeavySeeds)
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
