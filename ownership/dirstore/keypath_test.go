package dirstore

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyPath(t *testing.T) {
	x64 := strings.Repeat("x", 64)
	for _, tc := range []struct{ key, path string }{
		{"a", "oa"},
		{"a/b", "da/ob"},
		{"a/", "da/o"},
		{"/", "d/o"},
		{"/a", "d/oa"},
		{"a//b", "da/d/ob"},
		{".", "o."},
		{"..", "o.."},
		{"../x", "d../ox"},
		{"./x", "d./ox"},
		{"A", "o%41"},
		{"a b", "oa%20b"},
		{"%", "o%25"},
		{"é", "o%C3%A9"},
		{"\x00", "o%00"},
		{"a-b_c.d", "oa-b_c.d"},
		{x64, "c" + x64 + "/o"},
		{x64 + "/", "c" + x64 + "/d/o"},
		{x64 + "/y", "c" + x64 + "/d/oy"},
		{x64 + "y", "c" + x64 + "/oy"},
		{x64 + x64, "c" + x64 + "/c" + x64 + "/o"},
		{strings.Repeat("y", 63), "o" + strings.Repeat("y", 63)},
	} {
		if got := keyPath(tc.key); got != tc.path {
			t.Errorf("keyPath(%q) = %q, want %q", tc.key, got, tc.path)
		}
		if got, ok := decodePath(tc.path); !ok || got != tc.key {
			t.Errorf("decodePath(%q) = %q, %v; want %q", tc.path, got, ok, tc.key)
		}
	}
}

func TestPrefixDir(t *testing.T) {
	x64 := strings.Repeat("x", 64)
	for _, tc := range []struct{ prefix, dir, base string }{
		{"", "", ""},
		{"a", "", ""},
		{"a/", "da", "a/"},
		{"a/b", "da", "a/"},
		{"a/b/", "da/db", "a/b/"},
		{"/", "d", "/"},
		{x64, "c" + x64, x64},
		{x64 + "/z", "c" + x64 + "/d", x64 + "/"},
		{"A/é", "d%41", "A/"},
	} {
		dir, base := prefixDir(tc.prefix)
		if dir != tc.dir || base != tc.base {
			t.Errorf("prefixDir(%q) = %q, %q; want %q, %q", tc.prefix, dir, base, tc.dir, tc.base)
		}
	}
}

// TestParseComponentRejects: only names keyPath makes are accepted, so a
// stray file is never mistaken for an object and no two names decode to one
// key.
func TestParseComponentRejects(t *testing.T) {
	for _, name := range []string{
		"", "x", "oA", "o%41%", "o%4", "o%4a", "o%61", "o%2F", "o%2f", "o ", "o/", "O", "D",
		"c" + strings.Repeat("x", 63), "c" + strings.Repeat("x", 65), "o" + strings.Repeat("x", 64),
		"d" + strings.Repeat("x", 64), "o%G0", ".", "..",
	} {
		if kind, seg, ok := parseComponent(name); ok {
			t.Errorf("parseComponent(%q) = %c %q, want it rejected", name, kind, seg)
		}
	}
	for _, p := range []string{"da", "oa/ob", "ca/ob", "da/", "/oa", "da//oa"} {
		if key, ok := decodePath(p); ok {
			t.Errorf("decodePath(%q) = %q, want it rejected", p, key)
		}
	}
}

// checkKeyPath asserts everything the mapping promises for one key.
func checkKeyPath(t *testing.T, key string) string {
	t.Helper()
	p := keyPath(key)
	if !filepath.IsLocal(p) || filepath.Clean(p) != p {
		t.Fatalf("keyPath(%q) = %q, not a clean local path", key, p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." || len(c) > 255 {
			t.Fatalf("keyPath(%q) has component %q", key, c)
		}
		for i := 0; i < len(c); i++ {
			b := c[i]
			if !literal(b) && b != '%' && !('A' <= b && b <= 'F') {
				t.Fatalf("keyPath(%q) has byte %q in component %q", key, b, c)
			}
		}
	}
	if bound := 3*len(key) + 2*(len(key)/chunkLen) + 2; len(p) > bound {
		t.Fatalf("keyPath(%q) is %d bytes, over the bound %d", key, len(p), bound)
	}
	if got, ok := decodePath(p); !ok || got != key {
		t.Fatalf("decodePath(keyPath(%q)) = %q, %v", key, got, ok)
	}
	return p
}

// comparePaths orders two object paths the way List walks them: at the
// first component where they differ, by sortKey.
func comparePaths(t *testing.T, p1, p2 string) int {
	c1, c2 := strings.Split(p1, "/"), strings.Split(p2, "/")
	for i := range min(len(c1), len(c2)) {
		if c1[i] == c2[i] {
			continue
		}
		k1, s1, _ := parseComponent(c1[i])
		k2, s2, _ := parseComponent(c2[i])
		return strings.Compare(sortKey(k1, s1), sortKey(k2, s2))
	}
	t.Fatalf("paths %q and %q: one is a prefix of the other", p1, p2)
	return 0
}

func FuzzKeyPath(f *testing.F) {
	x64 := strings.Repeat("x", 64)
	for _, pair := range [][2]string{
		{"a", "b"}, {"a/b", "a-b"}, {"a/b", "a/bc"}, {"a", "a/"}, {"..", "."}, {"a//b", "a/b"},
		{"/", "//"}, {"A", "a"}, {"é", "e\u0301"}, {"\x00", "%00"}, {"%41", "A"},
		{x64, x64 + "/"}, {x64 + "/y", x64 + "-y"}, {x64 + "0", x64 + "/"}, {x64[:63] + "/", x64},
		{x64 + "é", x64 + "/é"}, {strings.Repeat("/", 1024), strings.Repeat("é", 512)},
		{"bad\xff", "bad\xfe"},
	} {
		f.Add(pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		if k1 == "" || k2 == "" {
			return // not keys: ValidateKey refuses them before any path is made
		}
		p1, p2 := checkKeyPath(t, k1), checkKeyPath(t, k2)
		if k1 == k2 {
			return
		}
		if strings.EqualFold(p1, p2) {
			t.Fatalf("keys %q and %q map to paths equal under case folding: %q, %q", k1, k2, p1, p2)
		}
		want := strings.Compare(k1, k2)
		if got := comparePaths(t, p1, p2); got != want {
			t.Fatalf("keys %q, %q compare %d, their paths %q, %q walk in order %d", k1, k2, want, p1, p2, got)
		}
	})
}
