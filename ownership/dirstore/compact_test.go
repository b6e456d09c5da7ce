package dirstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// model is what a test expects the store to hold.
type model map[string]struct {
	body string
	etag ownership.ETag
}

func (m model) check(t *testing.T, s *Store) {
	t.Helper()
	for k, v := range m {
		wantBody(t, s, k, v.body, v.etag)
	}
	if got := listKeys(t, s, ""); len(got) != len(m) {
		t.Fatalf("list: %d keys, want %d", len(got), len(m))
	}
}

// churn overwrites and deletes keys of m through s, round after round.
func churn(t *testing.T, s *Store, m model, rounds int) {
	t.Helper()
	for r := range rounds {
		for i := range 40 {
			k := fmt.Sprintf("actors/c/%02d/state", i)
			v, ok := m[k]
			switch {
			case ok && (i+r)%7 == 0:
				if err := s.Delete(t.Context(), k, ownership.IfMatch(v.etag)); err != nil {
					t.Fatalf("delete %q: %v", k, err)
				}
				delete(m, k)
			case ok:
				body := fmt.Sprintf("round %d %s", r, strings.Repeat("x", 900+i))
				m[k] = struct {
					body string
					etag ownership.ETag
				}{body, mustPut(t, s, k, body, ownership.IfMatch(v.etag))}
			default:
				body := fmt.Sprintf("new in round %d", r)
				m[k] = struct {
					body string
					etag ownership.ETag
				}{body, mustPut(t, s, k, body, ownership.IfAbsent())}
			}
		}
	}
}

// TestCompaction: overwrites and deletes pile up dead bytes until the
// writer compacts; everything written is intact, the segment shrinks, the
// old one is gone, and another Store in the process, which still had the
// old segment open, follows the switch for reads and for writes.
func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	a, b := openDir(t, dir), openDir(t, dir)
	a.compactMin = 64 << 10
	b.compactMin = 1 << 62 // only a compacts
	m := model{}
	churn(t, a, m, 1)
	m.check(t, b) // b reads the first segment
	first := segmentPath(t, dir)

	maxSize := int64(0)
	shrank := false
	for range 12 {
		before := fileSize(t, segmentPath(t, dir))
		maxSize = max(maxSize, before)
		churn(t, a, m, 1)
		if fileSize(t, segmentPath(t, dir)) < before {
			shrank = true
		}
	}
	if segmentPath(t, dir) == first || !shrank {
		t.Fatalf("no compaction: segment %s, largest %d bytes", segmentPath(t, dir), maxSize)
	}
	if segs := segments(t, dir); len(segs) != 1 {
		t.Fatalf("segments after compaction: %q, want one", segs)
	}
	// Garbage is bounded: at most compactMin dead bytes, or as many as
	// live ones, plus one round's worth, remain.
	a.mu.RLock()
	live, end := a.idx.live, a.seg.end
	a.mu.RUnlock()
	if dead := end - segHeaderLen - live; dead > max(a.compactMin, live)+60<<10 {
		t.Fatalf("%d dead bytes beside %d live ones after compaction", dead, live)
	}
	m.check(t, a)
	m.check(t, b)
	churn(t, b, m, 2) // b writes into the new segment
	m.check(t, a)

	// A Store opened now reads only the compacted segment.
	c := openDir(t, dir)
	m.check(t, c)
}

// TestCompactionAfterCrashBetweenSwitchAndUnlink: a compactor that died
// after renaming `current` but before unlinking the old segment leaves a
// Store elsewhere reading the old one. The next writer, which checks
// `current`, unlinks it before it appends, so that reader follows too.
func TestCompactionAfterCrashBetweenSwitchAndUnlink(t *testing.T) {
	dir := t.TempDir()
	a, b := openDir(t, dir), openDir(t, dir)
	m := model{}
	churn(t, a, m, 2)
	m.check(t, b)
	old := segmentPath(t, dir)

	// Compact as a would, but keep the old segment linked.
	unlockFn, err := a.lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	a.mu.RLock()
	recs := make([]liveRecord, 0, len(a.idx.m))
	for _, k := range a.idx.sorted() {
		recs = append(recs, liveRecord{k, a.idx.m[k]})
	}
	sg := a.seg
	a.mu.RUnlock()
	next, _, err := a.writeSegment(sg, segName(sg.seq+1), recs)
	if err != nil {
		t.Fatal(err)
	}
	closeFD(next.fd)
	if err := replaceFromTemp(a); err != nil {
		t.Fatal(err)
	}
	unlockFn() // the compactor dies; its lock goes with it
	a.Close()
	if segs := segments(t, dir); len(segs) != 2 {
		t.Fatalf("segments: %q, want the old and the new", segs)
	}

	c := openDir(t, dir) // writes through the new segment
	churn(t, c, m, 1)
	m.check(t, b) // b was on the old segment
	if segs := segments(t, dir); len(segs) != 1 || dir+"/"+segs[0] == old {
		t.Fatalf("segments: %q, want only the new one", segs)
	}
}

// replaceFromTemp does the rename of a compaction: the temp file written
// by writeSegment becomes `current`.
func replaceFromTemp(s *Store) error {
	if err := renameFile(s.path(currentName+tmpSuffix+"compact"), s.path(currentName)); err != nil {
		return err
	}
	return syncDir(s.dir)
}
