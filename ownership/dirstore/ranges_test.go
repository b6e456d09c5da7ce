package dirstore

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// largeBody is a body long enough for range reads to keep block sums for
// it: 256 blocks.
func largeBody() []byte {
	b := make([]byte, 256*sumBlock)
	r := rand.NewChaCha8([32]byte{'r', 'a', 'n', 'g', 'e'})
	_, _ = r.Read(b)
	return b
}

// bodyOffset returns where the body of key's current record starts in the
// segment.
func bodyOffset(t *testing.T, s *Store, key string) int64 {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.idx.get(key)
	if !ok {
		t.Fatalf("%q is not in the index", key)
	}
	return e.off + recHeaderLen + int64(e.keyLen)
}

// wantRange fails the test unless the range of key reads as want.
func wantRange(t *testing.T, s *Store, key string, off, n int64, want []byte) {
	t.Helper()
	obj, err := s.GetRange(t.Context(), key, off, n)
	if err != nil {
		t.Fatalf("range %d+%d of %q: %v", off, n, key, err)
	}
	if !bytes.Equal(obj.Body, want) {
		t.Fatalf("range %d+%d of %q: %d bytes, want %d, differing", off, n, key, len(obj.Body), len(want))
	}
}

// wantDamagedRange fails the test unless the range of key is a damaged
// object, naming the key and the segment, every time it is read.
func wantDamagedRange(t *testing.T, s *Store, key string, off, n int64, fragments ...string) {
	t.Helper()
	for range 2 {
		_, err := s.GetRange(t.Context(), key, off, n)
		wantOutcome(t, "range of the damaged record", err, ownership.Damaged, append([]string{`"` + key + `"`, s.seg.path}, fragments...)...)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("range of the damaged record: %v, want ErrCorrupt too", err)
		}
	}
}

// TestRangeDamageBeforeFirstRead: a byte of a large body flips before the
// Store read any range of it. The first range read checks the record
// whole, so any range of it, however far from the flipped byte, is a
// damaged object, every time, as a Get is; the other keys and the Store
// are not affected, and a write over the key restores it.
func TestRangeDamageBeforeFirstRead(t *testing.T) {
	dir := t.TempDir()
	s, logs := openLogged(t, dir)
	body := largeBody()
	etag := mustPut(t, s, "runs/a", string(body), ownership.IfAbsent())
	mustPut(t, s, "runs/b", string(body), ownership.IfAbsent())
	flipByte(t, segmentPath(t, dir), bodyOffset(t, s, "runs/a")+200*sumBlock+7)

	wantDamagedRange(t, s, "runs/a", 0, 4096, "record checksum mismatch")
	wantDamagedRange(t, s, "runs/a", int64(len(body))+1, 10, "record checksum mismatch")
	_, err := s.Get(t.Context(), "runs/a")
	wantOutcome(t, "get of the damaged record", err, ownership.Damaged)
	wantRange(t, s, "runs/b", 200*sumBlock, 4096, body[200*sumBlock:201*sumBlock])

	mustPut(t, s, "runs/a", string(body), ownership.IfMatch(etag))
	wantRange(t, s, "runs/a", 200*sumBlock, 4096, body[200*sumBlock:201*sumBlock])
	if lines := logs.Matching("ERROR"); len(lines) != 0 {
		t.Fatalf("damage to one record ended the store:\n%s", logs)
	}
}

// checkedRecord opens a Store on a new directory and puts a large body
// under runs/a, which a first range read checks whole, taking its sums.
func checkedRecord(t *testing.T) (dir string, s *Store, body []byte) {
	t.Helper()
	dir = t.TempDir()
	s, _ = openLogged(t, dir)
	body = largeBody()
	mustPut(t, s, "runs/a", string(body), ownership.IfAbsent())
	wantRange(t, s, "runs/a", 0, 4096, body[:4096])
	return dir, s, body
}

// TestRangeDamageAfterCheck: a byte of a large body flips after a range
// read checked the record. Range reads that hold the flipped byte are a
// damaged object, every time; those that do not read only their own
// blocks, so they do not see it and give their bytes, which check; a Get
// checks the record whole and finds it.
func TestRangeDamageAfterCheck(t *testing.T) {
	dir, s, body := checkedRecord(t)

	flipByte(t, segmentPath(t, dir), bodyOffset(t, s, "runs/a")+200*sumBlock+7)
	wantDamagedRange(t, s, "runs/a", 200*sumBlock, 10, "block 200 ")
	wantDamagedRange(t, s, "runs/a", 199*sumBlock+4000, 200, "block 200 ")
	wantDamagedRange(t, s, "runs/a", 0, int64(len(body)), "block 200 ")
	wantRange(t, s, "runs/a", 0, 4096, body[:4096])
	wantRange(t, s, "runs/a", 201*sumBlock, 3*4096, body[201*sumBlock:204*sumBlock])
	_, err := s.Get(t.Context(), "runs/a")
	wantOutcome(t, "get of the damaged record", err, ownership.Damaged)
}

// TestRangeDamageSmallObject: a body of at most rangeWholeMax bytes is
// checked whole by every range read, so a flip anywhere in it is found by
// any range, as by a Get; and so is damage to a large record's key.
func TestRangeDamageSmallObject(t *testing.T) {
	dir := t.TempDir()
	s, _ := openLogged(t, dir)
	small := bytes.Repeat([]byte("s"), rangeWholeMax)
	mustPut(t, s, "small", string(small), ownership.IfAbsent())
	wantRange(t, s, "small", 0, 10, small[:10])
	flipByte(t, segmentPath(t, dir), bodyOffset(t, s, "small")+rangeWholeMax-1)
	wantDamagedRange(t, s, "small", 0, 10, "record checksum mismatch")

	mustPut(t, s, "large", string(largeBody()), ownership.IfAbsent())
	flipByte(t, segmentPath(t, dir), bodyOffset(t, s, "large")-1) // the key's last byte
	wantDamagedRange(t, s, "large", 0, 10, "not the record the index names")
}

// TestRangeShortRead: the segment is cut between the fstat that finds
// the index up to date and the pread of a range, before the record was
// checked and after: the pread coming up short is damage to the store.
func TestRangeShortRead(t *testing.T) {
	for _, checked := range []bool{false, true} {
		dir := t.TempDir()
		s, logs := openLogged(t, dir)
		body := largeBody()
		mustPut(t, s, "runs/a", string(body), ownership.IfAbsent())
		if checked {
			wantRange(t, s, "runs/a", 0, 10, body[:10])
		}
		seg := segmentPath(t, dir)
		if err := os.Truncate(seg, bodyOffset(t, s, "runs/a")+100*sumBlock); err != nil {
			t.Fatal(err)
		}
		// As if the fstat had come before the cut: read under mu directly.
		s.mu.RLock()
		_, err := s.readRange("runs/a", 200*sumBlock, 10)
		s.mu.RUnlock()
		wantOutcome(t, "range read past the end", err, ownership.BucketDamaged, seg, `"runs/a"`)
		if lines := logs.Matching("ERROR", "segment="+seg); len(lines) != 1 {
			t.Fatalf("log lines naming the segment: %q, want one\n%s", lines, logs)
		}
	}
}

// TestRangeAcrossStores: a range read sees what another Store on the
// directory wrote, and what a compaction there moved, as a Get does.
func TestRangeAcrossStores(t *testing.T) {
	dir := t.TempDir()
	a, b := openDir(t, dir), openDir(t, dir)
	body := largeBody()
	mustPut(t, a, "runs/a", string(body), ownership.IfAbsent())
	wantRange(t, b, "runs/a", 5*sumBlock, 100, body[5*sumBlock:5*sumBlock+100])

	other := bytes.Clone(body)
	other[5*sumBlock] ^= 1
	mustPut(t, a, "runs/a", string(other), ownership.Always())
	wantRange(t, b, "runs/a", 5*sumBlock, 100, other[5*sumBlock:5*sumBlock+100])

	// Two dead versions, more than the live one: the write compacts.
	a.compactMin = 1
	mustPut(t, a, "runs/a", string(other), ownership.Always())
	a.background.Wait()
	if segs := segments(t, dir); len(segs) != 1 || segs[0] == segName(1) {
		t.Fatalf("segments %q after a compaction, want one, not the first", segs)
	}
	wantRange(t, b, "runs/a", 5*sumBlock, 100, other[5*sumBlock:5*sumBlock+100])
	wantRange(t, b, "runs/a", 0, 1<<30, other)
}

// TestSumCacheBound: the sums of one Store stay under maxSumBytes; past
// it every sum is dropped, and a segment's sums are dropped once sums of
// another are added.
func TestSumCacheBound(t *testing.T) {
	var c sumCache
	sg1, sg2 := &segment{}, &segment{}
	sums := func(n int) *blockSums { return &blockSums{size: 1, sums: make([]uint32, n)} }
	e := func(off int64) entry { return entry{off: off, size: 1} }

	big := maxSumBytes/4/2 - sumOverhead
	c.add(sg1, 1, sums(big))
	c.add(sg1, 2, sums(big))
	if c.get(sg1, e(1)) == nil || c.get(sg1, e(2)) == nil {
		t.Fatal("sums under the bound were dropped")
	}
	if c.get(sg2, e(1)) != nil || c.get(sg1, entry{off: 1, size: 2}) != nil {
		t.Fatal("sums found for another segment, or another record at the offset")
	}
	c.add(sg1, 3, sums(big))
	if c.get(sg1, e(1)) != nil || c.get(sg1, e(2)) != nil || c.get(sg1, e(3)) == nil {
		t.Fatal("past the bound, want only the newest sums kept")
	}
	if c.bytes > maxSumBytes {
		t.Fatalf("%d bytes of sums, over %d", c.bytes, maxSumBytes)
	}
	c.add(sg2, 1, sums(1))
	if c.get(sg1, e(3)) != nil || c.get(sg2, e(1)) == nil {
		t.Fatal("sums of an earlier segment kept beside another's")
	}
}

// TestRangeSumsSurviveOwnCompaction: a Store's own compaction carries the
// block sums its range reads took over to the copy, so its next range
// read of the moved record reads only its own blocks: a byte flipped in
// the copy far from the range is not read (without the sums the read
// would check the record whole and report it), while a range that holds
// it, and a Get, find it.
func TestRangeSumsSurviveOwnCompaction(t *testing.T) {
	dir, s, body := checkedRecord(t)
	// Two dead versions of another key, more than what is live besides
	// runs/a: the write compacts.
	s.compactMin = 1
	for range 3 {
		mustPut(t, s, "dead", string(largeBody()), ownership.Always())
	}
	s.background.Wait()
	if segs := segments(t, dir); len(segs) != 1 || segs[0] == segName(1) {
		t.Fatalf("segments %q after a compaction, want one, not the first", segs)
	}
	flipByte(t, segmentPath(t, dir), bodyOffset(t, s, "runs/a")+200*sumBlock+7)
	wantRange(t, s, "runs/a", 0, 4096, body[:4096])
	wantDamagedRange(t, s, "runs/a", 200*sumBlock, 10, "block 200 ")
	_, err := s.Get(t.Context(), "runs/a")
	wantOutcome(t, "get of the damaged record", err, ownership.Damaged)
}
