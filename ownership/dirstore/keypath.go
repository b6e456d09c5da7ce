package dirstore

import (
	"strings"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Keys become paths under the objects directory. The mapping must be
// injective (no two keys share a file), must never leave the directory, must
// keep every file name within 255 bytes, and must let List produce keys in
// byte order by walking directories and sorting each one's entries alone.
//
// A key is cut at each '/' into segments. Each segment becomes one path
// component, named by a kind letter followed by the escaped segment:
//
//	d<seg>  a directory: the segment is followed by '/' and more key
//	o<seg>  the object file: the segment ends the key
//	c<seg>  a continuation directory: the first chunkLen bytes of a segment
//	        of chunkLen bytes or more; the rest of the key (which may begin
//	        with '/' or be empty) is encoded again inside it
//
// so "a/b" is "da/ob", "a/" is "da/o", and a 200-byte segment S is
// "c<S[:64]>/c<S[64:128]>/c<S[128:192]>/o<S[192:]>".
//
// Escaping keeps bytes in [a-z0-9._-] and writes every other byte as %XX
// with upper-case hex. Upper-case letters are escaped too, so that keys
// differing only in case stay distinct on case-insensitive file systems
// (names are then equal under case folding only if their keys are equal);
// and every non-ASCII byte is escaped, so file systems that normalise
// Unicode names see only ASCII.
//
// Invariants that follow:
//   - No component is "", "." or "..": each starts with a kind letter.
//   - No component contains '/' or NUL, and none exceeds
//     1+3*chunkLen = 193 bytes.
//   - decode(encode(k)) == k, and a name is accepted by parseComponent only
//     if encode would produce it, so junk files are never mistaken for
//     objects.
//   - Ordering: within one directory, sorting entries by sortKey (the
//     segment text, plus '/' for a d entry) orders the key ranges beneath
//     them in byte order, and the ranges never interleave. An o or d
//     segment is shorter than chunkLen and a c segment exactly chunkLen, so
//     an o or d segment is never an extension of a c segment; and a c
//     segment holds no '/', so it compares with a d entry's "seg/" at a
//     position before or at the '/', the same way for every key beneath.
//     FuzzKeyPath checks this against strings.Compare.
const chunkLen = 64

const (
	kindDir    = 'd'
	kindObject = 'o'
	kindCont   = 'c'
)

const upperHex = "0123456789ABCDEF"

// literal reports whether b is written as itself in a component name.
func literal(b byte) bool {
	return 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '.' || b == '_' || b == '-'
}

func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if literal(c) {
			dst = append(dst, c)
		} else {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	return dst
}

func appendComponent(dst []byte, kind byte, seg string) []byte {
	return appendEscaped(append(dst, kind), seg)
}

// splitDirs walks s ('/'-separated) and returns the directory components
// every key starting with s lies under, each followed by '/', and the text
// of s they leave (its last segment, or the part of a long segment past its
// last full chunk).
func splitDirs(buf []byte, s string) ([]byte, string) {
	for {
		seg, rest, more := strings.Cut(s, "/")
		switch {
		case len(seg) >= chunkLen:
			buf = append(appendComponent(buf, kindCont, seg[:chunkLen]), '/')
			s = s[chunkLen:]
		case more:
			buf = append(appendComponent(buf, kindDir, seg), '/')
			s = rest
		default:
			return buf, s
		}
	}
}

// keyPath returns the '/'-separated path, relative to the objects
// directory, of the file that holds key. It accepts any non-empty string.
func keyPath(key string) string {
	buf, last := splitDirs(make([]byte, 0, 2*len(key)+8), key)
	return string(appendComponent(buf, kindObject, last))
}

// prefixDir returns the path, relative to the objects directory, of the
// deepest directory that holds every key starting with prefix ("" for the
// objects directory itself), and the key text that directory stands for.
// Every key under the directory starts with base, and base is a prefix of
// prefix; the rest of prefix is left for List to match against entries.
func prefixDir(prefix string) (dir, base string) {
	buf, rest := splitDirs(nil, prefix)
	return strings.TrimSuffix(string(buf), "/"), prefix[:len(prefix)-len(rest)]
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// parseComponent decodes one path component. It accepts exactly the names
// keyPath produces: a known kind, canonical escapes, no '/', and a segment
// length that fits the kind.
func parseComponent(name string) (kind byte, seg string, ok bool) {
	if name == "" {
		return 0, "", false
	}
	kind = name[0]
	if kind != kindDir && kind != kindObject && kind != kindCont {
		return 0, "", false
	}
	var b strings.Builder
	b.Grow(len(name))
	for i := 1; i < len(name); {
		c := name[i]
		if literal(c) {
			b.WriteByte(c)
			i++
			continue
		}
		if c != '%' || i+2 >= len(name) {
			return 0, "", false
		}
		hi, ok1 := unhex(name[i+1])
		lo, ok2 := unhex(name[i+2])
		v := hi<<4 | lo
		if !ok1 || !ok2 || literal(v) || v == '/' {
			return 0, "", false
		}
		b.WriteByte(v)
		i += 3
	}
	seg = b.String()
	if kind == kindCont && len(seg) != chunkLen || kind != kindCont && len(seg) >= chunkLen {
		return 0, "", false
	}
	return kind, seg, true
}

// sortKey orders the entries of one directory so that walking them in order
// yields keys in byte order (see the invariants above).
func sortKey(kind byte, seg string) string {
	if kind == kindDir {
		return seg + "/"
	}
	return seg
}

// decodePath is the inverse of keyPath: it returns the key a path stands
// for, or false if keyPath would never produce the path.
func decodePath(p string) (string, bool) {
	var key strings.Builder
	comps := strings.Split(p, "/")
	for i, c := range comps {
		kind, seg, ok := parseComponent(c)
		if !ok || (kind == kindObject) != (i == len(comps)-1) {
			return "", false
		}
		key.WriteString(seg)
		if kind == kindDir {
			key.WriteByte('/')
		}
	}
	return key.String(), true
}

// maxKeyPathLen bounds len(keyPath(k)) for every valid key: each key byte
// but '/' escapes to at most 3 bytes, and each component adds a kind letter
// and a separator; a component starts at each '/' (which itself adds no
// bytes) and after every chunkLen bytes of a long segment. FuzzKeyPath
// checks the bound.
const maxKeyPathLen = 3*ownership.MaxKeyLen + 2*(ownership.MaxKeyLen/chunkLen) + 2
