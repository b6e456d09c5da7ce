package buckettest

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// randomBytes returns n bytes from a fixed seed: incompressible, and the
// same on every run.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{'w', 'a', 's', 'm', 'k', 'e', 'e', 'p'})
	_, _ = r.Read(b)
	return b
}

func testLargeObject(t *testing.T, b ownership.Bucket, _ Traits) {
	body := randomBytes(8 << 20)
	etag := put(t, b, "large", body, ownership.IfAbsent())
	obj := get(t, b, "large")
	if !bytes.Equal(obj.Body, body) {
		t.Fatalf("8 MiB object: read back %d bytes, differing from what was written at byte %d",
			len(obj.Body), firstByteDiff(obj.Body, body))
	}
	if obj.ETag != etag {
		t.Fatalf("8 MiB object: ETag %q, put returned %q", obj.ETag, etag)
	}
	page, err := b.List(t.Context(), "large", "", 0)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(page.Entries) != 1 || page.Entries[0].Size != int64(len(body)) || page.Entries[0].ETag != etag {
		t.Fatalf("list: %+v, want one entry of %d bytes with ETag %q", page.Entries, len(body), etag)
	}
}

func firstByteDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// awkwardKeys are keys a store that maps keys onto something else (file
// names, URLs) could get wrong: path syntax, escapes, case, unicode, and
// lengths up to the limit. All are distinct. always keep the PathKeys rules;
// extra break them (dot and empty segments, a trailing '/', a segment over
// 255 bytes, a key that is the directory of another) and are written only to
// stores without PathKeys.
func awkwardKeys() (always, extra []string) {
	// seg255 is a segment of exactly 255 bytes; long keys made of such
	// segments stay under 1,000 bytes, leaving room for a store's own key
	// prefix within MaxKeyLen.
	seg255 := strings.Repeat("s", 255)
	always = []string{
		"plain",
		"with space", "two  spaces", " leading space", "trailing space ", "space dir/ both ends ",
		"ünïcödé", "日本語/キー", "emoji/🙂", "é", "e\u0301", // composed and decomposed é
		"...", "...x/y", "x.../..y", ".hidden", ".hidden-dir/f", "a/b", "a/b.", "a/.b",
		"%", "%2F", "a%2Fb", "%2e%2e", "%25", "a%b",
		"Case", "case", "CASE", "cAsE",
		"-dash", "_under", "~tilde", "back\\slash", "quote\"s", "apos's",
		"a:b", "a*b?c", "<tag>&amp;", "plus+sign", "equals=", "hash#frag", "semi;colon",
		"braces{}[]", "pipe|", "comma,", "at@", "dollar$", "caret^", "backtick`",
		// Keys shaped like wasmkeep's: escaped segments under fixed prefixes.
		"nodes/node-1", "owners/Counter/a%2Fb", "owners/Counter/%2E%2E", "moves/Counter/~x_y-z",
		// Long keys, no segment over the file name limit.
		seg255,
		strings.Repeat("é", 127) + "/" + strings.Repeat("ü", 127),          // segments of 254 bytes of two-byte runes
		"long/" + strings.Repeat(seg255+"/", 3) + strings.Repeat("t", 227), // 1,000 bytes
		strings.Repeat("seg/", 249) + "end",                                // 999 bytes, 250 segments
		// Segments at common split widths.
		strings.Repeat("y", 64) + "/tail",
		strings.Repeat("y", 64) + "-",
		strings.Repeat("y", 65),
	}
	extra = []string{
		".", "..", "./x", "../x", "x/.", "x/..", "a/./b", "a/../b",
		"a//b", "a/b/", "trailing/", "/leading", "/", "//", "///x",
		"plain/under-a-key", "a/b/c",
		"k/" + strings.Repeat("x", 998),          // 1,000 bytes
		strings.Repeat("é", 500),                 // 1,000 bytes, one segment
		strings.Repeat("seg/", 250),              // 1,000 bytes, 250 segments, trailing '/'
		strings.Repeat("y", 64),                  // the directory of a key above
		strings.Repeat("z", ownership.MaxKeyLen), // exactly the limit
		strings.Repeat("/", ownership.MaxKeyLen), //
	}
	return always, extra
}

// testKeys: awkward keys are all distinct objects, round-trip, list in byte
// order, and can be deleted.
func testKeys(t *testing.T, b ownership.Bucket, tr Traits) {
	always, extra := awkwardKeys()
	keys := keysFor(t, tr, always, extra)
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("test bug: key %q listed twice", k)
		}
		seen[k] = true
		if err := ownership.ValidateKey(k); err != nil {
			t.Fatalf("test bug: %v", err)
		}
	}
	body := func(k string) []byte { return []byte("body of " + k) }
	etags := map[string]ownership.ETag{}
	for _, k := range keys {
		// Create-only: a store that mapped two keys onto one object would
		// refuse the second.
		etag, err := b.Put(t.Context(), k, body(k), ownership.IfAbsent())
		if err != nil {
			t.Fatalf("put %q: %v", abbrevKey(k), err)
		}
		etags[k] = etag
	}
	for _, k := range keys {
		obj, err := b.Get(t.Context(), k)
		if err != nil {
			t.Fatalf("get %q: %v", abbrevKey(k), err)
		}
		if !bytes.Equal(obj.Body, body(k)) || obj.ETag != etags[k] {
			t.Errorf("get %q: (%s, %q), want (%s, %q)", abbrevKey(k), abbrev(obj.Body), obj.ETag, abbrev(body(k)), etags[k])
		}
	}

	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	got := listAll(t, b, "", "", 0)
	if !slices.Equal(keysOf(got), sorted) {
		g := keysOf(got)
		i := firstDiff(g, sorted)
		t.Fatalf("list: %d keys, want %d; first difference at %d: got %q, want %q",
			len(g), len(sorted), i, at(g, i), at(sorted, i))
	}
	for _, e := range got {
		if e.ETag != etags[e.Key] || e.Size != int64(len(body(e.Key))) {
			t.Errorf("list: entry %q has ETag %q size %d, want %q %d", abbrevKey(e.Key), e.ETag, e.Size, etags[e.Key], len(body(e.Key)))
		}
	}
	// Each key, as a prefix, lists itself first and only keys it prefixes.
	for _, k := range keys {
		want := withPrefix(sorted, k)
		if got := keysOf(listAll(t, b, k, "", 0)); !slices.Equal(got, want) {
			t.Errorf("list prefix %q: %d keys, want %d", abbrevKey(k), len(got), len(want))
		}
	}

	for _, k := range keys {
		if err := b.Delete(t.Context(), k, ownership.IfMatch(etags[k])); err != nil {
			t.Fatalf("delete %q: %v", abbrevKey(k), err)
		}
	}
	if rest := listAll(t, b, "", "", 0); len(rest) != 0 {
		t.Fatalf("list after deleting every key: %d keys left, first %q", len(rest), abbrevKey(rest[0].Key))
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return abbrevKey(s[i])
	}
	return "(end)"
}

func abbrevKey(k string) string {
	if len(k) <= 80 {
		return k
	}
	return k[:40] + "…" + k[len(k)-20:]
}

// testInvalidKeys: keys ValidateKey rejects are refused with ErrInvalidKey by
// every call, and nothing is written.
func testInvalidKeys(t *testing.T, b ownership.Bucket, _ Traits) {
	ctx := t.Context()
	for _, key := range []string{
		"",
		strings.Repeat("k", ownership.MaxKeyLen+1),
		"bad\xffutf8",
		"\xc3", // a truncated two-byte sequence
	} {
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, ownership.ErrInvalidKey) {
				t.Errorf("%s of invalid key %q: %v, want ErrInvalidKey", what, abbrevKey(key), err)
			}
			wantOutcome(t, what+" of an invalid key", err, ownership.Failed)
		}
		for _, cond := range []ownership.Condition{ownership.Always(), ownership.IfAbsent(), ownership.IfMatch("x")} {
			_, err := b.Put(ctx, key, []byte("x"), cond)
			check("put ("+cond.String()+")", err)
		}
		_, err := b.Get(ctx, key)
		check("get", err)
		check("delete", b.Delete(ctx, key, ownership.Always()))
		check("if-match delete", b.Delete(ctx, key, ownership.IfMatch("x")))
	}
	if all := listAll(t, b, "", "", 0); len(all) != 0 {
		t.Fatalf("refused writes left %d keys behind, first %q", len(all), abbrevKey(all[0].Key))
	}
}
