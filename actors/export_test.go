package actors

import "github.com/wasmkeep/wasmkeep/ownership"

// Test hooks for the external tests of the storage layout.

// EncodeFormat1 is a state object's payload as actors stored it before
// runs (format 1): the pairs alone.
func EncodeFormat1(kv map[string][]byte) []byte { return encodePairs(kv) }

// HeadOf reads a state object: whether it is in format 2, the keys of the
// run objects it lists, and those of the garbage it lists.
func HeadOf(a ownership.Actor, body []byte) (format2 bool, listed, garbage []string, err error) {
	s, p, err := decodeStateObject(body)
	if err != nil {
		return false, nil, nil, err
	}
	for _, r := range s.runs {
		for _, pt := range r.parts {
			listed = append(listed, ownership.RunKey(a, pt.gen, pt.n))
		}
	}
	for _, g := range s.garbage {
		garbage = append(garbage, ownership.RunKey(a, g.gen, g.n))
	}
	return len(p) >= len(headMagic) && string(p[:len(headMagic)]) == headMagic, listed, garbage, nil
}
