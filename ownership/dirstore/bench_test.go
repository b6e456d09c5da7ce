package dirstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// The benchmarks write ~200-byte objects, the size of an ownership record.
// Compare BenchmarkPut with BenchmarkPlainWriteFsyncRename (the least a
// durable replace-by-rename costs without a directory sync) and with
// BenchmarkPlainWriteFsyncRenameSyncDir (the least a crash-safe one costs):
// all run on the same file system in one `go test -bench` run.

var benchBody = bytes.Repeat([]byte("r"), 200)

func benchStore(b *testing.B) *Store {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkPut replaces one object with if-match, as a holder renewing its
// record does.
func BenchmarkPut(b *testing.B) {
	s := benchStore(b)
	ctx := b.Context()
	etag, err := s.Put(ctx, "owners/class/name", benchBody, ownership.IfAbsent())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchBody)))
	for b.Loop() {
		if etag, err = s.Put(ctx, "owners/class/name", benchBody, ownership.IfMatch(etag)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutSerialCommit is BenchmarkPut by the path before group
// commit (each Put takes the lock and syncs alone, on its own goroutine):
// a lone writer must not be slower with group commit.
func BenchmarkPutSerialCommit(b *testing.B) {
	s := benchStore(b)
	s.serialCommits = true
	ctx := b.Context()
	etag, err := s.Put(ctx, "owners/class/name", benchBody, ownership.IfAbsent())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchBody)))
	for b.Loop() {
		if etag, err = s.Put(ctx, "owners/class/name", benchBody, ownership.IfMatch(etag)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutCreateOnly creates a new object in one directory each time.
func BenchmarkPutCreateOnly(b *testing.B) {
	s := benchStore(b)
	ctx := b.Context()
	b.SetBytes(int64(len(benchBody)))
	i := 0
	for b.Loop() {
		i++
		if _, err := s.Put(ctx, fmt.Sprintf("owners/class/%d", i), benchBody, ownership.IfAbsent()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutParallel: writers on different keys share the lock; their
// temp-file fsyncs overlap, their directory fsyncs do not.
func BenchmarkPutParallel(b *testing.B) {
	s := benchStore(b)
	ctx := b.Context()
	var n atomic.Int64
	b.SetBytes(int64(len(benchBody)))
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("owners/class/%d", n.Add(1))
		etag, err := s.Put(ctx, key, benchBody, ownership.IfAbsent())
		if err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			if etag, err = s.Put(ctx, key, benchBody, ownership.IfMatch(etag)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkGet(b *testing.B) {
	s := benchStore(b)
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
}

func BenchmarkList(b *testing.B) {
	s := benchStore(b)
	ctx := b.Context()
	for i := range 100 {
		if _, err := s.Put(ctx, fmt.Sprintf("owners/class/%03d", i), benchBody, ownership.IfAbsent()); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		page, err := s.List(ctx, "owners/class/", "", 0)
		if err != nil || len(page.Entries) != 100 {
			b.Fatal(len(page.Entries), err)
		}
	}
}

// plainWrite is what any crash-safe file replacement costs at least: write
// a temp file, fsync it, rename it over the target, and (with syncDir)
// fsync the directory.
func plainWrite(b *testing.B, syncDir bool) {
	dir := b.TempDir()
	tmp, dst := filepath.Join(dir, "tmp"), filepath.Join(dir, "object")
	b.SetBytes(int64(len(benchBody)))
	for b.Loop() {
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(benchBody); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			b.Fatal(err)
		}
		if syncDir {
			d, err := os.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
			d.Close()
		}
	}
}

func BenchmarkPlainWriteFsyncRename(b *testing.B) { plainWrite(b, false) }

func BenchmarkPlainWriteFsyncRenameSyncDir(b *testing.B) { plainWrite(b, true) }

// BenchmarkConditionalPutParallel: many actors, each with its state in a
// directory of its own, each updating it with if-match, as busy actors
// persisting an event each do. 64 writers share 1,000 keys (each writer
// owns the keys i ≡ writer mod 64 and cycles through them). It reports
// commits/s for each way of committing; "group" also reports its speed-up
// over "serial" (the path before group commit) when both ran.
func BenchmarkConditionalPutParallel(b *testing.B) {
	const writers, keys = 64, 1000
	modes := []struct {
		name  string
		setup func(*Store)
	}{
		{"serial", func(s *Store) { s.serialCommits = true }},
		{"group", func(*Store) {}},
	}
	if syncDirsSyncfs != nil {
		// The same, with one syncfs(2) per batch instead of an fsync per
		// directory: measured, not used (see commit.go).
		modes = append(modes, struct {
			name  string
			setup func(*Store)
		}{"group-syncfs", func(s *Store) { s.syncDirs = syncDirsSyncfs }})
	}
	rates := map[string]float64{}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			s := benchStore(b)
			m.setup(s)
			ctx := b.Context()
			etags := make([]ownership.ETag, keys)
			key := func(i int) string { return fmt.Sprintf("actors/bench/%d/state", i) }
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := w; i < keys; i += writers {
						var err error
						if etags[i], err = s.Put(ctx, key(i), benchBody, ownership.IfAbsent()); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			var next atomic.Int64
			b.SetParallelism((writers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := int(next.Add(1)-1) % writers
				i := w
				for pb.Next() {
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
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "commits/s")
			rates[m.name] = rate
			if m.name != "serial" && rates["serial"] > 0 {
				b.ReportMetric(rate/rates["serial"], "x-serial")
			}
		})
	}
}
