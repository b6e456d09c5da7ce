package wasmhost

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// cpuTime is the CPU time of the process so far, all threads (the garbage
// collector included).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startPath is a way of starting guests, for comparing them in one
// run.
type startPath struct {
	name  string
	alloc bool // memories in mappings (memory.go)
	reuse bool // freed mappings kept for the next guests
	merge bool // mergeDataSegments
	image bool // data segments in an image (memory.go)
	warm  bool // pages touched at start populated in one call (warmth)
}

// startPaths are the ways compared; the first, wazero's defaults, is the
// path before the host made its own memories and merged segments.
var startPaths = []startPath{
	{name: "wazero"},
	{name: "merge", merge: true},
	{name: "mmap", alloc: true},
	{name: "mmap+merge", alloc: true, merge: true},
	{name: "mmap+merge+reuse", alloc: true, reuse: true, merge: true},
	{name: "mmap+image", alloc: true, merge: true, image: true},
	{name: "mmap+image+warm", alloc: true, merge: true, image: true, warm: true},
	{name: "mmap+image+reuse", alloc: true, reuse: true, merge: true, image: true, warm: true}, // the default
}

// compile returns the counter compiled on a runtime that starts guests
// the way p does.
func (p startPath) compile(tb testing.TB, cfg Config) *Module {
	tb.Helper()
	r := newRuntime(tb, cfg)
	r.merge, r.images, r.warm = p.merge, p.image, p.warm
	if !p.alloc {
		r.alloc = nil
	} else if a, ok := r.alloc.(interface{ setKeep(int) }); ok && !p.reuse {
		a.setKeep(0)
	}
	m := mustCompile(tb, r, "bench", guest(tb, counterGuest))
	return m
}

// baseline keeps the metrics of the first path measured in this run, so
// that the others report their ratio to it (x-<metric>).
var baseline = map[string]float64{}

func reportVsBaseline(b *testing.B, path, unit string, v float64) {
	b.ReportMetric(v, unit)
	if path == startPaths[0].name {
		baseline[unit] = v
	} else if base, ok := baseline[unit]; ok && base > 0 {
		b.ReportMetric(v/base, "x-"+unit)
	}
}

// BenchmarkStart measures starting one Go guest (instantiate, _initialize,
// ABI check) and its first event, along each start path; guest-bytes is the
// linear memory a guest holds after it, cpu-ns the process CPU time per
// start (garbage collection included), x-cpu-ns its ratio to the first
// path's.
func BenchmarkStart(b *testing.B) {
	for _, p := range startPaths {
		b.Run(p.name, func(b *testing.B) {
			m := p.compile(b, Config{Prestart: -1})
			ctx := context.Background()
			req, st := get("", "read"), memStorage{}
			var size uint32
			b.ReportAllocs()
			runtime.GC()
			cpu0 := cpuTime(b)
			for b.Loop() {
				g := m.NewGuest(nil)
				if _, err := g.Handle(ctx, req, st); err != nil {
					b.Fatal(err)
				}
				size = g.w.mod.Memory().Size()
				g.Close()
			}
			reportVsBaseline(b, p.name, "cpu-ns/op", float64(cpuTime(b)-cpu0)/float64(b.N))
			b.ReportMetric(float64(size), "guest-bytes")
		})
	}
}

// BenchmarkRequest measures one event on a resident guest of the
// counter: a request in, a storage get and put, a response out; shared:
// the same on a shared guest (isolation class), its token taken and given
// back by each event.
func BenchmarkRequest(b *testing.B) {
	b.Run("shared", func(b *testing.B) {
		m := mustCompile(b, newRuntime(b, Config{}), "bench", guest(b, counterGuest))
		a := m.NewResident(ownership.Actor{Class: "bench", Name: "hot"})
		defer a.Close()
		ctx, req, st := context.Background(), get("", ""), memStorage{}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Handle(ctx, req, st); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bc := range []struct {
		name string
		cfg  Config
	}{{"timeout", Config{}}, {"notimeout", Config{NoEventTimeout: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			g := newGuest(b, bc.cfg, counterGuest)
			ctx, req, st := context.Background(), get("", ""), memStorage{}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Handle(ctx, req, st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSpin measures compute-bound guest code (10^6 xorshift rounds
// per event) with and without the event timeout, whose close-on-done
// checks slow guest loops down.
func BenchmarkSpin(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{{"timeout", Config{}}, {"notimeout", Config{NoEventTimeout: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			g := newGuest(b, bc.cfg, probeGuest)
			ctx, req, st := context.Background(), get("/spin", "n=1000000"), memStorage{}
			for b.Loop() {
				if _, err := g.Handle(ctx, req, st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// rss is the resident set size of the process, from /proc (Linux only).
func rss(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		tb.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// pss is the proportional set size of the process (Linux): a page shared
// by n mappings counts 1/n.
func pss(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		tb.Skip("no /proc/self/smaps_rollup")
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Skip("no Pss in /proc/self/smaps_rollup")
	return 0
}

// BenchmarkResident measures the memory that resident guests of the
// counter hold, along each start path: rss-bytes is the growth of the
// process's resident set per guest, with 200 guests resident after one
// event each, measured after a garbage collection that returns freed memory
// to the system; x-rss-bytes is its ratio to the first path's. pss-bytes is
// the growth of the proportional set size: pages shared by several guests
// (an image's) count once there, but once per guest in the resident set.
func BenchmarkResident(b *testing.B) {
	for _, p := range startPaths {
		b.Run(p.name, func(b *testing.B) {
			const n = 200
			m := p.compile(b, Config{Prestart: -1})
			ctx := context.Background()
			req, st := get("", "read"), memStorage{}
			var perGuest, pssPer float64
			for b.Loop() {
				debug.FreeOSMemory()
				before, pss0 := rss(b), pss(b)
				gs := make([]*Guest, n)
				for i := range gs {
					gs[i] = m.NewGuest(nil)
					if _, err := gs[i].Handle(ctx, req, st); err != nil {
						b.Fatal(err)
					}
				}
				debug.FreeOSMemory()
				perGuest, pssPer = float64(rss(b)-before)/n, float64(pss(b)-pss0)/n
				for _, g := range gs {
					g.Close()
				}
			}
			reportVsBaseline(b, p.name, "rss-bytes", perGuest)
			reportVsBaseline(b, p.name, "pss-bytes", pssPer)
		})
	}
}

// BenchmarkWake measures the latency of an actor's first event after a
// wake (ns/op: a new Guest's first Handle, start included) without and
// with the default pool of started guests (Config.Prestart), each
// wake after the pool is full again; cpu-ns is all the process CPU time per
// wake, the pool's background starts included, and x-ns its ratio to no
// pool.
func BenchmarkWake(b *testing.B) {
	var base float64
	for _, prestart := range []int{-1, DefaultPrestart} {
		b.Run("prestart="+strconv.Itoa(prestart), func(b *testing.B) {
			m := startPaths[len(startPaths)-1].compile(b, Config{Prestart: prestart})
			defer m.Close(context.Background())
			ctx := context.Background()
			req, st := get("", "read"), memStorage{}
			wake := func() {
				g := m.NewGuest(nil)
				if _, err := g.Handle(ctx, req, st); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				g.Close()
				waitPool(b, m)
			}
			wake() // starts filling the pool
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				b.StartTimer()
				wake()
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
			ns := float64(b.Elapsed()) / float64(b.N)
			if prestart < 0 {
				base = ns
			} else if base > 0 {
				b.ReportMetric(ns/base, "x-ns/op")
			}
		})
	}
}

// BenchmarkIdle measures the memory a runtime keeps once all its actors
// have hibernated: 100 guests of the counter are started, serve an
// event each and are closed, with the default pool. idle-bytes is the
// growth of the process's resident set then (kept mappings and the
// pool's started guests), trimmed-bytes after the trim steps of a
// Config.TrimInterval without a start (Runtime.trim), both measured after
// a garbage collection that returns freed memory to the system.
func BenchmarkIdle(b *testing.B) {
	const n = 100
	ctx := context.Background()
	wasm := guest(b, counterGuest)
	req, st := get("", "read"), memStorage{}
	var idle, trimmed float64
	for b.Loop() {
		r := newRuntime(b, Config{TrimInterval: -1}) // trim steps by hand
		m := mustCompile(b, r, "bench", wasm)
		debug.FreeOSMemory()
		before := rss(b)
		gs := make([]*Guest, n)
		for i := range gs {
			gs[i] = m.NewGuest(nil)
			if _, err := gs[i].Handle(ctx, req, st); err != nil {
				b.Fatal(err)
			}
		}
		for _, g := range gs {
			g.Close()
		}
		waitPool(b, m)
		debug.FreeOSMemory()
		idle = float64(rss(b) - before)
		for range trimSteps + 1 {
			r.trim()
		}
		debug.FreeOSMemory()
		trimmed = float64(rss(b) - before)
		if err := m.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(idle, "idle-bytes")
	b.ReportMetric(trimmed, "trimmed-bytes")
}
