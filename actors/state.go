package actors

import (
	"encoding/json"
	"fmt"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// StateKey is the bucket key of an actor's state object.
func StateKey(a ownership.Actor) string { return ownership.StateKey(a) }

// stateObject is an actor's state in the bucket: the ownership layer's
// header (the generation of the hold that last wrote it, which an
// acquisition's seal raises before the hold exists, and a write count),
// then the key-value pairs as JSON.
type stateObject struct {
	ownership.StateHeader
	KV map[string][]byte
}

func encodeState(s stateObject) []byte {
	b, err := json.Marshal(s.KV)
	if err != nil {
		panic(fmt.Sprintf("actors: encode state: %v", err)) // maps of strings to bytes always encode
	}
	return ownership.EncodeState(s.StateHeader, b)
}

func decodeState(b []byte) (stateObject, error) {
	h, payload, err := ownership.DecodeState(b)
	if err != nil {
		return stateObject{}, fmt.Errorf("decode actor state: %w", err)
	}
	s := stateObject{StateHeader: h, KV: map[string][]byte{}}
	if len(payload) == 0 {
		return s, nil // sealed before anything was stored
	}
	if err := json.Unmarshal(payload, &s.KV); err != nil {
		return stateObject{}, fmt.Errorf("decode actor state: %w", err)
	}
	if s.KV == nil {
		s.KV = map[string][]byte{}
	}
	return s, nil
}
