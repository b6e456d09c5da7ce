package actors

import (
	"encoding/binary"
	"fmt"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// StateKey is the bucket key of an actor's state object.
func StateKey(a ownership.Actor) string { return ownership.StateKey(a) }

// stateObject is an actor's state in the bucket: the ownership layer's
// header (the generation of the hold that last wrote it, which an
// acquisition's seal raises before the hold exists, and a write count),
// then the key-value pairs.
type stateObject struct {
	ownership.StateHeader
	KV map[string][]byte
}

// The payload is the pairs one after the other, in no particular order:
// uvarint key length, key, uvarint value length, value. Cheap to write on
// every commit (no sorting, no escaping) and to read on every wake.
func encodeState(s stateObject) []byte {
	n := 0
	for k, v := range s.KV {
		n += len(k) + len(v) + 2*binary.MaxVarintLen32
	}
	b := make([]byte, 0, n)
	for k, v := range s.KV {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return ownership.EncodeState(s.StateHeader, b)
}

// decodeState reads a state object. Every error matches
// ownership.ErrDamaged: bytes it cannot read are a damaged object.
func decodeState(data []byte) (stateObject, error) {
	h, p, err := ownership.DecodeState(data)
	if err != nil {
		return stateObject{}, fmt.Errorf("decode actor state: %w", err)
	}
	s := stateObject{StateHeader: h, KV: map[string][]byte{}}
	for len(p) > 0 {
		k, rest, ok := field(p)
		if !ok {
			return stateObject{}, fmt.Errorf("decode actor state: %w: truncated key at byte %d", ownership.ErrDamaged, len(data)-len(p))
		}
		v, rest, ok := field(rest)
		if !ok {
			return stateObject{}, fmt.Errorf("decode actor state: %w: truncated value of key %.64q", ownership.ErrDamaged, k)
		}
		s.KV[string(k)] = v
		p = rest
	}
	return s, nil
}

// field reads one length-prefixed field.
func field(p []byte) (f, rest []byte, ok bool) {
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return nil, nil, false
	}
	return p[w : w+int(n)], p[w+int(n):], true
}
