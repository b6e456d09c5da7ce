package ownership

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Bucket key prefixes (docs/PROTOCOL.md §1).
const (
	NodesPrefix  = "nodes/"
	OwnersPrefix = "owners/"
	MovesPrefix  = "moves/"
	ActorsPrefix = "actors/"
	// ClassesPrefix: what each node serves (ClassesKey).
	ClassesPrefix = "classes/"
)

const upperHex = "0123456789ABCDEF"

// maxSegment bounds an escaped key segment, well under the 255 bytes a
// file-backed store allows for one path component.
const maxSegment = 200

// EscapeSegment makes one reversible path segment from user input: every byte
// outside [A-Za-z0-9_-] becomes %XX (so '.', '~', '/' and '%' never appear
// raw), hence a segment never holds '/', is never "." or "..", and distinct
// inputs give distinct segments. The empty string becomes "~".
//
// Record fields use it as is. Bucket keys use KeySegment, which also bounds
// the length.
func EscapeSegment(s string) string {
	if s == "" {
		return "~"
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

// KeySegment is EscapeSegment bounded to maxSegment bytes: a longer one
// keeps a readable head and ends in "~" and a hash of the whole input, so it
// stays distinct ('~' never appears in an escaped segment) but is no longer
// reversible; readers take names from the records, never from keys.
func KeySegment(s string) string {
	e := EscapeSegment(s)
	if len(e) <= maxSegment {
		return e
	}
	sum := sha256.Sum256([]byte(s))
	head := e[:maxSegment-1-2*16]
	if i := strings.LastIndexByte(head[max(len(head)-2, 0):], '%'); i >= 0 {
		head = head[:len(head)-2+i] // never cut an escape in two
	}
	return head + "~" + hex.EncodeToString(sum[:16])
}

// UnescapeSegment reverses EscapeSegment.
func UnescapeSegment(s string) (string, error) {
	if s == "~" {
		return "", nil
	}
	if strings.Contains(s, "~") {
		return "", fmt.Errorf("hashed or malformed segment %q", s)
	}
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
func NodeKey(n NodeID) string { return NodesPrefix + KeySegment(string(n)) }

// DrainRequestKey is where an operator asks node n to drain (`cluster
// drain`; deleting it takes the drain back). It lies beside the node's
// lease in nodes/, so every node sees it in the membership listing it runs
// each lease period anyway, at no request more. '~' never appears in the
// escaped segment of a node id, so no lease key is a request key.
func DrainRequestKey(n NodeID) string { return NodeKey(n) + "~drain" }

// MoveRequestPrefix begins the keys of the move requests node n is to act
// on (`cluster move`): n holds the actor and moves it, or, when nobody
// held it, n is the target and takes it. Like a drain request they lie in
// nodes/, seen with the membership listing; each holds a MoveRequest.
func MoveRequestPrefix(n NodeID) string { return NodeKey(n) + "~move~" }

// ClassesKey is where node n says which classes it serves (NodeClasses):
// written as it starts, read by its peers once per instance of it, so that
// an event for a class that only some nodes serve goes to one of them. It
// is not in nodes/, whose listing every node runs each lease period.
func ClassesKey(n NodeID) string { return ClassesPrefix + KeySegment(string(n)) }

// OwnerKey is the key of an actor's ownership record.
func OwnerKey(a Actor) string {
	return OwnersPrefix + KeySegment(a.Class) + "/" + KeySegment(a.Name)
}

// MoveKey is the key of an actor's move request.
func MoveKey(a Actor) string {
	return MovesPrefix + KeySegment(a.Class) + "/" + KeySegment(a.Name)
}

// ActorFromOwnerKey reads the actor back from an ownership record key whose
// segments were not shortened (false otherwise: read the record instead).
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
