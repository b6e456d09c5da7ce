package dirstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

func mustPut(t *testing.T, s *Store, key, body string, cond ownership.Condition) ownership.ETag {
	t.Helper()
	etag, err := s.Put(t.Context(), key, []byte(body), cond)
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return etag
}

func listKeys(t *testing.T, s *Store, prefix string) []string {
	t.Helper()
	var keys []string
	after := ""
	for {
		page, err := s.List(t.Context(), prefix, after, 0)
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

// dirNames lists a directory's entries, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestLeftoversCleanedAtOpen: temp files of a Store that died (a session
// directory nobody locks, loose files) are removed by the next Open and
// never listed; a live Store's session is left alone.
func TestLeftoversCleanedAtOpen(t *testing.T) {
	dir := t.TempDir()
	live, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	mustPut(t, live, "k", "v", ownership.IfAbsent())

	// What a crash mid-write leaves: a session directory with a complete,
	// fsynced temp file that was never renamed, and a half-written one.
	dead := filepath.Join(dir, tmpDir, "0123456789abcdef0123456789abcdef")
	if err := os.Mkdir(dead, 0o777); err != nil {
		t.Fatal(err)
	}
	obj := appendHeader(nil, newETag(), []byte("never committed"))
	obj = append(obj, "never committed"...)
	for name, data := range map[string][]byte{"1": obj, "2": obj[:10]} {
		if err := os.WriteFile(filepath.Join(dead, name), data, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, tmpDir, "format-stray"), []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}

	if got := listKeys(t, live, ""); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("list before cleanup: %q, want only k", got)
	}

	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := []string{filepath.Base(live.session), filepath.Base(s.session)}
	slices.Sort(want)
	if got := dirNames(t, filepath.Join(dir, tmpDir)); !slices.Equal(got, want) {
		t.Fatalf("tmp after Open: %q, want only the two live sessions %q", got, want)
	}
	// The live Store still writes through its session.
	mustPut(t, live, "k2", "v", ownership.IfAbsent())
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"k", "k2"}) {
		t.Fatalf("list: %q", got)
	}
}

// TestCloseRemovesSession: a cleanly closed Store leaves nothing in tmp/.
func TestCloseRemovesSession(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "k", "v", ownership.IfAbsent())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, filepath.Join(dir, tmpDir)); len(got) != 0 {
		t.Fatalf("tmp after Close: %q", got)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
	ctx := t.Context()
	_, err = s.Put(ctx, "k", nil, ownership.Always())
	if !errors.Is(err, ErrClosed) {
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

	// The objects survive for the next Store.
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if obj, err := s2.Get(ctx, "k"); err != nil || string(obj.Body) != "v" {
		t.Fatalf("get after reopening: %q, %v", obj.Body, err)
	}
}

func TestFormatMismatch(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, formatName), []byte("something else 7\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(dir); err == nil {
		s.Close()
		t.Fatal("Open of a directory in another format succeeded")
	}
}

// TestJunkIgnored: files in objects/ that keyPath would never make are not
// objects: List skips them and no key reaches them.
func TestJunkIgnored(t *testing.T) {
	s := openTemp(t)
	mustPut(t, s, "a/b", "v", ownership.IfAbsent())
	objects := filepath.Join(s.Dir(), objectsDir)
	for _, name := range []string{"junk", "oA", "o%61", "da/o%2F", "da/.hidden", "da/oB"} {
		if err := os.WriteFile(filepath.Join(objects, name), []byte("junk"), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"a/b"}) {
		t.Fatalf("list: %q, want only a/b", got)
	}
	if got := listKeys(t, s, strings.Repeat("a/", 3000)); len(got) != 0 {
		t.Fatalf("list with a prefix longer than any key: %q", got)
	}
}

// TestCorruptObject: damage to an object file is reported, not returned as
// data.
func TestCorruptObject(t *testing.T) {
	s := openTemp(t)
	etag := mustPut(t, s, "k", "hello world", ownership.IfAbsent())
	p := filepath.Join(s.Dir(), objectsDir, keyPath("k"))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(p, data, 0o666); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context(), "k")
	if !errors.Is(err, errCorrupt) || ownership.OutcomeOf(err) != ownership.Failed {
		t.Fatalf("get of a damaged object: %v, want a corrupt-object failure", err)
	}
	if err := os.WriteFile(p, data[:20], 0o666); err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(t.Context(), "k", []byte("x"), ownership.IfMatch(etag))
	if !errors.Is(err, errCorrupt) || ownership.OutcomeOf(err) != ownership.Failed {
		t.Fatalf("if-match put over a truncated object: %v, want a corrupt-object failure", err)
	}
}

// TestContextErrors: an unknown outcome from a done context carries the
// context's error too.
func TestContextErrors(t *testing.T) {
	s := openTemp(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Put(ctx, "k", []byte("v"), ownership.IfAbsent())
	if !errors.Is(err, ownership.ErrUnknownOutcome) || !errors.Is(err, context.Canceled) {
		t.Fatalf("put: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "dirstore: put \"k\": ") {
		t.Errorf("error message %q lacks context", err)
	}
	err = s.Delete(ctx, "k", ownership.Always())
	if !errors.Is(err, ownership.ErrUnknownOutcome) || !errors.Is(err, context.Canceled) {
		t.Fatalf("delete: %v", err)
	}
}

// TestAbandonedWriteNeverLands: a write whose context ends while another
// holder keeps the lock gives up before its commit point; when the lock is
// free again it does not land, leaves no temp file, and the Store works.
func TestAbandonedWriteNeverLands(t *testing.T) {
	s := openTemp(t)
	h := &heldStore{s}
	release := h.HoldWrites(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := s.Put(ctx, "k", []byte("abandoned"), ownership.IfAbsent())
		done <- err
	}()
	// Whether the cancel comes before or while the Put waits for the lock,
	// the Put cannot have passed it.
	cancel()
	if err := <-done; !errors.Is(err, ownership.ErrUnknownOutcome) {
		t.Fatalf("put: %v, want ErrUnknownOutcome", err)
	}
	release()
	// This Put takes the lock after the abandoned wait has let go of it.
	mustPut(t, s, "other", "v", ownership.IfAbsent())
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("get of the abandoned write: %v, want ErrNotFound", err)
	}
	if got := dirNames(t, s.session); len(got) != 0 {
		t.Fatalf("temp files left: %q", got)
	}
}

// TestPrune: deleting the last object under a directory removes the
// directories it leaves empty, up to the objects directory.
func TestPrune(t *testing.T) {
	s := openTemp(t)
	long := strings.Repeat("x", 150)
	keys := []string{"a/b/c/d", "a/b/e", long + "/y", strings.Repeat("/", 40) + "z"}
	var etags []ownership.ETag
	for _, k := range keys {
		etags = append(etags, mustPut(t, s, k, "v", ownership.IfAbsent()))
	}
	for i, k := range keys {
		if err := s.Delete(t.Context(), k, ownership.IfMatch(etags[i])); err != nil {
			t.Fatal(err)
		}
	}
	if got := dirNames(t, filepath.Join(s.Dir(), objectsDir)); len(got) != 0 {
		t.Fatalf("objects after deleting everything: %q", got)
	}
}

// TestTwoStoresOneProcess: two Stores on one directory in one process
// exclude each other through flock, each having its own open lock file.
func TestTwoStoresOneProcess(t *testing.T) {
	dir := t.TempDir()
	var stores [2]*Store
	for i := range stores {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	for round := range 50 {
		key := "k" + strings.Repeat("x", round)
		errs := make(chan error, 2*len(stores))
		start := make(chan struct{})
		for i, s := range stores {
			for range 2 {
				go func() {
					<-start
					_, err := s.Put(t.Context(), key, []byte{byte(i)}, ownership.IfAbsent())
					errs <- err
				}()
			}
		}
		close(start)
		landed := 0
		for range 2 * len(stores) {
			switch err := <-errs; ownership.OutcomeOf(err) {
			case ownership.Landed:
				landed++
			case ownership.Refused:
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if landed != 1 {
			t.Fatalf("round %d: %d writes landed, want 1", round, landed)
		}
	}
}

// TestNamesStayShort: no file the store creates, for any of a range of
// awkward keys, has a name over 255 bytes or lies outside the directory.
func TestNamesStayShort(t *testing.T) {
	s := openTemp(t)
	keys := []string{
		strings.Repeat("é", 512), strings.Repeat("\x01", 1024), strings.Repeat("\x00/", 100),
		strings.Repeat("ab/", 100) + strings.Repeat("Z", 724), "../../../../etc/passwd", "/etc/passwd", "a/../../b",
	}
	for _, k := range keys {
		mustPut(t, s, k, "v", ownership.IfAbsent())
	}
	err := filepath.WalkDir(s.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if len(d.Name()) > 255 {
			t.Errorf("name of %d bytes: %s", len(d.Name()), p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := listKeys(t, s, "")
	slices.Sort(keys)
	if !slices.Equal(got, keys) {
		t.Fatalf("list: %d keys, want %d", len(got), len(keys))
	}
}

// TestLongestPaths: in a directory whose path is as long as Open allows,
// the keys with the longest paths can still be stored; one byte longer and
// Open refuses the directory.
func TestLongestPaths(t *testing.T) {
	if maxDirLen <= 0 {
		t.Skip("PATH_MAX here is too small for the longest keys in any directory")
	}
	dir := t.TempDir()
	for len(dir) < maxDirLen {
		dir = filepath.Join(dir, strings.Repeat("d", min(200, maxDirLen-len(dir)-1)))
	}
	if len(dir) != maxDirLen {
		t.Fatalf("test bug: directory of %d bytes, want %d", len(dir), maxDirLen)
	}
	if _, err := Open(dir + "x"); err == nil {
		t.Fatal("Open of a directory path over the limit succeeded")
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, key := range []string{
		strings.Repeat("\x01", ownership.MaxKeyLen),
		strings.Repeat("\x01", 63) + "/" + strings.Repeat("\x01", ownership.MaxKeyLen-64),
		strings.Repeat("A/", ownership.MaxKeyLen/2),
	} {
		if len(keyPath(key)) > maxKeyPathLen {
			t.Fatalf("keyPath of %d bytes, over maxKeyPathLen", len(keyPath(key)))
		}
		etag := mustPut(t, s, key, "v", ownership.IfAbsent())
		if err := s.Delete(t.Context(), key, ownership.IfMatch(etag)); err != nil {
			t.Fatal(err)
		}
	}
}
