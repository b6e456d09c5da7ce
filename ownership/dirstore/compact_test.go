package dirstore

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/internal/groupcommit"
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
	s.background.Wait() // the compactions it started
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

	switchWithoutUnlink(t, a)
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

// stickCompaction makes the first compaction of s stop, without the write
// lock, at the end of its first round (its second fdatasync of its copy:
// the first is the empty file's), until release is called (or the test
// ends); copying is closed when it stops there.
func stickCompaction(t *testing.T, s *Store) (copying chan struct{}, release func()) {
	copying, open := make(chan struct{}), make(chan struct{})
	var stop, opened sync.Once
	syncs := 0
	s.sys.datasync = func(fd int, p string) error {
		if strings.Contains(p, compactTmp) {
			if syncs++; syncs == 2 {
				stop.Do(func() { close(copying); <-open })
			}
		}
		return fdatasync(fd, p)
	}
	release = func() { opened.Do(func() { close(open) }) }
	t.Cleanup(release) // before the Store's Close, which waits for it
	return copying, release
}

// stuck reports whether copying is closed.
func stuck(copying chan struct{}) bool {
	select {
	case <-copying:
		return true
	default:
		return false
	}
}

// TestWritesGoOnWhileCompactionCopies: a compaction copies without the
// write lock, so writes, deletes and another Store's open all go on while
// it is stuck in the middle of its copy; when it goes on it carries what
// they wrote into the new segment (a key written again is copied again, a
// key deleted gets a delete record), and nothing is lost or brought back.
func TestWritesGoOnWhileCompactionCopies(t *testing.T) {
	dir := t.TempDir()
	a := openDir(t, dir)
	// Rounds without the lock go on until one copies nothing: what is
	// written while the first is stuck is copied by the second.
	a.compactMin, a.compactRound = 64<<10, 0
	copying, release := stickCompaction(t, a)
	m := model{}
	first := segmentPath(t, dir)
	for i := 0; ; i++ {
		if i == 10000 {
			t.Fatal("no compaction started")
		}
		k := fmt.Sprintf("k%02d", i%40)
		m[k] = struct {
			body string
			etag ownership.ETag
		}{strings.Repeat("v", 4000) + k, mustPut(t, a, k, strings.Repeat("v", 4000)+k, ownership.Always())}
		if stuck(copying) {
			break
		}
	}

	// The copy is stuck. Writes land meanwhile, and a new Store opens.
	e := mustPut(t, a, "new", "during the copy", ownership.IfAbsent())
	e2 := mustPut(t, a, "k01", "rewritten during the copy", ownership.IfMatch(m["k01"].etag))
	if err := a.Delete(t.Context(), "k02", ownership.IfMatch(m["k02"].etag)); err != nil {
		t.Fatal(err)
	}
	delete(m, "k02")
	m["new"] = struct {
		body string
		etag ownership.ETag
	}{"during the copy", e}
	m["k01"] = struct {
		body string
		etag ownership.ETag
	}{"rewritten during the copy", e2}
	b := openDir(t, dir)
	m.check(t, b)
	if got := segmentPath(t, dir); got != first {
		t.Fatalf("segment %s while the copy is stuck, want still %s", got, first)
	}

	release()
	a.background.Wait()
	if segmentPath(t, dir) == first {
		t.Fatal("the compaction did not switch segments")
	}
	if segs := segments(t, dir); len(segs) != 1 {
		t.Fatalf("segments after the switch: %q, want one", segs)
	}
	for _, s := range []*Store{a, b, openDir(t, dir)} {
		m.check(t, s)
		wantMissing(t, s, "k02")
	}
}

// TestCompactionStartedElsewhere: while one Store's compaction copies,
// another Store's writer neither starts a second nor removes the first
// one's copy as a crash's leftover (it holds `compacting`); a writer that
// loads the switched segment afterwards finds only it.
func TestCompactionStartedElsewhere(t *testing.T) {
	dir := t.TempDir()
	a, b := openDir(t, dir), openDir(t, dir)
	a.compactMin, b.compactMin = 64<<10, 64<<10
	copying, release := stickCompaction(t, a)
	m := model{}
	for i := 0; ; i++ {
		if i == 10000 {
			t.Fatal("no compaction started")
		}
		mustPut(t, a, fmt.Sprintf("k%02d", i%40), strings.Repeat("v", 4000), ownership.Always())
		if stuck(copying) {
			break
		}
	}
	for k := range 40 {
		key := fmt.Sprintf("k%02d", k)
		obj, err := b.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		m[key] = struct {
			body string
			etag ownership.ETag
		}{string(obj.Body), obj.ETag}
	}
	// b piles up more than enough dead bytes to compact, and cannot; a
	// Store opened meanwhile, which removes what a crash left, leaves the
	// copy be.
	first := segmentPath(t, dir)
	churn(t, b, m, 3)
	openDir(t, dir)
	if got := segmentPath(t, dir); got != first {
		t.Fatalf("segment %s while a's copy is stuck, want still %s: another compaction ran", got, first)
	}
	var copies int
	names, err := readDirNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, compactTmp) {
			copies++
		}
	}
	if copies != 1 {
		t.Fatalf("%d compactions' copies in %q while a's copies, want a's alone", copies, names)
	}
	release()
	a.background.Wait()
	churn(t, b, m, 1)
	m.check(t, a)
	m.check(t, b)
	if segs := segments(t, dir); len(segs) != 1 {
		t.Fatalf("segments: %q, want one", segs)
	}
}

// TestNextBatchTakesSmallWritesFirst: with this store's sizes and
// bounds, the next batch is the oldest write, every small write queued,
// and big ones in queue order while they fit.
func TestNextBatchTakesSmallWritesFirst(t *testing.T) {
	big := func(k string) *write { return &write{key: k, body: make([]byte, 3<<20)} }
	small := func(k string) *write { return &write{key: k, body: make([]byte, 100)} }
	queue := []*write{big("b0"), big("b1"), small("s0"), big("b2"), big("b3"), small("s1")}
	next := func() []*write {
		var batch []*write
		batch, queue = groupcommit.Next(queue, (*write).size, smallWrite, maxBatchBytes)
		return batch
	}
	keys := func(ws []*write) (ks []string) {
		for _, w := range ws {
			ks = append(ks, w.key)
		}
		return ks
	}
	if got, want := keys(next()), []string{"b0", "s0", "s1", "b1"}; !slices.Equal(got, want) {
		t.Fatalf("first batch %q, want %q", got, want)
	}
	if got, want := keys(queue), []string{"b2", "b3"}; !slices.Equal(got, want) {
		t.Fatalf("left %q, want %q", got, want)
	}
	if got, want := keys(next()), []string{"b2", "b3"}; !slices.Equal(got, want) {
		t.Fatalf("second batch %q, want %q", got, want)
	}
	if got := next(); len(got) != 0 || len(queue) != 0 {
		t.Fatalf("third batch %q, queue %q, want both empty", keys(got), keys(queue))
	}
}
