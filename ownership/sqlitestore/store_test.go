package sqlitestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/wasmkeep/wasmkeep/ownership"
)

func mustPut(t testing.TB, b ownership.Bucket, key, body string, cond ownership.Condition) ownership.ETag {
	t.Helper()
	etag, err := b.Put(t.Context(), key, []byte(body), cond)
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return etag
}

func wantBody(t testing.TB, b ownership.Bucket, key, body string, etag ownership.ETag) {
	t.Helper()
	obj, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if string(obj.Body) != body || (etag != "" && obj.ETag != etag) {
		t.Fatalf("get %q: %.40q %s, want %.40q %s", key, obj.Body, obj.ETag, body, etag)
	}
}

// TestStoresRace: several Stores on one directory, in one process, race
// create-only and if-match writes on the same keys, round after round:
// each round has exactly one winner of each race, the losers are refused
// (not unknown), and every Store reads the winner's write.
func TestStoresRace(t *testing.T) {
	dir := t.TempDir()
	stores := make([]*Store, 4)
	for i := range stores {
		stores[i] = openDir(t, dir)
	}
	const rounds = 100
	for r := range rounds {
		etag := mustPut(t, stores[0], fmt.Sprintf("match/%d", r), "initial", ownership.IfAbsent())
		var wg sync.WaitGroup
		outcomes := make([][2]error, len(stores))
		start := make(chan struct{})
		for i, s := range stores {
			wg.Go(func() {
				<-start
				body := []byte(fmt.Sprintf("store-%d-round-%d", i, r))
				_, outcomes[i][0] = s.Put(t.Context(), fmt.Sprintf("create/%d", r), body, ownership.IfAbsent())
				_, outcomes[i][1] = s.Put(t.Context(), fmt.Sprintf("match/%d", r), body, ownership.IfMatch(etag))
			})
		}
		close(start)
		wg.Wait()
		for race, key := range []string{fmt.Sprintf("create/%d", r), fmt.Sprintf("match/%d", r)} {
			winner := -1
			for i := range stores {
				switch o := ownership.OutcomeOf(outcomes[i][race]); o {
				case ownership.Landed:
					if winner >= 0 {
						t.Fatalf("round %d, %s: stores %d and %d both landed", r, key, winner, i)
					}
					winner = i
				case ownership.Refused:
				default:
					t.Fatalf("round %d, %s: store %d: %v (%v), want landed or refused", r, key, i, o, outcomes[i][race])
				}
			}
			if winner < 0 {
				t.Fatalf("round %d, %s: no store landed", r, key)
			}
			for _, s := range stores {
				wantBody(t, s, key, fmt.Sprintf("store-%d-round-%d", winner, r), "")
			}
		}
	}
}

// TestBatchOutcomesAreTheirOwn: writes that queue while the lock is held
// commit as one batch, in which a refused condition refuses that write
// alone; the others land. Time is synctest's: each write is in its place
// in the queue once the bubble is idle.
func TestBatchOutcomesAreTheirOwn(t *testing.T) {
	synctest.Test(t, testBatchOutcomesAreTheirOwn)
}

func testBatchOutcomesAreTheirOwn(t *testing.T) {
	s := openTemp(t)
	etag := mustPut(t, s, "k", "v1", ownership.IfAbsent())
	release := holdSem(s)
	type result struct {
		etag ownership.ETag
		err  error
	}
	writes := []struct {
		key  string
		body string
		cond ownership.Condition
	}{
		{"k", "v2", ownership.IfMatch(etag)},                                      // lands
		{"k", "v3", ownership.IfMatch(etag)},                                      // refused: v2 came first
		{"new", "n1", ownership.IfAbsent()},                                       // lands
		{"new", "n2", ownership.IfAbsent()},                                       // refused
		{"other", "o", ownership.Always()},                                        // lands
		{"big", string(bytes.Repeat([]byte("b"), 200<<10)), ownership.IfAbsent()}, // lands
	}
	results := make([]result, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() {
			e, err := s.Put(t.Context(), w.key, []byte(w.body), w.cond)
			results[i] = result{e, err}
		})
		// The first write waits for the lock; the others queue behind it
		// in this order.
		synctest.Wait()
	}
	release()
	wg.Wait()
	for i, want := range []ownership.Outcome{ownership.Landed, ownership.Refused, ownership.Landed, ownership.Refused, ownership.Landed, ownership.Landed} {
		if o := ownership.OutcomeOf(results[i].err); o != want {
			t.Errorf("write %d (%s %s): %v (%v), want %v", i, writes[i].key, writes[i].cond, o, results[i].err, want)
		}
	}
	wantBody(t, s, "k", "v2", results[0].etag)
	wantBody(t, s, "new", "n1", results[2].etag)
	wantBody(t, s, "other", "o", results[4].etag)
	wantBody(t, s, "big", writes[5].body, results[5].etag)
}

// TestFailedStatementFailsTheBatch: when SQLite fails a write of a batch
// (a trigger stands in for a full disk here), the transaction is rolled
// back, and every write of the batch, those queued after the failing one
// too, fails with nothing written. Time is synctest's, as in
// TestBatchOutcomesAreTheirOwn.
func TestFailedStatementFailsTheBatch(t *testing.T) {
	synctest.Test(t, testFailedStatementFailsTheBatch)
}

func testFailedStatementFailsTheBatch(t *testing.T) {
	s := openTemp(t)
	c, err := sqlite3.Open(filepath.Join(s.Dir(), dbName))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Exec("CREATE TRIGGER fail BEFORE INSERT ON objects WHEN NEW.key = CAST('bad' AS BLOB) BEGIN SELECT RAISE(ABORT, 'injected'); END")
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	release := holdSem(s)
	keys := []string{"first", "before", "bad", "after"}
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { _, errs[i] = s.Put(t.Context(), k, []byte(k), ownership.IfAbsent()) })
		// The first write waits for the lock; the others queue behind it
		// in this order, and form the next batch.
		synctest.Wait()
	}
	release()
	wg.Wait()
	if errs[0] != nil {
		t.Fatalf("put %q: %v", keys[0], errs[0])
	}
	wantBody(t, s, keys[0], keys[0], "")
	for i, k := range keys[1:] {
		if o := ownership.OutcomeOf(errs[i+1]); o != ownership.Failed {
			t.Errorf("put %q: %v (%v), want failed", k, o, errs[i+1])
		}
		if _, err := s.Get(t.Context(), k); !errors.Is(err, ownership.ErrNotFound) {
			t.Errorf("get %q: %v, want not found", k, err)
		}
	}
}

// holdSem takes the in-process half of s's write lock, as a write of s
// would, and returns what lets it go: the writes of s wait for it on a
// channel, which, unlike a held flock, a synctest bubble sees them blocked
// on.
func holdSem(s *Store) (release func()) {
	s.sem <- struct{}{}
	return func() { <-s.sem }
}

// TestAbandonedWriteNeverLands: a write whose context ends while it waits
// for the lock is answered unknown and never lands.
func TestAbandonedWriteNeverLands(t *testing.T) {
	s := openTemp(t)
	release := (&heldStore{s}).HoldWrites(t)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Put(ctx, "k", []byte("late"), ownership.IfAbsent()); ownership.OutcomeOf(err) != ownership.Unknown {
		t.Fatalf("put held past its deadline: %v, want unknown", err)
	}
	release()
	mustPut(t, s, "after", "a", ownership.IfAbsent())
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("get of the abandoned write: %v, want not found", err)
	}
}

// TestCloseAndReopen: what a Store wrote is there when the directory is
// opened again, objects in rows and in chunks alike.
func TestCloseAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	big := string(bytes.Repeat([]byte("0123456789"), 30000))
	small := mustPut(t, s, "small", "s", ownership.IfAbsent())
	large := mustPut(t, s, "large", big, ownership.IfAbsent())
	mustPut(t, s, "gone", big, ownership.IfAbsent())
	if err := s.Delete(t.Context(), "gone", ownership.Always()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "small"); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: %v, want ErrClosed", err)
	}
	s = openDir(t, dir)
	wantBody(t, s, "small", "s", small)
	wantBody(t, s, "large", big, large)
	if _, err := s.Get(t.Context(), "gone"); !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("get of a deleted key: %v, want not found", err)
	}
	// The deleted object's chunks are gone with it.
	if n := count(t, s, "SELECT count(*) FROM chunks"); n != int64(len(big)+chunkSize-1)/chunkSize {
		t.Fatalf("%d chunks, want those of one object", n)
	}
}

// count runs a query of one integer on the Store's writer connection.
func count(t testing.TB, s *Store, query string) int64 {
	t.Helper()
	var n int64
	if err := queryRow(s.w.c, query, func(st *sqlite3.Stmt) { n = st.ColumnInt64(0) }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDamage: a byte flipped in a stored body, in its row or in one of
// its chunks, is a damaged object: Get says so every time, range reads
// that touch the damaged chunk say so, those that do not read the rest,
// other keys are served, and a write over the key mends it.
func TestDamage(t *testing.T) {
	s := openTemp(t)
	big := bytes.Repeat([]byte("abcdefgh"), 3*chunkSize/8+100) // 3 chunks and a bit
	bigETag := mustPut(t, s, "big", string(big), ownership.IfAbsent())
	mustPut(t, s, "small", "a small body", ownership.IfAbsent())
	okETag := mustPut(t, s, "ok", "fine", ownership.IfAbsent())

	// Flip a byte of the second chunk of big, and one of small's row, as
	// a disk or a person would: behind the store's back.
	flip := func(query string) {
		t.Helper()
		if err := s.w.c.Exec(query); err != nil {
			t.Fatal(err)
		}
	}
	flip(fmt.Sprintf(`UPDATE chunks SET data = CAST(substr(data, 1, 99) || x'00' || substr(data, 101) AS BLOB)
		WHERE rowid = (SELECT id FROM objects WHERE key = CAST('big' AS BLOB)) << %d | 1`, chunkShift))
	flip(`UPDATE objects SET body = CAST('a smell body' AS BLOB) WHERE key = CAST('small' AS BLOB)`)

	for range 2 {
		for _, key := range []string{"big", "small"} {
			if _, err := s.Get(t.Context(), key); !errors.Is(err, ownership.ErrDamaged) || ownership.OutcomeOf(err) != ownership.Damaged {
				t.Fatalf("get of damaged %s: %v, want ErrDamaged", key, err)
			}
		}
	}
	if _, err := s.GetRange(t.Context(), "big", chunkSize+50, 100); !errors.Is(err, ownership.ErrDamaged) {
		t.Fatalf("range read of the damaged chunk: %v, want ErrDamaged", err)
	}
	if _, err := s.GetRange(t.Context(), "small", 0, 3); !errors.Is(err, ownership.ErrDamaged) {
		t.Fatalf("range read of the damaged row: %v, want ErrDamaged", err)
	}
	for _, r := range [][2]int64{{0, chunkSize}, {2 * chunkSize, 1 << 20}} {
		obj, err := s.GetRange(t.Context(), "big", r[0], r[1])
		if err != nil || obj.ETag != bigETag || !bytes.Equal(obj.Body, ownership.CopyRange(big, r[0], r[1])) {
			t.Fatalf("range read [%d, +%d) of undamaged chunks: %d bytes, %s, %v", r[0], r[1], len(obj.Body), obj.ETag, err)
		}
	}
	wantBody(t, s, "ok", "fine", okETag)

	// A chunk gone is damage too.
	flip(fmt.Sprintf(`DELETE FROM chunks WHERE rowid = (SELECT id FROM objects WHERE key = CAST('big' AS BLOB)) << %d | 2`, chunkShift))
	if _, err := s.GetRange(t.Context(), "big", 2*chunkSize, 10); !errors.Is(err, ownership.ErrDamaged) {
		t.Fatalf("range read of a missing chunk: %v, want ErrDamaged", err)
	}

	// Written again, the keys are whole.
	mustPut(t, s, "big", "mended", ownership.Always())
	wantBody(t, s, "big", "mended", "")
	mustPut(t, s, "small", "mended", ownership.Always())
	wantBody(t, s, "small", "mended", "")
}

// TestClaim: a claim is free until someone holds it, held while they
// do (another Store of this process included), and free again once it is
// released.
func TestClaim(t *testing.T) {
	dir := t.TempDir()
	a, b := openDir(t, dir), openDir(t, dir)
	release, free, err := a.Claim("node/n1")
	if err != nil || !free {
		t.Fatalf("first claim: free %v, %v; want free", free, err)
	}
	if _, free, err := b.Claim("node/n1"); err != nil || free {
		t.Fatalf("claim held by another Store: free %v, %v; want held", free, err)
	}
	if _, free, err := a.Claim("node/n1"); err != nil || free {
		t.Fatalf("claim held by the same Store: free %v, %v; want held", free, err)
	}
	r2, free, err := b.Claim("node/n2")
	if err != nil || !free {
		t.Fatalf("another name: free %v, %v; want free", free, err)
	}
	defer r2()
	if err := release(); err != nil {
		t.Fatal(err)
	}
	r3, free, err := b.Claim("node/n1")
	if err != nil || !free {
		t.Fatalf("claim after release: free %v, %v; want free", free, err)
	}
	r3()
	if _, err := os.Stat(filepath.Join(dir, claimsName)); err != nil {
		t.Fatal(err)
	}
}

// TestFormats: Open refuses a directory store's directory and another
// application's database, and changes neither.
func TestFormats(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, dirstoreMarker), []byte("wasmkeep dirstore 2\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrFormat) {
		t.Fatalf("open of a directory store: %v, want ErrFormat", err)
	}
	if _, err := os.Stat(filepath.Join(dir, dbName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open of a directory store made %s: %v", dbName, err)
	}

	dir = t.TempDir()
	c, err := sqlite3.Open(filepath.Join(dir, dbName))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec("CREATE TABLE t (x)"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrFormat) {
		t.Fatalf("open of another database: %v, want ErrFormat", err)
	}
}

// TestListAcrossPrefixes: a listing with startAfter far past its prefix
// starts there, and a prefix ending in high bytes bounds it right.
func TestListAcrossPrefixes(t *testing.T) {
	s := openTemp(t)
	for _, k := range []string{"a", "a/1", "a/2", "a/3", "a0", "b", "é", "éa"} {
		mustPut(t, s, k, k, ownership.IfAbsent())
	}
	for _, c := range []struct {
		prefix, after string
		want          string
	}{
		{"a/", "a/1", "[a/2 a/3]"},
		{"a/", "", "[a/1 a/2 a/3]"},
		{"", "a0", "[b é éa]"},
		{"a", "b", "[]"},
		{"\xc3", "", "[é éa]"},
		{"é", "é", "[éa]"},
	} {
		page, err := s.List(t.Context(), c.prefix, c.after, 0)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range page.Entries {
			keys = append(keys, e.Key)
		}
		if got := fmt.Sprint(keys); got != c.want && !(c.want == "[]" && len(keys) == 0) {
			t.Errorf("list %q after %q: %s, want %s", c.prefix, c.after, got, c.want)
		}
	}
}

// TestWALStartsOver: under steady writes the checkpointer copies the WAL
// into the database and the WAL starts over, so it stays about as long as
// checkpointPages, where without the checkpointer's last round under the
// lock it would grow with every commit.
func TestWALStartsOver(t *testing.T) {
	s := openTemp(t)
	etag := mustPut(t, s, "lease", "renewed", ownership.Always())
	const commits = 3 * checkpointPages
	for range commits {
		etag = mustPut(t, s, "lease", "renewed", ownership.IfMatch(etag))
	}
	info, err := os.Stat(filepath.Join(s.Dir(), dbName+"-wal"))
	if err != nil {
		t.Fatal(err)
	}
	// Each commit appends one page and a frame header of 24 bytes.
	if limit := int64(2 * checkpointPages * (pageSize + 24)); info.Size() > limit {
		t.Fatalf("WAL of %d bytes after %d commits of one page, want at most %d", info.Size(), commits, limit)
	}
}
