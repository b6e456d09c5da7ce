package s3store_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/s3store"
)

// These tests cover, against the test server, what S3 promises of the
// contract subtests listed in serverDeviations.

// TestServerConditions: conditional puts and deletes, each refusal a
// refusal and nothing written.
func TestServerConditions(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	e1 := mustPut(t, s, "k", "v1", ownership.IfAbsent())
	e2 := mustPut(t, s, "k", "v2", ownership.IfMatch(e1))
	if e2 == e1 {
		t.Fatalf("new bytes kept ETag %s", e1)
	}
	for _, c := range []struct {
		what string
		key  string
		cond ownership.Condition
	}{
		{"create-only of an existing key", "k", ownership.IfAbsent()},
		{"if-match with a stale ETag", "k", ownership.IfMatch(e1)},
		{"if-match with an ETag no write returned", "k", ownership.IfMatch(`"no-such-etag"`)},
		{"if-match with the empty ETag", "k", ownership.IfMatch("")},
		{"if-match on a missing key", "missing", ownership.IfMatch(e2)},
	} {
		_, err := s.Put(ctx, c.key, []byte("loser"), c.cond)
		if !errors.Is(err, ownership.ErrPrecondition) {
			t.Errorf("%s: %v, want ErrPrecondition", c.what, err)
		}
	}
	wantObject(t, s, "k", "v2", e2)
	wantMissing(t, s, "missing")

	if err := s.Delete(ctx, "k", ownership.IfMatch(e1)); !errors.Is(err, ownership.ErrPrecondition) {
		t.Errorf("delete with a stale ETag: %v, want ErrPrecondition", err)
	}
	if err := s.Delete(ctx, "k", ownership.IfAbsent()); ownership.OutcomeOf(err) != ownership.Failed {
		t.Errorf("delete with if-none-match: %v, want a failure", err)
	}
	wantObject(t, s, "k", "v2", e2)
	if err := s.Delete(ctx, "k", ownership.IfMatch(e2)); err != nil {
		t.Fatalf("delete with the current ETag: %v", err)
	}
	wantMissing(t, s, "k")
	// S3 refuses this (404); versitygw lets it land. Either way nothing
	// exists afterwards and the outcome is definite.
	if err := s.Delete(ctx, "k", ownership.IfMatch(e2)); err != nil && !errors.Is(err, ownership.ErrPrecondition) {
		t.Errorf("if-match delete of a missing key: %v, want refused or landed", err)
	}
	if err := s.Delete(ctx, "k", ownership.Always()); err != nil {
		t.Errorf("unconditional delete of a missing key: %v", err)
	}
	// After a delete the key can be created again.
	e3 := mustPut(t, s, "k", "v3", ownership.IfAbsent())
	wantObject(t, s, "k", "v3", e3)
}

// TestServerList: paging in 1,000s, StartAfter, limits, byte prefixes, with
// keys the test server can hold.
func TestServerList(t *testing.T) {
	s := open(t)
	var keys []string
	for i := range 1050 {
		keys = append(keys, fmt.Sprintf("p/%04d", i))
	}
	keys = append(keys, "o", "p-", "q/x", "p0")
	etags := putAll(t, s, keys)
	slices.Sort(keys)

	for _, c := range []struct {
		prefix, after string
		limit         int
		want          []string // the first page
		truncated     bool
	}{
		{"", "", 0, keys[:1000], true},
		{"", keys[999], 0, keys[1000:], false},
		{"p/", "", 0, keys[2:1002], true},
		{"p/", "p/0999", 0, keys[1002:1052], false},
		{"p/", "", 7, keys[2:9], true},
		{"p/", "", 5000, keys[2:1002], true},
		{"p/00", "", 0, keys[2:102], false},
		{"p", "", 3, []string{"p-", "p/0000", "p/0001"}, true},
		{"p-", "", 0, []string{"p-"}, false},
		{"q/", "", 0, []string{"q/x"}, false},
		{"r", "", 0, nil, false},
	} {
		page, err := s.List(t.Context(), c.prefix, c.after, c.limit)
		if err != nil {
			t.Fatalf("list %q after %q: %v", c.prefix, c.after, err)
		}
		if got := keysOf(page.Entries); !slices.Equal(got, c.want) || page.Truncated != c.truncated {
			t.Errorf("list %q after %q limit %d: %d keys %s, truncated %v; want %d keys %s, truncated %v",
				c.prefix, c.after, c.limit, len(got), ends(got), page.Truncated, len(c.want), ends(c.want), c.truncated)
		}
		for _, e := range page.Entries {
			if e.ETag != etags[e.Key] || e.Size != int64(len(bodyOf(e.Key))) {
				t.Errorf("entry %+v, want ETag %s size %d", e, etags[e.Key], len(bodyOf(e.Key)))
			}
		}
	}
}

// TestServerKeys: keys shaped like wasmkeep's (escaped segments under fixed
// prefixes) and awkward ones the test server can hold round-trip, stay
// distinct, and list in byte order. (Keys with control characters are left
// out: versitygw ignores encoding-type=url and its XML listing replaces them
// with U+FFFD. TestListDecodesKeys covers servers that encode.)
func TestServerKeys(t *testing.T) {
	s := open(t)
	keys := []string{
		"nodes/node-1", "owners/Counter/a%2Fb", "owners/Counter/%2E%2E", "moves/Counter/~x_y-z",
		"plain", "with space", " leading", "trailing ", "ünïcödé", "日本語/キー", "emoji/🙂", "é", "e\u0301",
		"%", "%2F", "a%2Fb", "%25", "Case", "case", "CASE", "plus+sign", "equals=", "hash#frag", "semi;colon",
		"quote\"s", "apos's", "<tag>&amp;", "a:b", "a*b?c", "back\\slash", "braces{}[]",
		strings.Repeat("s", 255),
		"deep/" + strings.Repeat("seg/", 100) + "leaf",
	}
	etags := putAll(t, s, keys)
	for _, k := range keys {
		// A second create of each key must be refused: no two keys
		// share an object.
		if _, err := s.Put(t.Context(), k, []byte("again"), ownership.IfAbsent()); !errors.Is(err, ownership.ErrPrecondition) {
			t.Errorf("second create of %q: %v, want ErrPrecondition", k, err)
		}
		wantObject(t, s, k, bodyOf(k), etags[k])
	}
	sorted := slices.Sorted(slices.Values(keys))
	page, err := s.List(t.Context(), "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(page.Entries); !slices.Equal(got, sorted) {
		t.Errorf("list: %q\nwant %q", got, sorted)
	}
	for _, k := range keys {
		if err := s.Delete(t.Context(), k, ownership.IfMatch(etags[k])); err != nil {
			t.Errorf("delete %q: %v", k, err)
		}
	}
	if page, err := s.List(t.Context(), "", "", 0); err != nil || len(page.Entries) != 0 {
		t.Errorf("list after deleting all: %v %v", keysOf(page.Entries), err)
	}
}

func bodyOf(key string) string { return "body of " + key }

func mustPut(t *testing.T, s *s3store.Store, key, body string, cond ownership.Condition) ownership.ETag {
	t.Helper()
	etag, err := s.Put(t.Context(), key, []byte(body), cond)
	if err != nil {
		t.Fatalf("put %q (%s): %v", key, cond, err)
	}
	return etag
}

// putAll creates keys with bodyOf, a few at a time.
func putAll(t *testing.T, s *s3store.Store, keys []string) map[string]ownership.ETag {
	t.Helper()
	etags := make([]ownership.ETag, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				etags[i], errs[i] = s.Put(t.Context(), keys[i], []byte(bodyOf(keys[i])), ownership.IfAbsent())
			}
		})
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	m := map[string]ownership.ETag{}
	for i, k := range keys {
		if errs[i] != nil {
			t.Fatalf("put %q: %v", k, errs[i])
		}
		m[k] = etags[i]
	}
	return m
}

func wantObject(t *testing.T, s *s3store.Store, key, body string, etag ownership.ETag) {
	t.Helper()
	obj, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	if !bytes.Equal(obj.Body, []byte(body)) || obj.ETag != etag {
		t.Errorf("get %q: %q %s, want %q %s", key, obj.Body, obj.ETag, body, etag)
	}
}

func wantMissing(t *testing.T, s *s3store.Store, key string) {
	t.Helper()
	if _, err := s.Get(t.Context(), key); !errors.Is(err, ownership.ErrNotFound) {
		t.Errorf("get %q: %v, want ErrNotFound", key, err)
	}
}

func keysOf(entries []ownership.ListEntry) []string {
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	return keys
}

// ends abbreviates a long key list for a message.
func ends(keys []string) string {
	if len(keys) <= 4 {
		return fmt.Sprintf("%q", keys)
	}
	return fmt.Sprintf("[%q %q … %q %q]", keys[0], keys[1], keys[len(keys)-2], keys[len(keys)-1])
}
