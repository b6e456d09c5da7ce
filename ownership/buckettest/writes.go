package buckettest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

func testGetMissing(t *testing.T, b ownership.Bucket, _ Traits) {
	obj, err := b.Get(t.Context(), "missing")
	if !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("get of a missing key: (%s, %v), want ErrNotFound", abbrev(obj.Body), err)
	}
	wantOutcome(t, "get of a missing key", err, ownership.NotFound)
}

func testReadAfterWrite(t *testing.T, b ownership.Bucket, _ Traits) {
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

func testEmptyBody(t *testing.T, b ownership.Bucket, _ Traits) {
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
func testNoAliasing(t *testing.T, b ownership.Bucket, _ Traits) {
	body := []byte("original")
	etag := put(t, b, "alias", body, ownership.Always())
	copy(body, "XXXXXXXX")
	obj := get(t, b, "alias")
	copy(obj.Body, "YYYYYYYY")
	wantObject(t, b, "alias", []byte("original"), etag)
}

func testUnconditionalPut(t *testing.T, b ownership.Bucket, _ Traits) {
	const key = "always"
	e1 := put(t, b, key, []byte("first"), ownership.Always())
	wantObject(t, b, key, []byte("first"), e1)
	e2 := put(t, b, key, []byte("second"), ownership.Always())
	if e2 == e1 {
		t.Fatalf("overwrite returned the old ETag %q", e1)
	}
	wantObject(t, b, key, []byte("second"), e2)
}

func testCreateOnly(t *testing.T, b ownership.Bucket, _ Traits) {
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

func testCreateOnlyRace(t *testing.T, b ownership.Bucket, _ Traits) {
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

func testIfMatch(t *testing.T, b ownership.Bucket, tr Traits) {
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
	refused("if-match with a quoted ETag no write returned", key, ownership.IfMatch(`"no-such-etag"`))
	refused("if-match with the empty ETag", key, ownership.IfMatch(""))
	refused("if-match on a missing key", "match-missing", ownership.IfMatch(e2))
	wantObject(t, b, key, []byte("v2"), e2)
	wantAbsent(t, b, "match-missing")

	// A key deleted and created again with other bytes is a new version:
	// the ETag from before the delete must not match it.
	if err := b.Delete(t.Context(), key, ownership.IfMatch(e2)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	e3 := put(t, b, key, []byte("v3"), ownership.IfAbsent())
	refused("if-match with the ETag of a deleted incarnation", key, ownership.IfMatch(e2))
	wantObject(t, b, key, []byte("v3"), e3)

	// Created again with the same bytes, it is a new version only where
	// ETags name writes rather than bytes.
	if err := b.Delete(t.Context(), key, ownership.IfMatch(e3)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	e4 := put(t, b, key, []byte("v3"), ownership.IfAbsent())
	if !tr.ContentETags {
		if e4 == e3 {
			t.Errorf("re-created with the same bytes, the key got its deleted incarnation's ETag %q", e3)
		}
		refused("if-match with the ETag of a deleted incarnation of the same bytes", key, ownership.IfMatch(e3))
		wantObject(t, b, key, []byte("v3"), e4)
		return
	}
	// Content ETags: the deleted incarnation's ETag is back, and a writer
	// holding it matches. wasmkeep never meets this, since the bytes of
	// every record it writes include a nonce.
	if e4 != e3 {
		t.Fatalf("re-created with the same bytes, the key got ETag %q, not %q: the store does not derive ETags from content (declared ContentETags)", e4, e3)
	}
	e5 := put(t, b, key, []byte("v5"), ownership.IfMatch(e3))
	wantObject(t, b, key, []byte("v5"), e5)
}

func testIfMatchRace(t *testing.T, b ownership.Bucket, _ Traits) {
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

// testIdenticalBytes: what an ETag promises when bytes repeat. On every
// store, a writer holding a stale ETag is refused once the object holds
// other bytes, even if the bytes it held were written again in between, and
// distinct bytes get distinct ETags. Beyond that, a store either gives every
// write a new ETag, even for identical bytes, or (ContentETags) gives
// identical bytes equal ETags, everywhere and always. wasmkeep relies only
// on the first part: the bytes of every record it writes include a nonce.
func testIdenticalBytes(t *testing.T, b ownership.Bucket, tr Traits) {
	const key = "same"
	x := []byte("identical bytes")

	// The same bytes, written by each kind of write, after a delete, and
	// under another key.
	var etags []ownership.ETag
	var hows []string
	note := func(etag ownership.ETag, how string) {
		t.Helper()
		for i, prev := range etags {
			switch {
			case tr.ContentETags && etag != prev:
				t.Errorf("ETag %q of the %s differs from ETag %q of the %s, though the bytes are the same (declared ContentETags)",
					etag, how, prev, hows[i])
			case !tr.ContentETags && etag == prev:
				t.Errorf("ETag %q of the %s repeats the ETag of the %s", etag, how, hows[i])
			}
		}
		etags = append(etags, etag)
		hows = append(hows, how)
	}
	stale := put(t, b, key, x, ownership.IfAbsent())
	note(stale, "create")
	e := put(t, b, key, x, ownership.Always())
	note(e, "unconditional rewrite")
	e = put(t, b, key, x, ownership.IfMatch(e))
	note(e, "if-match rewrite")
	wantObject(t, b, key, x, e)
	if !tr.ContentETags {
		// The bytes are the same but the version is not.
		refusedPut(t, b, "if-match with the ETag of an earlier write of the same bytes", key, stale)
	}
	if err := b.Delete(t.Context(), key, ownership.Always()); err != nil {
		t.Fatalf("delete: %v", err)
	}
	e = put(t, b, key, x, ownership.IfAbsent())
	note(e, "re-create after delete")
	wantObject(t, b, key, x, e)
	note(put(t, b, "same-elsewhere", x, ownership.IfAbsent()), "same bytes under another key")

	// A writer holds stale, the ETag of x. The object moves on to other
	// bytes: the writer is refused, whatever the store's ETags.
	y := []byte("other bytes")
	ey := put(t, b, key, y, ownership.IfMatch(e))
	if ey == stale {
		t.Fatalf("other bytes got ETag %q, the ETag of %s", ey, abbrev(x))
	}
	refusedPut(t, b, "if-match with the ETag of earlier bytes", key, stale)
	refusedDelete(t, b, "if-match delete with the ETag of earlier bytes", key, stale)
	wantObject(t, b, key, y, ey)
	// Deleted and created again with yet other bytes: still refused.
	if err := b.Delete(t.Context(), key, ownership.IfMatch(ey)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	z := []byte("yet other bytes")
	ez := put(t, b, key, z, ownership.IfAbsent())
	refusedPut(t, b, "if-match with the ETag of bytes before a delete", key, stale)
	refusedPut(t, b, "if-match with the ETag of the deleted incarnation", key, ey)
	wantObject(t, b, key, z, ez)

	// The first bytes come round again.
	e = put(t, b, key, x, ownership.IfMatch(ez))
	if !tr.ContentETags {
		if e == stale {
			t.Errorf("the bytes written again got the ETag %q of their first write", stale)
		}
		refusedPut(t, b, "if-match with the ETag of the same bytes two versions ago", key, stale)
		wantObject(t, b, key, x, e)
	} else {
		// The ETag names the bytes, so the stale writer matches: the case
		// the nonce in every wasmkeep record rules out.
		if e != stale {
			t.Errorf("the bytes written again got ETag %q, not %q (declared ContentETags)", e, stale)
		}
		e = put(t, b, key, []byte("stale writer"), ownership.IfMatch(stale))
		wantObject(t, b, key, []byte("stale writer"), e)
	}

	// Distinct bytes get distinct ETags, on every store.
	bodies := [][]byte{
		nil, []byte(" "), []byte("\x00"), []byte("a"), []byte("b"), []byte("ab"), []byte("ba"),
		x, y, z, append(slices.Clone(x), 0), randomBytes(4096), randomBytes(4097),
	}
	byETag := map[ownership.ETag]int{}
	for i, body := range bodies {
		etag := put(t, b, fmt.Sprintf("distinct/%02d", i), body, ownership.IfAbsent())
		if j, ok := byETag[etag]; ok {
			t.Errorf("bodies %s and %s got the same ETag %q", abbrev(bodies[j]), abbrev(body), etag)
		}
		byETag[etag] = i
	}
}

// refusedPut fails the test unless an if-match put of key with etag is
// refused.
func refusedPut(t *testing.T, b ownership.Bucket, what, key string, etag ownership.ETag) {
	t.Helper()
	_, err := b.Put(t.Context(), key, []byte("loser"), ownership.IfMatch(etag))
	if !errors.Is(err, ownership.ErrPrecondition) {
		t.Errorf("%s: %v, want ErrPrecondition", what, err)
	}
	wantOutcome(t, what, err, ownership.Refused)
}

// refusedDelete fails the test unless an if-match delete of key with etag is
// refused.
func refusedDelete(t *testing.T, b ownership.Bucket, what, key string, etag ownership.ETag) {
	t.Helper()
	err := b.Delete(t.Context(), key, ownership.IfMatch(etag))
	if !errors.Is(err, ownership.ErrPrecondition) {
		t.Errorf("%s: %v, want ErrPrecondition", what, err)
	}
	wantOutcome(t, what, err, ownership.Refused)
}

func testDelete(t *testing.T, b ownership.Bucket, tr Traits) {
	ctx := t.Context()
	const key = "del"
	e1 := put(t, b, key, []byte("v1"), ownership.IfAbsent())
	e2 := put(t, b, key, []byte("v2"), ownership.IfMatch(e1))

	refusedDelete(t, b, "delete with a stale ETag", key, e1)
	refusedDelete(t, b, "delete with an ETag no write returned", key, "no-such-etag")
	wantObject(t, b, key, []byte("v2"), e2)

	err := b.Delete(ctx, key, ownership.IfAbsent())
	wantOutcome(t, "delete with if-none-match", err, ownership.Failed)
	wantObject(t, b, key, []byte("v2"), e2)

	if err := b.Delete(ctx, key, ownership.IfMatch(e2)); err != nil {
		t.Fatalf("delete with the current ETag: %v", err)
	}
	wantAbsent(t, b, key)

	// An if-match delete of a missing key: refused, as S3 does, or landed
	// where the store declares so. Either way nothing is there afterwards,
	// and the outcome is definite.
	missing := func(what, key string, etag ownership.ETag) {
		t.Helper()
		err := b.Delete(ctx, key, ownership.IfMatch(etag))
		if tr.IfMatchDeleteMissingLands {
			if err != nil {
				t.Errorf("%s: %v, want it to land (declared IfMatchDeleteMissingLands)", what, err)
			}
		} else {
			if !errors.Is(err, ownership.ErrPrecondition) {
				t.Errorf("%s: %v, want ErrPrecondition", what, err)
			}
			wantOutcome(t, what, err, ownership.Refused)
		}
		wantAbsent(t, b, key)
	}
	missing("if-match delete of a deleted key", key, e2)
	missing("if-match delete of a never-written key", "del-never-written", e2)

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
	// After a delete the key can be created again.
	e4 := put(t, b, key, []byte("v4"), ownership.IfAbsent())
	wantObject(t, b, key, []byte("v4"), e4)

	// Deleting one key leaves its neighbours alone, including keys it is a
	// byte prefix of; where keys may be directories of others, also keys
	// below it, and it is left alone when they are deleted.
	const target = "nb/a"
	always := []string{"nb/a-b", "nb/a.b", "nb/ab", "nb/b", "nb/c/a"}
	checkPathKeys(t, append([]string{target}, always...))
	neighbours := keysFor(t, tr, always, []string{"nb/a/", "nb/a/b", "nb/a/b/c"})
	slices.Sort(neighbours)
	etags := map[string]ownership.ETag{}
	for _, k := range neighbours {
		etags[k] = put(t, b, k, []byte("v:"+k), ownership.IfAbsent())
	}
	ea := put(t, b, target, []byte("a"), ownership.IfAbsent())
	if !tr.PathKeys {
		if err := b.Delete(ctx, "nb/a/b", ownership.IfMatch(etags["nb/a/b"])); err != nil {
			t.Fatalf("delete nb/a/b: %v", err)
		}
		wantAbsent(t, b, "nb/a/b")
		wantObject(t, b, target, []byte("a"), ea)
		delete(etags, "nb/a/b")
		neighbours = slices.DeleteFunc(neighbours, func(k string) bool { return k == "nb/a/b" })
	}
	if err := b.Delete(ctx, target, ownership.IfMatch(ea)); err != nil {
		t.Fatalf("delete %s: %v", target, err)
	}
	wantAbsent(t, b, target)
	for _, k := range neighbours {
		wantObject(t, b, k, []byte("v:"+k), etags[k])
	}
	if got := keysOf(listAll(t, b, "nb/", "", 0)); !slices.Equal(got, neighbours) {
		t.Errorf("list nb/ after the deletes: %q, want %q", got, neighbours)
	}

	// A key whose directory was emptied by deletes can be written again;
	// where keys may be directories of others, so can one below two keys
	// that were objects and one that still is.
	emptied := []string{"nb/d/x", "nb/d/y"}
	for _, k := range emptied {
		put(t, b, k, []byte("v:"+k), ownership.IfAbsent())
	}
	for _, k := range emptied {
		if err := b.Delete(ctx, k, ownership.Always()); err != nil {
			t.Fatalf("delete %s: %v", k, err)
		}
	}
	if got := keysOf(listAll(t, b, "nb/d", "", 0)); len(got) != 0 {
		t.Errorf("list nb/d after deleting every key under it: %q", got)
	}
	put(t, b, "nb/d/x", []byte("again"), ownership.IfAbsent())
	if !tr.PathKeys {
		put(t, b, "nb/a/b/c/d", []byte("abcd"), ownership.IfAbsent())
		wantAbsent(t, b, "nb/a/b")
	}
}
