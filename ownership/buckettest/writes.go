package buckettest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

func testGetMissing(t *testing.T, b ownership.Bucket) {
	obj, err := b.Get(t.Context(), "missing")
	if !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("get of a missing key: (%s, %v), want ErrNotFound", abbrev(obj.Body), err)
	}
	wantOutcome(t, "get of a missing key", err, ownership.NotFound)
}

func testReadAfterWrite(t *testing.T, b ownership.Bucket) {
	const key = "raw/key"
	e1 := put(t, b, key, []byte("one"), ownership.IfAbsent())
	wantObject(t, b, key, []byte("one"), e1)

	e2 := put(t, b, key, []byte("two"), ownership.IfMatch(e1))
	if e2 == e1 {
		t.Fatalf("replacing write returned the old ETag %q", e1)
	}
	wantObject(t, b, key, []byte("two"), e2)

	e3 := put(t, b, key, []byte("three"), ownership.Always())
	wantObject(t, b, key, []byte("three"), e3)

	if err := b.Delete(t.Context(), key, ownership.IfMatch(e3)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantAbsent(t, b, key)
}

func testEmptyBody(t *testing.T, b ownership.Bucket) {
	etag := put(t, b, "empty", nil, ownership.IfAbsent())
	obj := get(t, b, "empty")
	if len(obj.Body) != 0 || obj.ETag != etag {
		t.Fatalf("get: (%s, %q), want empty body and %q", abbrev(obj.Body), obj.ETag, etag)
	}
	page, err := b.List(t.Context(), "empty", "", 0)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	want := []ownership.ListEntry{{Key: "empty", ETag: etag, Size: 0}}
	if fmt.Sprint(page.Entries) != fmt.Sprint(want) {
		t.Fatalf("list: %v, want %v", page.Entries, want)
	}
}

// testNoAliasing: the store keeps its own copy of what it was given and hands
// out copies, so neither side can change a stored object through a slice.
func testNoAliasing(t *testing.T, b ownership.Bucket) {
	body := []byte("original")
	etag := put(t, b, "alias", body, ownership.Always())
	copy(body, "XXXXXXXX")
	obj := get(t, b, "alias")
	copy(obj.Body, "YYYYYYYY")
	wantObject(t, b, "alias", []byte("original"), etag)
}

func testUnconditionalPut(t *testing.T, b ownership.Bucket) {
	const key = "always"
	e1 := put(t, b, key, []byte("first"), ownership.Always())
	wantObject(t, b, key, []byte("first"), e1)
	e2 := put(t, b, key, []byte("second"), ownership.Always())
	if e2 == e1 {
		t.Fatalf("overwrite returned the old ETag %q", e1)
	}
	wantObject(t, b, key, []byte("second"), e2)
}

func testCreateOnly(t *testing.T, b ownership.Bucket) {
	const key = "create"
	e1 := put(t, b, key, []byte("first"), ownership.IfAbsent())

	_, err := b.Put(t.Context(), key, []byte("second"), ownership.IfAbsent())
	if !errors.Is(err, ownership.ErrPrecondition) {
		t.Fatalf("create-only over an existing key: %v, want ErrPrecondition", err)
	}
	wantOutcome(t, "create-only over an existing key", err, ownership.Refused)
	wantObject(t, b, key, []byte("first"), e1)

	if err := b.Delete(t.Context(), key, ownership.Always()); err != nil {
		t.Fatalf("delete: %v", err)
	}
	e3 := put(t, b, key, []byte("third"), ownership.IfAbsent())
	wantObject(t, b, key, []byte("third"), e3)
}

func testCreateOnlyRace(t *testing.T, b ownership.Bucket) {
	const writers, rounds = 20, 5
	for r := range rounds {
		key := fmt.Sprintf("race/create/%d", r)
		body := func(i int) []byte { return fmt.Appendf(nil, "round %d writer %d", r, i) }
		etags, errs := race(writers, func(i int) (ownership.ETag, error) {
			return b.Put(t.Context(), key, body(i), ownership.IfAbsent())
		})
		w := oneWinner(t, "create-only race on "+key, etags, errs)
		wantObject(t, b, key, body(w), etags[w])
	}
}

func testIfMatch(t *testing.T, b ownership.Bucket) {
	const key = "match"
	e1 := put(t, b, key, []byte("v1"), ownership.IfAbsent())
	e2 := put(t, b, key, []byte("v2"), ownership.IfMatch(e1))
	wantObject(t, b, key, []byte("v2"), e2)

	refused := func(what, key string, cond ownership.Condition) {
		t.Helper()
		_, err := b.Put(t.Context(), key, []byte("loser"), cond)
		if !errors.Is(err, ownership.ErrPrecondition) {
			t.Errorf("%s: %v, want ErrPrecondition", what, err)
		}
		wantOutcome(t, what, err, ownership.Refused)
	}
	refused("if-match with a stale ETag", key, ownership.IfMatch(e1))
	refused("if-match with an ETag no write returned", key, ownership.IfMatch("no-such-etag"))
	refused("if-match with the empty ETag", key, ownership.IfMatch(""))
	refused("if-match on a missing key", "match-missing", ownership.IfMatch(e2))
	wantObject(t, b, key, []byte("v2"), e2)
	wantAbsent(t, b, "match-missing")

	// A key deleted and created again with the same bytes is a new version:
	// the ETag from before the delete must not match it.
	if err := b.Delete(t.Context(), key, ownership.IfMatch(e2)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	e3 := put(t, b, key, []byte("v2"), ownership.IfAbsent())
	refused("if-match with the ETag of a deleted incarnation", key, ownership.IfMatch(e2))
	wantObject(t, b, key, []byte("v2"), e3)
}

func testIfMatchRace(t *testing.T, b ownership.Bucket) {
	const writers, rounds = 20, 3
	const key = "race/match"
	etag := put(t, b, key, []byte("round 0"), ownership.IfAbsent())
	for r := 1; r <= rounds; r++ {
		body := func(i int) []byte { return fmt.Appendf(nil, "round %d writer %d", r, i) }
		etags, errs := race(writers, func(i int) (ownership.ETag, error) {
			return b.Put(t.Context(), key, body(i), ownership.IfMatch(etag))
		})
		w := oneWinner(t, fmt.Sprintf("if-match race, round %d", r), etags, errs)
		wantObject(t, b, key, body(w), etags[w])
		etag = etags[w]
	}
}

// testSameBytesNewETag: every store wasmkeep ships gives each write a new
// ETag, even for identical bytes, so that a stale writer's ETag can never
// match a later version that happens to hold the same bytes.
func testSameBytesNewETag(t *testing.T, b ownership.Bucket) {
	const key = "same"
	body := []byte("identical bytes")
	seen := map[ownership.ETag]string{}
	note := func(etag ownership.ETag, how string) {
		t.Helper()
		if prev, ok := seen[etag]; ok {
			t.Errorf("ETag %q of the %s repeats the ETag of the %s", etag, how, prev)
		}
		seen[etag] = how
	}
	e1 := put(t, b, key, body, ownership.IfAbsent())
	note(e1, "create")
	e2 := put(t, b, key, body, ownership.Always())
	note(e2, "unconditional rewrite")
	e3 := put(t, b, key, body, ownership.IfMatch(e2))
	note(e3, "if-match rewrite")
	wantObject(t, b, key, body, e3)
	if err := b.Delete(t.Context(), key, ownership.Always()); err != nil {
		t.Fatalf("delete: %v", err)
	}
	e4 := put(t, b, key, body, ownership.IfAbsent())
	note(e4, "re-create after delete")
	wantObject(t, b, key, body, e4)
	// The same bytes under another key are another object too.
	note(put(t, b, "same-elsewhere", body, ownership.IfAbsent()), "same bytes under another key")
}

func testDelete(t *testing.T, b ownership.Bucket) {
	ctx := t.Context()
	const key = "del"
	e1 := put(t, b, key, []byte("v1"), ownership.IfAbsent())
	e2 := put(t, b, key, []byte("v2"), ownership.IfMatch(e1))

	err := b.Delete(ctx, key, ownership.IfMatch(e1))
	if !errors.Is(err, ownership.ErrPrecondition) {
		t.Errorf("delete with a stale ETag: %v, want ErrPrecondition", err)
	}
	wantOutcome(t, "delete with a stale ETag", err, ownership.Refused)
	wantObject(t, b, key, []byte("v2"), e2)

	err = b.Delete(ctx, key, ownership.IfAbsent())
	wantOutcome(t, "delete with if-none-match", err, ownership.Failed)
	wantObject(t, b, key, []byte("v2"), e2)

	if err := b.Delete(ctx, key, ownership.IfMatch(e2)); err != nil {
		t.Fatalf("delete with the current ETag: %v", err)
	}
	wantAbsent(t, b, key)

	err = b.Delete(ctx, key, ownership.IfMatch(e2))
	if !errors.Is(err, ownership.ErrPrecondition) {
		t.Errorf("if-match delete of a missing key: %v, want ErrPrecondition", err)
	}
	wantOutcome(t, "if-match delete of a missing key", err, ownership.Refused)

	if err := b.Delete(ctx, key, ownership.Always()); err != nil {
		t.Errorf("unconditional delete of a missing key: %v, want it to land", err)
	}
	if err := b.Delete(ctx, "del-never-written", ownership.Always()); err != nil {
		t.Errorf("unconditional delete of a never-written key: %v, want it to land", err)
	}

	put(t, b, key, []byte("v3"), ownership.Always())
	if err := b.Delete(ctx, key, ownership.Always()); err != nil {
		t.Fatalf("unconditional delete: %v", err)
	}
	wantAbsent(t, b, key)

	// Deleting one key leaves its neighbours, including those it is a
	// prefix of, alone.
	ea := put(t, b, "del/a", []byte("a"), ownership.Always())
	put(t, b, "del/a/b", []byte("ab"), ownership.Always())
	eax := put(t, b, "del/ax", []byte("ax"), ownership.Always())
	if err := b.Delete(ctx, "del/a/b", ownership.Always()); err != nil {
		t.Fatalf("delete del/a/b: %v", err)
	}
	wantAbsent(t, b, "del/a/b")
	wantObject(t, b, "del/a", []byte("a"), ea)
	wantObject(t, b, "del/ax", []byte("ax"), eax)
	if err := b.Delete(ctx, "del/a", ownership.IfMatch(ea)); err != nil {
		t.Fatalf("delete del/a: %v", err)
	}
	wantAbsent(t, b, "del/a")
	wantObject(t, b, "del/ax", []byte("ax"), eax)
	// A key whose parent "directory" was emptied by deletes can be written
	// again.
	put(t, b, "del/a/b/c", []byte("abc"), ownership.IfAbsent())
}
