package buckettest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// putAll writes body(key) under every key, create-only, from a bounded pool
// of workers, and returns the ETag of each key.
func putAll(t *testing.T, b ownership.Bucket, keys []string, body func(string) []byte) map[string]ownership.ETag {
	t.Helper()
	const workers = 16
	jobs := make(chan string)
	var mu sync.Mutex
	etags := make(map[string]ownership.ETag, len(keys))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range jobs {
				etag, err := b.Put(t.Context(), k, body(k), ownership.IfAbsent())
				if err != nil {
					t.Errorf("put %q: %v", k, err)
					continue
				}
				mu.Lock()
				etags[k] = etag
				mu.Unlock()
			}
		})
	}
	for _, k := range keys {
		jobs <- k
	}
	close(jobs)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return etags
}

// listAll pages through every key with prefix after startAfter, limit keys
// a page, checks the shape of every page, and returns all entries.
func listAll(t *testing.T, b ownership.Bucket, prefix, startAfter string, limit int) []ownership.ListEntry {
	t.Helper()
	pageMax := limit
	if pageMax <= 0 || pageMax > ownership.DefaultListLimit {
		pageMax = ownership.DefaultListLimit
	}
	var all []ownership.ListEntry
	after := startAfter
	for pages := 0; ; pages++ {
		if pages > 100_000 {
			t.Fatalf("list prefix %q: no end after %d pages", prefix, pages)
		}
		page, err := b.List(t.Context(), prefix, after, limit)
		if err != nil {
			t.Fatalf("list prefix %q after %q limit %d: %v", prefix, after, limit, err)
		}
		if len(page.Entries) > pageMax {
			t.Fatalf("list prefix %q after %q limit %d: %d entries", prefix, after, limit, len(page.Entries))
		}
		if page.Truncated && len(page.Entries) == 0 {
			t.Fatalf("list prefix %q after %q: empty page marked truncated", prefix, after)
		}
		for _, e := range page.Entries {
			if !strings.HasPrefix(e.Key, prefix) {
				t.Fatalf("list prefix %q: key %q lacks the prefix", prefix, e.Key)
			}
			if e.Key <= after {
				t.Fatalf("list prefix %q after %q: key %q out of order", prefix, after, e.Key)
			}
			after = e.Key
		}
		all = append(all, page.Entries...)
		if !page.Truncated {
			return all
		}
	}
}

func keysOf(entries []ownership.ListEntry) []string {
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = e.Key
	}
	return keys
}

func withPrefix(sorted []string, prefix string) []string {
	var out []string
	for _, k := range sorted {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// testListPrefix: a prefix is a byte prefix of the key, not a directory;
// "a/b" lists "a/b", "a/b-c" and "a/bc", not "a-b". The keys interleave
// files and directories in byte order ('-' < '.' < '/' < '0'), so a store
// that walks a tree must still list "a/c-d" before "a/c/d". Keys that break
// the PathKeys rules ("a" beside "a/b", "a/", "a/b/") are written only to
// stores without PathKeys; every expectation names the keys it would list
// if all were written and is cut down to those that were.
func testListPrefix(t *testing.T, b ownership.Bucket, tr Traits) {
	keys := keysFor(t, tr,
		[]string{"a-b", "a.b", "a/b", "a/b-c", "a/bc", "a/c-d", "a/c/d", "a/c/e", "a/c0", "a0", "ab", "b/a", "ba"},
		[]string{"a", "a/", "a/b/", "a/b/c", "b"})
	etags := map[string]ownership.ETag{}
	for _, k := range keys {
		etags[k] = put(t, b, k, []byte("v:"+k), ownership.IfAbsent())
	}
	slices.Sort(keys)
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", keys},
		{"a", []string{"a", "a-b", "a.b", "a/", "a/b", "a/b-c", "a/b/", "a/b/c", "a/bc", "a/c-d", "a/c/d", "a/c/e", "a/c0", "a0", "ab"}},
		{"a/", []string{"a/", "a/b", "a/b-c", "a/b/", "a/b/c", "a/bc", "a/c-d", "a/c/d", "a/c/e", "a/c0"}},
		{"a/b", []string{"a/b", "a/b-c", "a/b/", "a/b/c", "a/bc"}},
		{"a/b/", []string{"a/b/", "a/b/c"}},
		{"a/bc", []string{"a/bc"}},
		{"a/c", []string{"a/c-d", "a/c/d", "a/c/e", "a/c0"}},
		{"a/c/", []string{"a/c/d", "a/c/e"}},
		{"a-", []string{"a-b"}},
		{"a.", []string{"a.b"}},
		{"a/b/c/", nil},
		{"a/c/d/", nil},
		{"a/d", nil},
		{"c", nil},
		{"b", []string{"b", "b/a", "ba"}},
		{"b/", []string{"b/a"}},
	} {
		want := onlyPresent(tc.want, keys)
		for _, limit := range []int{0, 1, 2} {
			got := listAll(t, b, tc.prefix, "", limit)
			if !slices.Equal(keysOf(got), want) {
				t.Errorf("list prefix %q limit %d: %q, want %q", tc.prefix, limit, keysOf(got), want)
			}
			for _, e := range got {
				if e.ETag != etags[e.Key] || e.Size != int64(len("v:"+e.Key)) {
					t.Errorf("list prefix %q: entry %+v, want ETag %q size %d", tc.prefix, e, etags[e.Key], len("v:"+e.Key))
				}
			}
		}
	}
	// startAfter need not be a key, nor share the prefix.
	for _, tc := range []struct {
		prefix, after string
		want          []string
	}{
		{"a/", "a/b", []string{"a/b-c", "a/b/", "a/b/c", "a/bc", "a/c-d", "a/c/d", "a/c/e", "a/c0"}},
		{"a/", "a/b/", []string{"a/b/c", "a/bc", "a/c-d", "a/c/d", "a/c/e", "a/c0"}},
		{"a/", "a/b0", []string{"a/bc", "a/c-d", "a/c/d", "a/c/e", "a/c0"}},
		{"a/", "a", []string{"a/", "a/b", "a/b-c", "a/b/", "a/b/c", "a/bc", "a/c-d", "a/c/d", "a/c/e", "a/c0"}},
		{"a/", "a/c", []string{"a/c-d", "a/c/d", "a/c/e", "a/c0"}},
		{"a/", "a/c-d", []string{"a/c/d", "a/c/e", "a/c0"}},
		{"a/", "a/c/", []string{"a/c/d", "a/c/e", "a/c0"}},
		{"a/", "a/c/e", []string{"a/c0"}},
		{"a/", "a/c0", nil},
		{"a/", "b", nil},
		{"", "a/c0", []string{"a0", "ab", "b", "b/a", "ba"}},
	} {
		want := onlyPresent(tc.want, keys)
		got := keysOf(listAll(t, b, tc.prefix, tc.after, 0))
		if !slices.Equal(got, want) {
			t.Errorf("list prefix %q after %q: %q, want %q", tc.prefix, tc.after, got, want)
		}
	}
}

// testListPaging writes well over a page of keys under one prefix, with
// neighbours just outside it, and checks every way of paging through them.
// Every 50th number is also a directory ("list/p/0050/sub"); where a key
// may be the directory of another, the number is a key as well, and
// elsewhere "list/p/0050.x" stands in for it, so that the count is the same
// either way. The neighbour "list/p", the directory of the keys, is written
// only where a key may be a directory.
func testListPaging(t *testing.T, b ownership.Bucket, tr Traits) {
	const prefix = "list/p/"
	var always, extra []string
	for i := range 1100 {
		if i%50 != 0 {
			always = append(always, fmt.Sprintf("%s%04d", prefix, i))
			continue
		}
		// '-' sorts before '.', then '/', then digits: these interleave
		// with the plain keys in byte order, and "0050-x" and "0050.x"
		// sort before the keys in directory "0050".
		always = append(always, fmt.Sprintf("%s%04d/sub", prefix, i), fmt.Sprintf("%s%04d-x", prefix, i))
		if tr.PathKeys {
			always = append(always, fmt.Sprintf("%s%04d.x", prefix, i))
		} else {
			extra = append(extra, fmt.Sprintf("%s%04d", prefix, i))
		}
	}
	always = append(always, "list/p-", "list/p.x", "list/p0", "list/o/1", "list/q")
	extra = append(extra, "list/p")
	all := keysFor(t, tr, always, extra)
	body := func(k string) []byte { return []byte("body of " + k) }
	etags := putAll(t, b, all, body)

	slices.Sort(all)
	want := withPrefix(all, prefix)
	if len(want) != 1144 {
		t.Fatalf("test bug: %d keys under the prefix", len(want))
	}
	checkEntries := func(what string, got []ownership.ListEntry, want []string) {
		t.Helper()
		if !slices.Equal(keysOf(got), want) {
			t.Fatalf("%s: %d keys, want %d; first difference at %d", what, len(got), len(want), firstDiff(keysOf(got), want))
		}
		for _, e := range got {
			if e.ETag != etags[e.Key] {
				t.Fatalf("%s: %q listed with ETag %q, put returned %q", what, e.Key, e.ETag, etags[e.Key])
			}
			if e.Size != int64(len(body(e.Key))) {
				t.Fatalf("%s: %q listed with size %d, want %d", what, e.Key, e.Size, len(body(e.Key)))
			}
		}
	}
	onePage := func(after string, limit int) ownership.ListPage {
		t.Helper()
		page, err := b.List(t.Context(), prefix, after, limit)
		if err != nil {
			t.Fatalf("list after %q limit %d: %v", after, limit, err)
		}
		return page
	}

	// The default page is 1,000 keys, and so is any larger limit (S3's cap).
	for _, limit := range []int{0, -1, ownership.DefaultListLimit, 5000} {
		p1 := onePage("", limit)
		if len(p1.Entries) != 1000 || !p1.Truncated {
			t.Fatalf("first page, limit %d: %d entries, truncated %v; want 1000, true", limit, len(p1.Entries), p1.Truncated)
		}
		checkEntries(fmt.Sprintf("first page, limit %d", limit), p1.Entries, want[:1000])
		p2 := onePage(p1.Entries[999].Key, limit)
		if len(p2.Entries) != 144 || p2.Truncated {
			t.Fatalf("second page, limit %d: %d entries, truncated %v; want 144, false", limit, len(p2.Entries), p2.Truncated)
		}
		checkEntries(fmt.Sprintf("second page, limit %d", limit), p2.Entries, want[1000:])
	}

	// A page that ends exactly at the last key is not truncated.
	exact := onePage(want[len(want)-1001], 1000)
	if len(exact.Entries) != 1000 || exact.Truncated {
		t.Fatalf("page of exactly the last 1000 keys: %d entries, truncated %v", len(exact.Entries), exact.Truncated)
	}
	last := onePage(want[len(want)-2], 1)
	if len(last.Entries) != 1 || last.Truncated {
		t.Fatalf("page of the last key alone: %d entries, truncated %v", len(last.Entries), last.Truncated)
	}
	end := onePage(want[len(want)-1], 0)
	if len(end.Entries) != 0 || end.Truncated {
		t.Fatalf("page after the last key: %d entries, truncated %v", len(end.Entries), end.Truncated)
	}

	// Paging with small limits: every page full until the last.
	for _, limit := range []int{1, 97, 500} {
		var got []ownership.ListEntry
		after := ""
		for {
			page := onePage(after, limit)
			remaining := len(want) - len(got)
			if n := min(limit, remaining); len(page.Entries) != n || page.Truncated != (remaining > limit) {
				t.Fatalf("limit %d after %q: %d entries, truncated %v; want %d, %v",
					limit, after, len(page.Entries), page.Truncated, n, remaining > limit)
			}
			got = append(got, page.Entries...)
			if !page.Truncated {
				break
			}
			after = page.Entries[len(page.Entries)-1].Key
		}
		checkEntries(fmt.Sprintf("paging by %d", limit), got, want)
	}

	// startAfter that is not a key.
	for _, after := range []string{
		"list/p/0500~", "list/p/0500", "list/p/0500-", "list/p/0500-x", "list/p/0500.x",
		"list/p/0500/", "list/p/0500/sub", "list/p/", "list/", "list/p/9", "m",
	} {
		i := sort.SearchStrings(want, after)
		if i < len(want) && want[i] == after {
			i++
		}
		checkEntries(fmt.Sprintf("list after %q", after), listAll(t, b, prefix, after, 0), want[i:])
	}

	// The whole bucket, neighbours included.
	checkEntries("list of the whole bucket", listAll(t, b, "", "", 0), all)
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
