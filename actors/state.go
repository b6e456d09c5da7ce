package actors

import (
	"encoding/json"
	"fmt"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// StateKey is the bucket key of an actor's state object.
func StateKey(a ownership.Actor) string {
	return ownership.ActorsPrefix + ownership.KeySegment(a.Class) + "/" + ownership.KeySegment(a.Name) + "/state"
}

// stateObject is the encoding of an actor's state in the bucket.
type stateObject struct {
	// Gen is the generation of the hold that wrote it.
	Gen ownership.Generation `json:"gen"`
	// Seq counts the writes of this object: it makes every write's bytes
	// differ, since an ETag may be a hash of the content.
	Seq uint64            `json:"seq"`
	KV  map[string][]byte `json:"kv"`
}

func encodeState(s stateObject) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("actors: encode state: %v", err)) // maps of strings to bytes always encode
	}
	return b
}

func decodeState(b []byte) (stateObject, error) {
	var s stateObject
	if err := json.Unmarshal(b, &s); err != nil {
		return stateObject{}, fmt.Errorf("decode actor state: %w", err)
	}
	if s.KV == nil {
		s.KV = map[string][]byte{}
	}
	return s, nil
}
