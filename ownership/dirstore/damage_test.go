package dirstore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/internal/testlog"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// openLogged opens dir with its log lines kept.
func openLogged(t *testing.T, dir string) (*Store, *testlog.Log) {
	t.Helper()
	logs := &testlog.Log{}
	s, err := OpenWith(dir, Options{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// flipByte flips one bit of the byte at off in the file p, in place.
func flipByte(t *testing.T, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// wantOutcome checks that err has outcome o and names every fragment.
func wantOutcome(t *testing.T, what string, err error, o ownership.Outcome, fragments ...string) {
	t.Helper()
	if got := ownership.OutcomeOf(err); got != o {
		t.Fatalf("%s: %v (%s), want %s", what, err, got, o)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("%s: %v, want it to name %q", what, err, f)
		}
	}
}

// TestDamagedRecordWhileRunning: a byte of one record flips in the segment
// of a running Store. A Get of that key is a damaged object naming the
// key, every time, and a Put over it still lands (the index, not the body,
// decides conditions); the other keys are read and written as before, and
// the Store is not ended: damage to one object is that object's.
func TestDamagedRecordWhileRunning(t *testing.T) {
	dir := t.TempDir()
	s, logs := openLogged(t, dir)
	etags := map[string]ownership.ETag{}
	for i := range 3 {
		k := "actors/counter/c" + strconv.Itoa(i) + "/state"
		etags[k] = mustPut(t, s, k, "value "+strconv.Itoa(i), ownership.IfAbsent())
	}
	damaged := "actors/counter/c1/state"
	e, _ := s.idx.get(damaged)
	flipByte(t, segmentPath(t, dir), e.off+int64(e.size)-1) // the last byte of its body

	for range 2 {
		_, err := s.Get(t.Context(), damaged)
		wantOutcome(t, "get of the damaged record", err, ownership.Damaged, `"`+damaged+`"`, segmentPath(t, dir))
		if !errors.Is(err, ownership.ErrDamaged) || !errors.Is(err, ErrCorrupt) || errors.Is(err, ownership.ErrBucketDamaged) {
			t.Fatalf("get of the damaged record: %v, want ErrDamaged and ErrCorrupt, not ErrBucketDamaged", err)
		}
	}
	wantBody(t, s, "actors/counter/c0/state", "value 0", etags["actors/counter/c0/state"])
	wantBody(t, s, "actors/counter/c2/state", "value 2", etags["actors/counter/c2/state"])
	mustPut(t, s, "actors/counter/c3/state", "value 3", ownership.IfAbsent())
	if got := listKeys(t, s, "actors/"); len(got) != 4 {
		t.Fatalf("list after the damage: %q, want 4 keys", got)
	}
	// A person restores the object: the damaged version is replaced.
	etag := mustPut(t, s, damaged, "restored", ownership.IfMatch(etags[damaged]))
	wantBody(t, s, damaged, "restored", etag)
	if lines := logs.Matching("ERROR"); len(lines) != 0 {
		t.Fatalf("damage to one record ended the store:\n%s", logs)
	}
}

// TestTruncatedWhileRunning: the segment of a running Store is cut short,
// as no write of the store ever does. The next call finds it; from then on
// every call (reads of any key, writes) fails with ErrBucketDamaged naming
// the segment, and the Store logs it once, with the segment's path.
func TestTruncatedWhileRunning(t *testing.T) {
	dir := t.TempDir()
	s, logs := openLogged(t, dir)
	_, ends := writeFrames(t, s, 3)
	seg := segmentPath(t, dir)
	if err := os.Truncate(seg, ends[2]-5); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(t.Context(), "k0")
	wantOutcome(t, "get after the cut", err, ownership.BucketDamaged, seg, "shrank")
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("get after the cut: %v, want ErrCorrupt too", err)
	}
	_, err = s.Put(t.Context(), "new", []byte("x"), ownership.IfAbsent())
	wantOutcome(t, "put after the cut", err, ownership.BucketDamaged, `"new"`, seg)
	_, err = s.List(t.Context(), "", "", 0)
	wantOutcome(t, "list after the cut", err, ownership.BucketDamaged, seg)
	_, err = s.Get(t.Context(), "k2")
	wantOutcome(t, "get of another key", err, ownership.BucketDamaged, seg)
	if lines := logs.Matching("ERROR", "damaged", "segment="+seg); len(lines) != 1 {
		t.Fatalf("log lines naming the damaged segment: %q, want one\n%s", lines, logs)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close of a damaged store: %v", err)
	}
}

// TestShortReadWhileRunning: the segment is cut between the fstat that
// finds the index up to date and the pread of a record; the pread coming
// up short is damage to the store, not to the record.
func TestShortReadWhileRunning(t *testing.T) {
	dir := t.TempDir()
	s, logs := openLogged(t, dir)
	_, ends := writeFrames(t, s, 2)
	seg := segmentPath(t, dir)
	if err := os.Truncate(seg, ends[1]+3); err != nil {
		t.Fatal(err)
	}
	// As if the fstat had come before the cut: read under mu directly.
	s.mu.RLock()
	_, err := s.read("k1")
	s.mu.RUnlock()
	wantOutcome(t, "read past the end", err, ownership.BucketDamaged, seg, `"k1"`)
	if lines := logs.Matching("ERROR", "segment="+seg); len(lines) != 1 {
		t.Fatalf("log lines naming the segment: %q, want one\n%s", lines, logs)
	}
}

// TestSegmentGoneWhileRunning: the segment file is deleted under running
// Stores, or `current` is. A reader (Get), a writer (Put) and a second
// Store on the directory each end with ErrBucketDamaged naming what is
// missing, rather than retrying, and each logs it once.
func TestSegmentGoneWhileRunning(t *testing.T) {
	t.Run("segment", func(t *testing.T) {
		dir := t.TempDir()
		a, alog := openLogged(t, dir)
		b, blog := openLogged(t, dir)
		mustPut(t, a, "k", "v", ownership.IfAbsent())
		seg := segmentPath(t, dir)
		if err := os.Remove(seg); err != nil {
			t.Fatal(err)
		}
		_, err := a.Get(t.Context(), "k")
		wantOutcome(t, "get after the segment went", err, ownership.BucketDamaged, seg, "missing")
		_, err = b.Put(t.Context(), "k2", []byte("x"), ownership.IfAbsent())
		wantOutcome(t, "put after the segment went", err, ownership.BucketDamaged, seg, "missing")
		for name, logs := range map[string]*testlog.Log{"reader": alog, "writer": blog} {
			if lines := logs.Matching("ERROR", "segment="+seg); len(lines) != 1 {
				t.Errorf("%s: log lines naming the segment: %q, want one", name, lines)
			}
		}
	})
	t.Run("current", func(t *testing.T) {
		dir := t.TempDir()
		s, logs := openLogged(t, dir)
		mustPut(t, s, "k", "v", ownership.IfAbsent())
		if err := os.Remove(dir + "/" + currentName); err != nil {
			t.Fatal(err)
		}
		_, err := s.Put(t.Context(), "k2", []byte("x"), ownership.IfAbsent())
		wantOutcome(t, "put after current went", err, ownership.BucketDamaged, currentName, "missing")
		if lines := logs.Matching("ERROR", "damaged"); len(lines) != 1 {
			t.Fatalf("log lines: %q, want one\n%s", lines, logs)
		}
	})
}

// TestTornTailLogged: the tail a crash left is cut off at Open, and the
// cut is logged with the segment, where it starts, and how many bytes it
// dropped; an Open with nothing to cut logs nothing.
func TestTornTailLogged(t *testing.T) {
	src := t.TempDir()
	s := openDir(t, src)
	_, ends := writeFrames(t, s, 2)
	whole, err := os.ReadFile(segmentPath(t, src))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	cut := ends[1] + 7 // seven bytes of the second frame
	dir := copyStore(t, src, whole[:cut])
	_, logs := openLogged(t, dir)
	want := fmt.Sprintf("bytes=%d", cut-ends[1])
	if lines := logs.Matching("WARN", "torn tail", "segment="+segmentPath(t, dir), fmt.Sprintf("offset=%d", ends[1]), want); len(lines) != 1 {
		t.Fatalf("log of the cut: %q, want one line with %s\n%s", lines, want, logs)
	}
	_, quiet := openLogged(t, copyStore(t, src, whole))
	if s := quiet.String(); s != "" {
		t.Fatalf("an Open with nothing to cut logged:\n%s", s)
	}
}
