package ownership

import (
	"bytes"
	"fmt"
)

// StateKey is the key of an actor's state object: everything the actor
// stored, in one object, whatever its payload's layout.
func StateKey(a Actor) string {
	return ActorsPrefix + KeySegment(a.Class) + "/" + KeySegment(a.Name) + "/state"
}

// StateHeader is what the ownership layer reads of a state object: the
// generation of the hold that last wrote it (an acquisition's seal, or a
// commit of that hold) and a count of its writes. The payload after it
// belongs to the actors layer.
type StateHeader struct {
	Gen Generation
	// Seq counts the object's writes: every write's bytes differ, since an
	// ETag may be a hash of the content.
	Seq uint64
}

// EncodeState gives the stored bytes of a state object: one header line,
// "wk1 state <gen> <seq>\n", then the payload as is.
func EncodeState(h StateHeader, payload []byte) []byte {
	f := newFields("state").num(uint64(h.Gen)).num(h.Seq)
	out := make([]byte, 0, len(f.b)+1+len(payload))
	out = append(out, f.b...)
	out = append(out, '\n')
	return append(out, payload...)
}

// DecodeState splits a state object into its header and its payload (a
// slice of data).
func DecodeState(data []byte) (StateHeader, []byte, error) {
	line, payload, ok := bytes.Cut(data, []byte{'\n'})
	if !ok {
		return StateHeader{}, nil, fmt.Errorf("%w: state: no header line", ErrUnreadable)
	}
	p := parse("state", line, 2)
	h := StateHeader{Gen: Generation(p.num()), Seq: p.num()}
	if p.err != nil {
		return StateHeader{}, nil, p.err
	}
	return h, payload, nil
}
