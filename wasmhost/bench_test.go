package wasmhost

import (
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// BenchmarkStart measures starting one wasm instance of a Go guest
// (instantiate, _initialize, ABI check) and its first event; guest-bytes
// is the linear memory an instance holds after it, cpu-ns the process CPU
// time per start (garbage collection included).
func BenchmarkStart(b *testing.B) {
	r := newRuntime(b, Config{})
	m, err := r.Compile(context.Background(), "bench", guest(b, counterGuest))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req, st := get("", "read"), memStorage{}
	var size uint32
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		in := m.NewInstance(nil)
		if _, err := in.Handle(ctx, req, st); err != nil {
			b.Fatal(err)
		}
		size = in.mod.Memory().Size()
		in.Close()
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(size), "guest-bytes")
}

// BenchmarkRequest measures one event on a resident instance of the
// counter: a request in, a storage get and put, a response out.
func BenchmarkRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{{"timeout", Config{}}, {"notimeout", Config{NoEventTimeout: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			in := newInstance(b, bc.cfg, counterGuest)
			ctx, req, st := context.Background(), get("", ""), memStorage{}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := in.Handle(ctx, req, st); err != nil {
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
			in := newInstance(b, bc.cfg, probeGuest)
			ctx, req, st := context.Background(), get("/spin", "n=1000000"), memStorage{}
			for b.Loop() {
				if _, err := in.Handle(ctx, req, st); err != nil {
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

// BenchmarkResident measures the memory that resident instances of the
// counter hold: rss-bytes is the growth of the process's resident set per
// instance, with 50 instances resident after one event each, measured
// after returning freed memory to the system.
func BenchmarkResident(b *testing.B) {
	const n = 50
	r := newRuntime(b, Config{})
	m, err := r.Compile(context.Background(), "bench", guest(b, counterGuest))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req, st := get("", "read"), memStorage{}
	var perInstance float64
	for b.Loop() {
		debug.FreeOSMemory()
		before := rss(b)
		ins := make([]*Instance, n)
		for i := range ins {
			ins[i] = m.NewInstance(nil)
			if _, err := ins[i].Handle(ctx, req, st); err != nil {
				b.Fatal(err)
			}
		}
		debug.FreeOSMemory()
		perInstance = float64(rss(b)-before) / n
		for _, in := range ins {
			in.Close()
		}
	}
	b.ReportMetric(perInstance, "rss-bytes")
}
