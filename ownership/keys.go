package ownership

import (
	"fmt"
	"strings"
)

// Bucket key prefixes (DESIGN.md section 3).
const (
	NodesPrefix  = "nodes/"
	OwnersPrefix = "owners/"
	MovesPrefix  = "moves/"
	ActorsPrefix = "actors/"
)

const upperHex = "0123456789ABCDEF"

// EscapeSegment makes one path segment of a bucket key from user input: every
// byte outside [A-Za-z0-9_~-] and every '.' becomes %XX, so a segment never
// holds '/', is never "." or "..", and distinct inputs give distinct segments.
func EscapeSegment(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '~' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

// UnescapeSegment reverses EscapeSegment.
func UnescapeSegment(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape in %q", s)
		}
		var v byte
		for _, h := range []byte{s[i+1], s[i+2]} {
			v <<= 4
			switch {
			case '0' <= h && h <= '9':
				v |= h - '0'
			case 'A' <= h && h <= 'F':
				v |= h - 'A' + 10
			default:
				return "", fmt.Errorf("bad escape in %q", s)
			}
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}

// NodeKey is the key of a node's lease record.
func NodeKey(n NodeID) string { return NodesPrefix + EscapeSegment(string(n)) }

// OwnerKey is the key of an actor's ownership record.
func OwnerKey(a Actor) string {
	return OwnersPrefix + EscapeSegment(a.Class) + "/" + EscapeSegment(a.Name)
}

// MoveKey is the key of an actor's move request.
func MoveKey(a Actor) string {
	return MovesPrefix + EscapeSegment(a.Class) + "/" + EscapeSegment(a.Name)
}

// ActorFromOwnerKey reads the actor back from an ownership record key.
func ActorFromOwnerKey(key string) (Actor, bool) {
	rest, ok := strings.CutPrefix(key, OwnersPrefix)
	if !ok {
		return Actor{}, false
	}
	c, n, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(n, "/") {
		return Actor{}, false
	}
	class, err1 := UnescapeSegment(c)
	name, err2 := UnescapeSegment(n)
	if err1 != nil || err2 != nil {
		return Actor{}, false
	}
	return Actor{Class: class, Name: name}, true
}
