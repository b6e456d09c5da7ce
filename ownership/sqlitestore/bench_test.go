package sqlitestore

import (
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// The benchmarks of this package measure the store alone; bench/embedstore
// measures it against the directory store in one run.

// BenchmarkRenew: one writer renews a 200-byte object under If-Match, as a
// keeper renews its lease: a batch of one, its commit and its sync each
// time; with synchronous=FULL (the store's setting) and, for comparison,
// NORMAL (no sync at commit: what a process crash alone would need).
func BenchmarkRenew(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run(sync, func(b *testing.B) {
			s, err := open(b.TempDir(), Options{}, sync)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			body := make([]byte, 200)
			etag := mustPut(b, s, "lease", string(body), ownership.Always())
			for b.Loop() {
				e, err := s.Put(b.Context(), "lease", body, ownership.IfMatch(etag))
				if err != nil {
					b.Fatal(err)
				}
				etag = e
			}
		})
	}
}

// BenchmarkGet: Gets of 200-byte objects among 1,000.
func BenchmarkGet(b *testing.B) {
	s := openTemp(b)
	body := make([]byte, 200)
	for i := range 1000 {
		mustPut(b, s, fmt.Sprintf("k/%04d", i), string(body), ownership.Always())
	}
	for b.Loop() {
		if _, err := s.Get(b.Context(), fmt.Sprintf("k/%04d", mrand.IntN(1000))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRangeRead: range reads of 16 KiB at random places of 1 MiB
// objects.
func BenchmarkRangeRead(b *testing.B) {
	s := openTemp(b)
	body := make([]byte, 1<<20)
	rand.Read(body)
	for i := range 64 {
		mustPut(b, s, fmt.Sprintf("big/%02d", i), string(body), ownership.Always())
	}
	for b.Loop() {
		if _, err := s.GetRange(b.Context(), fmt.Sprintf("big/%02d", mrand.IntN(64)), int64(mrand.IntN(64))<<14, 16<<10); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutBig: unconditional puts of 1 MiB objects over 64 keys, from
// one writer.
func BenchmarkPutBig(b *testing.B) {
	s := openTemp(b)
	body := make([]byte, 1<<20)
	rand.Read(body)
	for b.Loop() {
		if _, err := s.Put(b.Context(), fmt.Sprintf("big/%02d", mrand.IntN(64)), body, ownership.Always()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetBig: Gets of 1 MiB objects among 64.
func BenchmarkGetBig(b *testing.B) {
	s := openTemp(b)
	body := make([]byte, 1<<20)
	rand.Read(body)
	for i := range 64 {
		mustPut(b, s, fmt.Sprintf("big/%02d", i), string(body), ownership.Always())
	}
	for b.Loop() {
		if _, err := s.Get(b.Context(), fmt.Sprintf("big/%02d", mrand.IntN(64))); err != nil {
			b.Fatal(err)
		}
	}
}
