//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package dirstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// The benchmarks write ~200-byte objects, the size of an ownership record,
// and compare the store with a baseline in the same run, on the same file
// system: a file per object written as a crash-safe file store must (temp
// file, fdatasync, rename, directory fsync), with no conditions and no
// lock, which is the least the earlier layout of this package did per
// write. Besides time per write they report the process's CPU time per
// write (user and system, from getrusage), which is what bounds a busy
// node.

var benchBody = bytes.Repeat([]byte("r"), 200)

// benchBucket is what the benchmarks use of a store.
type benchBucket interface {
	Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error)
	Get(ctx context.Context, key string) (ownership.Object, error)
}

type benchStore struct {
	name string
	open func(b *testing.B) benchBucket
}

var benchStores = []benchStore{
	{"file-per-object", func(b *testing.B) benchBucket { return &fileBaseline{dir: b.TempDir()} }},
	{"store", func(b *testing.B) benchBucket {
		s, err := Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
}

// fileBaseline writes each object to a file of its own, crash-safe, and
// ignores conditions: the baseline of the benchmarks.
type fileBaseline struct {
	dir string
	seq atomic.Uint64
}

func (f *fileBaseline) path(key string) string {
	return filepath.Join(f.dir, strings.ReplaceAll(key, "/", "_"))
}

func (f *fileBaseline) Put(_ context.Context, key string, body []byte, _ ownership.Condition) (ownership.ETag, error) {
	tmp := filepath.Join(f.dir, fmt.Sprintf(".tmp-%d", f.seq.Add(1)))
	t, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return "", err
	}
	_, err = t.Write(body)
	if err == nil {
		err = t.Sync()
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, f.path(key))
	}
	if err != nil {
		return "", err
	}
	d, err := os.Open(f.dir)
	if err != nil {
		return "", err
	}
	defer d.Close()
	return ownership.ETag(tmp), d.Sync()
}

func (f *fileBaseline) Get(_ context.Context, key string) (ownership.Object, error) {
	body, err := os.ReadFile(f.path(key))
	return ownership.Object{Body: body}, err
}

// cpuTime is the CPU time this process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measured runs fn, which performs b.N writes, and reports writes/s and
// CPU µs per write; after the last store it also reports each ratio over
// the first store's.
func measured(b *testing.B, rates, cpus map[string]float64, name string, fn func()) {
	cpu0 := cpuTime(b)
	b.ResetTimer()
	fn()
	b.StopTimer()
	rate := float64(b.N) / b.Elapsed().Seconds()
	cpu := float64(cpuTime(b)-cpu0) / float64(time.Microsecond) / float64(b.N)
	b.ReportMetric(rate, "writes/s")
	b.ReportMetric(cpu, "cpu-µs/write")
	rates[name], cpus[name] = rate, cpu
	if base := benchStores[0].name; name != base && rates[base] > 0 {
		b.ReportMetric(rate/rates[base], "x-writes/s")
		b.ReportMetric(cpus[base]/cpu, "x-less-cpu")
	}
}

// BenchmarkPutParallel: 32 writers, as the actors of a busy node, each
// with its state under a key of its own among 1,000, update them with
// if-match, writer w cycling through the keys i ≡ w (mod 32).
func BenchmarkPutParallel(b *testing.B) {
	const writers, keys = 32, 1000
	rates, cpus := map[string]float64{}, map[string]float64{}
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			s := bs.open(b)
			ctx := b.Context()
			key := func(i int) string { return fmt.Sprintf("actors/bench/%d/state", i) }
			etags := make([]ownership.ETag, keys)
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := w; i < keys; i += writers {
						var err error
						if etags[i], err = s.Put(ctx, key(i), benchBody, ownership.IfAbsent()); err != nil {
							b.Error(err)
						}
					}
				})
			}
			wg.Wait()
			b.SetBytes(int64(len(benchBody)))
			measured(b, rates, cpus, bs.name, func() {
				var left atomic.Int64
				left.Store(int64(b.N))
				for w := range writers {
					wg.Go(func() {
						for i := w; left.Add(-1) >= 0; {
							etag, err := s.Put(ctx, key(i), benchBody, ownership.IfMatch(etags[i]))
							if err != nil {
								b.Error(err)
								return
							}
							etags[i] = etag
							if i += writers; i >= keys {
								i = w
							}
						}
					})
				}
				wg.Wait()
			})
		})
	}
}

// BenchmarkPutLone: one writer replacing one object with if-match, as a
// holder renewing its record does: the latency of a lone write.
func BenchmarkPutLone(b *testing.B) {
	rates, cpus := map[string]float64{}, map[string]float64{}
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			s := bs.open(b)
			ctx := b.Context()
			etag, err := s.Put(ctx, "owners/class/name", benchBody, ownership.IfAbsent())
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(benchBody)))
			measured(b, rates, cpus, bs.name, func() {
				for range b.N {
					if etag, err = s.Put(ctx, "owners/class/name", benchBody, ownership.IfMatch(etag)); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkGet reads one object: an fstat and a pread on the store.
func BenchmarkGet(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			s := bs.open(b)
			ctx := b.Context()
			if _, err := s.Put(ctx, "owners/class/name", benchBody, ownership.IfAbsent()); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(benchBody)))
			for b.Loop() {
				if _, err := s.Get(ctx, "owners/class/name"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRangeRead: a 4 KiB range of a 64 MiB object, once the Store
// has checked the object (its first range read), costs about what a Get of
// a 4 KiB object does: a pread of the block or two that hold it, and
// their sums. Each range sub-benchmark reports its time over the 4 KiB
// Get's (x-get-4KiB). The Get of the whole 64 MiB object is what a range
// read would cost without ranges, and about what the first range read of
// the object costs.
func BenchmarkRangeRead(b *testing.B) {
	const large, block = 64 << 20, 4 << 10
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := b.Context()
	if _, err := s.Put(ctx, "objects/small", bytes.Repeat([]byte("s"), block), ownership.IfAbsent()); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Put(ctx, "runs/large", bytes.Repeat([]byte("l"), large), ownership.IfAbsent()); err != nil {
		b.Fatal(err)
	}
	if _, err := s.GetRange(ctx, "runs/large", 0, block); err != nil {
		b.Fatal(err)
	}

	var getNs float64
	perOp := func(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }
	b.Run("get-4KiB-object", func(b *testing.B) {
		b.SetBytes(block)
		for b.Loop() {
			if _, err := s.Get(ctx, "objects/small"); err != nil {
				b.Fatal(err)
			}
		}
		getNs = perOp(b)
	})
	for _, c := range []struct {
		name  string
		shift int64 // from a block's start
	}{{"range-4KiB-of-64MiB", 0}, {"range-4KiB-of-64MiB-unaligned", 1000}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(block)
			// Blocks spread over the object, 7919 blocks apart.
			i := int64(0)
			for b.Loop() {
				off := (i*7919*block)%(large-2*block) + c.shift
				if _, err := s.GetRange(ctx, "runs/large", off, block); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if getNs > 0 {
				b.ReportMetric(perOp(b)/getNs, "x-get-4KiB")
			}
		})
	}
	b.Run("get-64MiB-object", func(b *testing.B) {
		b.SetBytes(large)
		for b.Loop() {
			if _, err := s.Get(ctx, "runs/large"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
