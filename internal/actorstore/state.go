package actorstore

import (
	"encoding/binary"
	"fmt"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// StateKey is the bucket key of an actor's state object, its storage's
// head (layout.go).
func StateKey(a ownership.Actor) string { return ownership.StateKey(a) }

// DecodeStateObject reads a state object: the ownership layer's header
// (the generation of the hold that last wrote it, which an acquisition's
// seal raises before the hold exists, and a write count), then the head.
// It returns the payload too, for a seal that rewrites it as it is.
// Every error matches ownership.ErrDamaged: bytes it cannot read are a
// damaged object.
func DecodeStateObject(data []byte) (*State, []byte, error) {
	h, p, err := ownership.DecodeState(data)
	if err != nil {
		return nil, nil, fmt.Errorf("decode actor state: %w", err)
	}
	s, err := decodeHead(h, p)
	if err != nil {
		return nil, nil, err
	}
	return s, p, nil
}

// encodePairs is format 1 of a head (a state object's payload before runs
// existed): the pairs one after the other, in no particular order: uvarint
// key length, key, uvarint value length, value. It is still read; tests
// write it to show that it is.
func encodePairs(kv map[string][]byte) []byte {
	n := 0
	for k, v := range kv {
		n += len(k) + len(v) + 2*binary.MaxVarintLen32
	}
	b := make([]byte, 0, n)
	for k, v := range kv {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

// decodePairs reads format 1.
func decodePairs(p []byte) (map[string][]byte, error) {
	kv := map[string][]byte{}
	all := len(p)
	for len(p) > 0 {
		k, rest, ok := field(p)
		if !ok {
			return nil, fmt.Errorf("decode actor state: %w: truncated key at byte %d", ownership.ErrDamaged, all-len(p))
		}
		v, rest, ok := field(rest)
		if !ok {
			return nil, fmt.Errorf("decode actor state: %w: truncated value of key %.64q", ownership.ErrDamaged, k)
		}
		kv[string(k)] = v
		p = rest
	}
	return kv, nil
}

// field reads one length-prefixed field.
func field(p []byte) (f, rest []byte, ok bool) {
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return nil, nil, false
	}
	return p[w : w+int(n)], p[w+int(n):], true
}

// DamagedError says an event did not run because the actor's state object
// in the bucket is damaged: the store's checksum fails, or it cannot be
// decoded. No retry, here or on another node, serves the actor until a
// person restores the object, so it is an error (HTTP 500 naming the key),
// not a refusal to retry. Other actors are served as before; nothing that
// needs the object's content is written over it. It matches
// ownership.ErrDamaged (errors.Is).
type DamagedError struct {
	Actor ownership.Actor
	Key   string // the state object's bucket key
	Err   error  // what the store or the decoder said
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("actor %s/%s: state damaged in the bucket at %s: %v", e.Actor.Class, e.Actor.Name, e.Key, e.Err)
}

// Unwrap gives the store's or the decoder's error, which wraps
// ownership.ErrDamaged.
func (e *DamagedError) Unwrap() error { return e.Err }
