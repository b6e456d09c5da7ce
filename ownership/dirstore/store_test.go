package dirstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

func mustPut(t testing.TB, s *Store, key, body string, cond ownership.Condition) ownership.ETag {
	t.Helper()
	etag, err := s.Put(context.Background(), key, []byte(body), cond)
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return etag
}

func wantBody(t testing.TB, s *Store, key, body string, etag ownership.ETag) {
	t.Helper()
	obj, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if string(obj.Body) != body || etag != "" && obj.ETag != etag {
		t.Fatalf("get %q: (%q, %s), want (%q, %s)", key, obj.Body, obj.ETag, body, etag)
	}
}

func wantMissing(t testing.TB, s *Store, key string) {
	t.Helper()
	if _, err := s.Get(context.Background(), key); !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("get %q: %v, want ErrNotFound", key, err)
	}
}

func listKeys(t testing.TB, s *Store, prefix string) []string {
	t.Helper()
	var keys []string
	after := ""
	for {
		page, err := s.List(context.Background(), prefix, after, 0)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, e := range page.Entries {
			keys = append(keys, e.Key)
		}
		if !page.Truncated {
			return keys
		}
		after = keys[len(keys)-1]
	}
}

// segmentPath returns the path of the segment `current` names in dir.
func segmentPath(t testing.TB, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, currentName))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, strings.TrimSpace(string(data)))
}

func fileSize(t testing.TB, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// segments lists the segment files in dir.
func segments(t testing.TB, dir string) []string {
	t.Helper()
	names, err := readDirNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, n := range names {
		if _, ok := parseSegName(n); ok {
			segs = append(segs, n)
		}
	}
	slices.Sort(segs)
	return segs
}

// copyStore copies the store in src to a new directory, with its segment
// cut (or padded) to the bytes seg, and returns the new directory.
func copyStore(t *testing.T, src string, seg []byte) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range []string{formatName, currentName} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	name := filepath.Base(segmentPath(t, src))
	if err := os.WriteFile(filepath.Join(dst, name), seg, 0o666); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestCloseAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	etag := mustPut(t, s, "k", "v", ownership.IfAbsent())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
	ctx := t.Context()
	if _, err := s.Put(ctx, "k", nil, ownership.Always()); !errors.Is(err, ErrClosed) {
		t.Errorf("put after Close: %v", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("get after Close: %v", err)
	}
	if err := s.Delete(ctx, "k", ownership.Always()); !errors.Is(err, ErrClosed) {
		t.Errorf("delete after Close: %v", err)
	}
	if _, err := s.List(ctx, "", "", 0); !errors.Is(err, ErrClosed) {
		t.Errorf("list after Close: %v", err)
	}
	s2 := openDir(t, dir)
	wantBody(t, s2, "k", "v", etag)
}

// TestFormats: a store never opens a directory of the earlier layout (a
// file per object), of another layout, or one holding unrelated files.
func TestFormats(t *testing.T) {
	earlier := t.TempDir()
	if err := os.WriteFile(filepath.Join(earlier, formatName), []byte("wasmkeep dirstore 1\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(earlier, "objects"), 0o777); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(earlier); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "start from an empty directory") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a directory in the earlier layout: %v, want ErrFormat saying what to do", err)
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, formatName), []byte("something else 7\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(other); !errors.Is(err, ErrFormat) {
		t.Fatalf("Open of another format: %v, want ErrFormat", err)
	}
	junk := t.TempDir()
	if err := os.WriteFile(filepath.Join(junk, "notes.txt"), []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(junk); !errors.Is(err, ErrFormat) {
		t.Fatalf("Open of a directory with unrelated files: %v, want ErrFormat", err)
	}
}

// writeFrames puts n keys, one batch each, and returns the segment's size
// after each put (ends[0] is its size before the first).
func writeFrames(t *testing.T, s *Store, n int) (etags []ownership.ETag, ends []int64) {
	t.Helper()
	p := segmentPath(t, s.Dir())
	ends = append(ends, fileSize(t, p))
	for i := range n {
		etags = append(etags, mustPut(t, s, "k"+strconv.Itoa(i), strings.Repeat("v", i+1), ownership.IfAbsent()))
		ends = append(ends, fileSize(t, p))
	}
	return etags, ends
}

// TestTornTail: a crash can leave the last write cut at any byte. Reopened,
// the store has every write before it, intact, and not the cut one; its
// segment is cut back to the last whole frame; and writes go on.
func TestTornTail(t *testing.T) {
	src := t.TempDir()
	s := openDir(t, src)
	const n = 4
	etags, ends := writeFrames(t, s, n)
	whole, err := os.ReadFile(segmentPath(t, src))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for cut := ends[n-2]; cut < ends[n]; cut++ {
		dir := copyStore(t, src, whole[:cut])
		s, err := Open(dir)
		if err != nil {
			t.Fatalf("open with the segment cut at %d: %v", cut, err)
		}
		kept := 0
		for i := range n {
			if ends[i+1] <= cut {
				wantBody(t, s, "k"+strconv.Itoa(i), strings.Repeat("v", i+1), etags[i])
				kept = i + 1
			} else {
				wantMissing(t, s, "k"+strconv.Itoa(i))
			}
		}
		if got := fileSize(t, segmentPath(t, dir)); got != ends[kept] {
			t.Fatalf("cut at %d: segment of %d bytes after Open, want %d", cut, got, ends[kept])
		}
		etag := mustPut(t, s, "after", "a", ownership.IfAbsent())
		s.Close()
		s = openDir(t, dir)
		wantBody(t, s, "after", "a", etag)
		if got := len(listKeys(t, s, "")); got != kept+1 {
			t.Fatalf("cut at %d: %d keys after reopening, want %d", cut, got, kept+1)
		}
		s.Close()
	}
}

// TestTornTailGarbage: what a machine crash leaves past the last whole
// frame need not be a prefix of the frame: zeros, or stale bytes.
func TestTornTailGarbage(t *testing.T) {
	src := t.TempDir()
	s := openDir(t, src)
	etags, _ := writeFrames(t, s, 3)
	whole, err := os.ReadFile(segmentPath(t, src))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	frame := func() []byte {
		var fb frameBuilder
		fb.reset()
		fb.add(kindPut, "torn", newETagBits(), []byte("torn body"))
		salt, _ := parseSegHeader(whole)
		return fb.finish(salt)
	}
	half := frame()
	for _, c := range []struct {
		name string
		tail []byte
	}{
		{"zeros", make([]byte, 4096)},
		{"junk", bytes.Repeat([]byte{0xa5}, 100)},
		{"frame header only", half[:frameHeaderLen]},
		{"frame with a hole", append(append(slices.Clone(half[:frameHeaderLen+4]), make([]byte, 8)...), half[frameHeaderLen+12:]...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyStore(t, src, append(slices.Clone(whole), c.tail...))
			s := openDir(t, dir)
			for i, etag := range etags {
				wantBody(t, s, "k"+strconv.Itoa(i), strings.Repeat("v", i+1), etag)
			}
			wantMissing(t, s, "torn")
			if got := fileSize(t, segmentPath(t, dir)); got != int64(len(whole)) {
				t.Fatalf("segment of %d bytes after Open, want %d", got, len(whole))
			}
		})
	}
}

// TestDamage: a frame that fails its checksum with whole frames after it
// cannot come from a crash. Open refuses the store with ErrCorrupt rather
// than drop the acknowledged writes after the damage. A record damaged
// after Open read the segment is reported by Get, not returned.
func TestDamage(t *testing.T) {
	src := t.TempDir()
	s := openDir(t, src)
	_, ends := writeFrames(t, s, 3)
	whole, err := os.ReadFile(segmentPath(t, src))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, c := range []struct {
		name string
		at   int64
	}{
		{"payload of the first frame", ends[0] + frameHeaderLen + recHeaderLen},
		{"header of the first frame", ends[0] + 5},
		{"magic of the second frame", ends[1]},
	} {
		t.Run(c.name, func(t *testing.T) {
			seg := slices.Clone(whole)
			seg[c.at] ^= 0x40
			dir := copyStore(t, src, seg)
			s, err := Open(dir)
			if !errors.Is(err, ErrCorrupt) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("Open of a damaged segment: %v, want ErrCorrupt", err)
			}
			t.Log(err)
			// Open changed nothing.
			if got := fileSize(t, segmentPath(t, dir)); got != int64(len(whole)) {
				t.Fatalf("segment of %d bytes after a refused Open, want %d", got, len(whole))
			}
		})
	}

	// Damage under an open Store: Get checks the record.
	dir := copyStore(t, src, whole)
	s = openDir(t, dir)
	f, err := os.OpenFile(segmentPath(t, dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{'X'}, ends[1]-1); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context(), "k0")
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, ownership.ErrDamaged) || ownership.OutcomeOf(err) != ownership.Damaged ||
		!strings.Contains(err.Error(), `"k0"`) {
		t.Fatalf("get of a damaged record: %v, want a damaged object naming the key", err)
	}
}

// TestForeignTornFrame: a writer in another process died in the middle of
// its pwrite. Readers ignore the partial frame; the next writer cuts it
// off and writes in its place, and every Store sees that write.
func TestForeignTornFrame(t *testing.T) {
	dir := t.TempDir()
	a, b := openDir(t, dir), openDir(t, dir)
	etag := mustPut(t, a, "k", "v", ownership.IfAbsent())
	p := segmentPath(t, dir)
	size := fileSize(t, p)
	whole, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	salt, _ := parseSegHeader(whole)
	var fb frameBuilder
	fb.reset()
	fb.add(kindPut, "k", newETagBits(), []byte("never acknowledged"))
	frame := fb.finish(salt)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(frame[:len(frame)-3]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	wantBody(t, a, "k", "v", etag)
	wantBody(t, b, "k", "v", etag)
	e2 := mustPut(t, b, "k", "v2", ownership.IfMatch(etag))
	wantBody(t, a, "k", "v2", e2)
	wantBody(t, b, "k", "v2", e2)
	if got := fileSize(t, p); got >= size+int64(len(frame)) {
		t.Fatalf("segment of %d bytes: the partial frame was not cut", got)
	}
}

// TestAbandonedWriteNeverLands: a write whose context ends while another
// holder keeps the lock gives up before its commit point; when the lock is
// free again it does not land, and the Store works.
func TestAbandonedWriteNeverLands(t *testing.T) {
	s := openTemp(t)
	release := (&heldStore{s}).HoldWrites(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := s.Put(ctx, "k", []byte("abandoned"), ownership.IfAbsent())
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, ownership.ErrUnknownOutcome) {
		t.Fatalf("put: %v, want ErrUnknownOutcome", err)
	}
	release()
	mustPut(t, s, "other", "v", ownership.IfAbsent())
	wantMissing(t, s, "k")
}

// TestTwoStoresOneProcess: two Stores on one directory in one process
// exclude each other through flock, and each sees the other's writes as
// soon as they are acknowledged.
func TestTwoStoresOneProcess(t *testing.T) {
	dir := t.TempDir()
	stores := []*Store{openDir(t, dir), openDir(t, dir)}
	for round := range 50 {
		key := "k" + strconv.Itoa(round)
		type result struct {
			etag ownership.ETag
			body string
			err  error
		}
		results := make(chan result, 4)
		start := make(chan struct{})
		for i, s := range stores {
			for j := range 2 {
				go func() {
					<-start
					body := fmt.Sprintf("store %d writer %d", i, j)
					etag, err := s.Put(t.Context(), key, []byte(body), ownership.IfAbsent())
					results <- result{etag, body, err}
				}()
			}
		}
		close(start)
		landed := 0
		for range 4 {
			r := <-results
			switch ownership.OutcomeOf(r.err) {
			case ownership.Landed:
				landed++
				for _, s := range stores {
					wantBody(t, s, key, r.body, r.etag)
				}
			case ownership.Refused:
			default:
				t.Fatalf("round %d: %v", round, r.err)
			}
		}
		if landed != 1 {
			t.Fatalf("round %d: %d writes landed, want 1", round, landed)
		}
	}
}

// TestConcurrentConditionalPuts: many goroutines of two Stores, batched,
// on one shared counter and on keys of their own. Read-modify-write with
// if-match loses no update, and every chain of if-match writes lands.
func TestConcurrentConditionalPuts(t *testing.T) {
	t.Run("appending", func(t *testing.T) { concurrentConditionalPuts(t, defaultCompactMin) })
	// Both Stores compact whenever dead bytes outweigh live ones, so that
	// reads and writes of each race the other's segment switches.
	t.Run("compacting", func(t *testing.T) { concurrentConditionalPuts(t, 1) })
}

func concurrentConditionalPuts(t *testing.T, compactMin int64) {
	dir := t.TempDir()
	stores := []*Store{openDir(t, dir), openDir(t, dir)}
	for _, s := range stores {
		s.compactMin = compactMin
	}
	ctx := t.Context()
	const workers, rounds = 16, 25
	mustPut(t, stores[0], "shared/counter", "0", ownership.IfAbsent())
	var wg sync.WaitGroup
	var mu sync.Mutex
	increments := 0
	for w := range workers {
		s := stores[w%2]
		wg.Go(func() {
			own := fmt.Sprintf("actors/test/%d/state", w)
			etag, err := s.Put(ctx, own, []byte("0"), ownership.IfAbsent())
			if err != nil {
				t.Error(err)
				return
			}
			for r := range rounds {
				if etag, err = s.Put(ctx, own, []byte(strconv.Itoa(r+1)), ownership.IfMatch(etag)); err != nil {
					t.Errorf("%s round %d: %v", own, r, err)
					return
				}
				obj, err := s.Get(ctx, "shared/counter")
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := strconv.Atoi(string(obj.Body))
				_, err = s.Put(ctx, "shared/counter", []byte(strconv.Itoa(n+1)), ownership.IfMatch(obj.ETag))
				switch ownership.OutcomeOf(err) {
				case ownership.Landed:
					mu.Lock()
					increments++
					mu.Unlock()
				case ownership.Refused:
				default:
					t.Errorf("counter: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for _, s := range stores {
		wantBody(t, s, "shared/counter", strconv.Itoa(increments), "")
		for w := range workers {
			wantBody(t, s, fmt.Sprintf("actors/test/%d/state", w), strconv.Itoa(rounds), "")
		}
	}
}

// TestBatchOrder: writes of one batch see the earlier writes of the same
// batch: a create and an if-match replace of its ETag, queued together,
// both land; a second create of the same key is refused.
func TestBatchOrder(t *testing.T) {
	s := openTemp(t)
	release := (&heldStore{s}).HoldWrites(t)
	first := &write{ctx: t.Context(), op: "put", kind: kindPut, key: "k", body: []byte("1"), cond: ownership.IfAbsent(), etag: newETagBits()}
	second := &write{ctx: t.Context(), op: "put", kind: kindPut, key: "k", body: []byte("2"), cond: ownership.IfMatch(first.etag.ETag()), etag: newETagBits()}
	third := &write{ctx: t.Context(), op: "put", kind: kindPut, key: "k", body: []byte("3"), cond: ownership.IfAbsent(), etag: newETagBits()}
	del := &write{ctx: t.Context(), op: "delete", kind: kindDelete, key: "gone", cond: ownership.Always(), etag: newETagBits()}
	batch := []*write{first, second, third, del}
	done := make(chan struct{})
	go func() { s.commitBatch(t.Context(), batch); close(done) }()
	release()
	<-done
	if first.err != nil || second.err != nil || del.err != nil {
		t.Fatalf("batch: %v, %v, %v", first.err, second.err, del.err)
	}
	if !errors.Is(third.err, ownership.ErrPrecondition) {
		t.Fatalf("second create in the batch: %v, want ErrPrecondition", third.err)
	}
	wantBody(t, s, "k", "2", second.etag.ETag())
}

// TestSyncFailure: a batch whose fdatasync fails is answered
// ErrUnknownOutcome; its write is visible, and the writer rewrites the
// segment (a compaction) so that what it holds is durable again before
// later writes build on it.
func TestSyncFailure(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	etag := mustPut(t, s, "k", "v1", ownership.IfAbsent())
	first := segmentPath(t, dir)
	failed := false
	s.sys.datasync = func(fd int, p string) error {
		if !failed {
			failed = true // only the batch's sync fails, not the rewrite's
			return errInjected
		}
		return fdatasync(fd, p)
	}
	_, err := s.Put(t.Context(), "k", []byte("v2"), ownership.IfMatch(etag))
	if !errors.Is(err, ownership.ErrUnknownOutcome) || !strings.Contains(err.Error(), `put "k"`) {
		t.Fatalf("put with a failing sync: %v, want ErrUnknownOutcome naming the key", err)
	}
	if _, err := os.Stat(filepath.Join(dir, suspectName)); !isNotExist(err) {
		t.Fatalf("suspect file after a rewrite that succeeded: %v", err)
	}
	if segmentPath(t, dir) == first {
		t.Fatal("the segment was not rewritten after a failed sync")
	}
	if segs := segments(t, dir); len(segs) != 1 {
		t.Fatalf("segments after the rewrite: %q, want one", segs)
	}
	obj, err := s.Get(t.Context(), "k")
	if err != nil || string(obj.Body) != "v2" {
		t.Fatalf("get after the unknown write: %q, %v", obj.Body, err)
	}
	e3 := mustPut(t, s, "k", "v3", ownership.IfMatch(obj.ETag))
	wantBody(t, openDir(t, dir), "k", "v3", e3)
}
