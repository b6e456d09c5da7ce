package dirstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// errInjected is what the tests' stand-ins for failing calls return.
var errInjected = errors.New("injected EIO")

func failDatasync(int, string) error { return errInjected }

// wantFailed checks that a write failed with nothing written: a Failed
// outcome, naming the key.
func wantFailed(t *testing.T, err error, key string) {
	t.Helper()
	if o := ownership.OutcomeOf(err); o != ownership.Failed || !strings.Contains(err.Error(), `"`+key+`"`) {
		t.Fatalf("write of %q: %v (%s), want a Failed outcome naming the key", key, err, o)
	}
}

// suspectFile returns what the suspect file holds, or "" if it is absent.
func suspectFile(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, suspectName))
	if isNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// wantRewritten checks that a writer rewrote the suspect segment old
// before appending: another segment is current, it is the only one, and
// no suspect file is left.
func wantRewritten(t *testing.T, dir, old string) {
	t.Helper()
	if segmentPath(t, dir) == old {
		t.Fatalf("a write landed in %s, whose fdatasync failed, without a rewrite", filepath.Base(old))
	}
	if segs := segments(t, dir); len(segs) != 1 {
		t.Fatalf("segments after the rewrite: %q, want one", segs)
	}
	if name := suspectFile(t, dir); name != "" {
		t.Fatalf("suspect file after the rewrite: %q", name)
	}
}

// TestSuspectAfterFailedBatchSync: a batch's fdatasync fails, and so does
// the rewrite its writer tries at once. The segment is suspect, which the
// suspect file tells every Store: the failing Store's later writes fail
// with nothing written, and another Store (as another process would)
// rewrites the segment before it appends, keeping the unknown write.
func TestSuspectAfterFailedBatchSync(t *testing.T) {
	dir := t.TempDir()
	a, b := openDir(t, dir), openDir(t, dir)
	etag := mustPut(t, a, "k", "v1", ownership.IfAbsent())
	first := segmentPath(t, dir)
	a.sys.datasync = failDatasync
	_, err := a.Put(t.Context(), "k", []byte("v2"), ownership.IfMatch(etag))
	if !errors.Is(err, ownership.ErrUnknownOutcome) {
		t.Fatalf("put with a failing sync: %v, want ErrUnknownOutcome", err)
	}
	if name := suspectFile(t, dir); name != filepath.Base(first) {
		t.Fatalf("suspect file: %q, want %q", name, filepath.Base(first))
	}
	size := fileSize(t, first)
	_, err = a.Put(t.Context(), "k2", []byte("x"), ownership.Always())
	wantFailed(t, err, "k2")
	err = a.Delete(t.Context(), "k", ownership.Always())
	wantFailed(t, err, "k")
	if got := fileSize(t, first); got != size || segmentPath(t, dir) != first {
		t.Fatalf("writes on a suspect segment wrote: %d bytes, was %d", got, size)
	}

	e := mustPut(t, b, "other", "y", ownership.IfAbsent())
	wantRewritten(t, dir, first)
	wantBody(t, b, "k", "v2", "")
	wantMissing(t, b, "k2")

	a.sys.datasync = fdatasync
	wantBody(t, a, "other", "y", e)
	e2 := mustPut(t, a, "k2", "z", ownership.IfAbsent())
	c := openDir(t, dir)
	wantBody(t, c, "k2", "z", e2)
	wantBody(t, c, "k", "v2", "")
}

// TestSuspectAfterFailedCutSync: a writer cuts a torn tail off and its
// fdatasync fails; the segment is suspect, so the writer appends nothing
// to it, and the next writer rewrites it first.
func TestSuspectAfterFailedCutSync(t *testing.T) {
	dir := t.TempDir()
	a, b := openDir(t, dir), openDir(t, dir)
	e1 := mustPut(t, a, "k", "v1", ownership.IfAbsent())
	first := segmentPath(t, dir)
	size := fileSize(t, first)
	tear(t, first, []byte("a frame cut short"))

	a.sys.datasync = failDatasync
	_, err := a.Put(t.Context(), "k2", []byte("x"), ownership.IfAbsent())
	wantFailed(t, err, "k2")
	if name := suspectFile(t, dir); name != filepath.Base(first) {
		t.Fatalf("suspect file: %q, want %q", name, filepath.Base(first))
	}
	if got := fileSize(t, first); got != size || segmentPath(t, dir) != first {
		t.Fatalf("segment after the failed batch: %d bytes, want the %d left after the cut", got, size)
	}

	e2 := mustPut(t, b, "k2", "y", ownership.IfAbsent())
	wantRewritten(t, dir, first)
	c := openDir(t, dir)
	wantBody(t, c, "k", "v1", e1)
	wantBody(t, c, "k2", "y", e2)
}

// TestSuspectAfterFailedOpenSync: Open's fdatasync of what it found fails.
// The segment is suspect, and the next writer, of any Store, rewrites it
// before it appends.
func TestSuspectAfterFailedOpenSync(t *testing.T) {
	dir := t.TempDir()
	a := openDir(t, dir)
	e1 := mustPut(t, a, "k", "v1", ownership.IfAbsent())
	first := segmentPath(t, dir)

	saved := sysHooks
	sysHooks.datasync = failDatasync
	s, err := Open(dir)
	sysHooks = saved
	if err == nil {
		s.Close()
	}
	if name := suspectFile(t, dir); name != filepath.Base(first) {
		t.Fatalf("suspect file after Open's failed sync: %q (Open: %v), want %q", name, err, filepath.Base(first))
	}

	e2 := mustPut(t, a, "k2", "y", ownership.IfAbsent())
	wantRewritten(t, dir, first)
	c := openDir(t, dir)
	wantBody(t, c, "k", "v1", e1)
	wantBody(t, c, "k2", "y", e2)
}

// tear appends junk to the segment p, as a crash in the middle of a
// pwrite leaves.
func tear(t *testing.T, p string, junk []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(junk); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFollowAfterCut: a reader's fstat says the segment is longer than it
// is by the time it reads, since a writer cut a torn tail in between. The
// reader still applies every whole frame before the cut.
func TestFollowAfterCut(t *testing.T) {
	dir := t.TempDir()
	a, b := openDir(t, dir), openDir(t, dir)
	mustPut(t, a, "k0", "v", ownership.IfAbsent())
	wantBody(t, b, "k0", "v", "")
	var etags []ownership.ETag
	for _, k := range []string{"k1", "k2", "k3"} {
		etags = append(etags, mustPut(t, a, k, "v", ownership.IfAbsent()))
	}
	size := fileSize(t, segmentPath(t, dir))

	// b's fstat saw a torn tail of 100 bytes that a writer has cut since.
	b.mu.Lock()
	err := b.follow(size+100, false)
	end := b.seg.end
	b.mu.Unlock()
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	if end != size {
		t.Fatalf("follow stopped at %d, want %d (the end of the last whole frame)", end, size)
	}
	for i, k := range []string{"k1", "k2", "k3"} {
		wantBody(t, b, k, "v", etags[i])
	}
}

// switchWithoutUnlink compacts as s would, but leaves the old segment
// linked, as a compactor that died before the unlink does: the remove
// does nothing.
func switchWithoutUnlink(t *testing.T, s *Store) {
	t.Helper()
	unlockFn, err := s.lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlockFn()
	remove := s.sys.remove
	defer func() { s.sys.remove = remove }()
	s.sys.remove = func(string) error { return nil }
	if err := s.compact(); err != nil {
		t.Fatal(err)
	}
}

// TestStaleSegmentNotRemoved: a writer that finds a compaction's old
// segment still linked and cannot remove it refuses every write, with
// nothing written, until it can; a reader still on the old segment, which
// finds it linked, would not see them.
func TestStaleSegmentNotRemoved(t *testing.T) {
	dir := t.TempDir()
	a, b, w := openDir(t, dir), openDir(t, dir), openDir(t, dir)
	m := model{}
	churn(t, a, m, 1)
	m.check(t, b) // b reads the old segment
	old := segmentPath(t, dir)
	switchWithoutUnlink(t, a)

	w.sys.remove = func(string) error { return errInjected }
	for range 2 {
		_, err := w.Put(t.Context(), "late", []byte("x"), ownership.Always())
		wantFailed(t, err, "late")
		wantMissing(t, b, "late")
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("old segment: %v, want it still linked", err)
	}

	w.sys.remove = os.Remove
	e := mustPut(t, w, "late", "y", ownership.Always())
	wantBody(t, b, "late", "y", e)
	if _, err := os.Stat(old); !isNotExist(err) {
		t.Fatalf("old segment after a removal that succeeded: %v", err)
	}
	m["late"] = struct {
		body string
		etag ownership.ETag
	}{"y", e}
	m.check(t, b)
}

// TestCompactDirSyncFailure: the directory sync after a compaction's
// rename fails. The compactor follows the new segment but keeps the old
// one linked, and refuses writes until a directory sync succeeds; a writer
// of another Store syncs the directory itself before appending to the
// segment it loads.
func TestCompactDirSyncFailure(t *testing.T) {
	dir := t.TempDir()
	a, b := openDir(t, dir), openDir(t, dir)
	m := model{}
	churn(t, a, m, 2)
	old := segmentPath(t, dir)

	// The sync after the copy is renamed to a segment passes; the one
	// after `current` is replaced fails.
	dirSyncs := 0
	a.sys.syncDir = func(dir string) error {
		if dirSyncs++; dirSyncs == 1 {
			return syncDir(dir)
		}
		return errInjected
	}
	unlockFn, err := a.lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	err = a.compact()
	unlockFn()
	if !errors.Is(err, errInjected) {
		t.Fatalf("compact with a failing directory sync: %v", err)
	}
	next := segmentPath(t, dir)
	if next == old {
		t.Fatal("`current` still names the old segment")
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("old segment after a failed directory sync: %v, want it still linked", err)
	}
	size := fileSize(t, next)
	_, err = a.Put(t.Context(), "late", []byte("x"), ownership.Always())
	wantFailed(t, err, "late")
	if got := fileSize(t, next); got != size {
		t.Fatalf("a refused write wrote %d bytes", got-size)
	}
	m.check(t, a)

	syncs := 0
	b.sys.syncDir = func(dir string) error { syncs++; return syncDir(dir) }
	e := mustPut(t, b, "late", "y", ownership.Always())
	if syncs == 0 {
		t.Fatal("a writer appended to a segment it loaded without syncing the directory")
	}
	if _, err := os.Stat(old); !isNotExist(err) {
		t.Fatalf("old segment after a directory sync succeeded: %v", err)
	}

	a.sys.syncDir = syncDir
	e2 := mustPut(t, a, "later", "z", ownership.Always())
	c := openDir(t, dir)
	wantBody(t, c, "late", "y", e)
	wantBody(t, c, "later", "z", e2)
	delete(m, "late")
	delete(m, "later")
	for k, v := range m {
		wantBody(t, c, k, v.body, v.etag)
	}
}

// TestMissingCurrent: a directory that lost `current` but holds a segment
// with frames is refused, and left as it is; one whose only segment holds
// no frame (a crash while creating the store) opens.
func TestMissingCurrent(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	mustPut(t, s, "k", "v", ownership.IfAbsent())
	s.Close()
	seg := segmentPath(t, dir)
	before, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, currentName)); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(dir); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("open without `current`: %v, want ErrCorrupt", err)
	}
	after, err := os.ReadFile(seg)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the segment changed when Open refused the directory (%v)", err)
	}

	empty := t.TempDir()
	openDir(t, empty).Close()
	if err := os.Remove(filepath.Join(empty, currentName)); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, empty)
	e := mustPut(t, s, "k", "v", ownership.IfAbsent())
	wantBody(t, openDir(t, empty), "k", "v", e)
}
