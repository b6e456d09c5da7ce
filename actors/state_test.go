package actors

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

func TestStateRoundTrip(t *testing.T) {
	for _, kv := range []map[string][]byte{
		{},
		{"count": []byte("7")},
		{"a": nil, "": []byte("empty key"), "bin": {0, 1, 2, 255}, strings.Repeat("k", 2048): bytes.Repeat([]byte{'v'}, 128<<10)},
	} {
		in := stateObject{StateHeader: ownership.StateHeader{Gen: 3, Seq: 9}, KV: kv}
		out, err := decodeState(encodeState(in))
		if err != nil {
			t.Fatal(err)
		}
		if out.Gen != 3 || out.Seq != 9 || len(out.KV) != len(kv) {
			t.Fatalf("round trip: %+v", out.StateHeader)
		}
		for k, v := range kv {
			if got, ok := out.KV[k]; !ok || !bytes.Equal(got, v) {
				t.Fatalf("key %.20q: %q, %v", k, got, ok)
			}
		}
	}
}

func TestStateTruncated(t *testing.T) {
	b := encodeState(stateObject{StateHeader: ownership.StateHeader{Gen: 1, Seq: 1}, KV: map[string][]byte{"key": []byte("value")}})
	for cut := 1; cut < len("key")+len("value")+2; cut++ {
		if _, err := decodeState(b[:len(b)-cut]); err == nil {
			t.Fatalf("cut %d bytes: decoded", cut)
		}
	}
}

// FuzzDecodeState feeds arbitrary bytes to the state decoder, which every
// event's first read runs on what the bucket holds. It never panics; what
// it refuses is a damaged object (ownership.ErrDamaged); and what it
// accepts survives a round trip through the encoder.
func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(stateObject{StateHeader: ownership.StateHeader{Gen: 3, Seq: 9}, KV: map[string][]byte{"count": []byte("7")}}))
	f.Add([]byte("wk1 state 1 1\n"))
	f.Add([]byte("wk1 state 1 1\n\x05a"))
	f.Add([]byte("wk1 state 1 1\n\x01k\xff\xff\xff\xff\x0f"))
	f.Add([]byte("wk1 state x 1\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(data)
		if err != nil {
			if !errors.Is(err, ownership.ErrDamaged) {
				t.Fatalf("decodeState(%q): %v, want ErrDamaged", data, err)
			}
			return
		}
		again, err := decodeState(encodeState(st))
		if err != nil || again.StateHeader != st.StateHeader || len(again.KV) != len(st.KV) {
			t.Fatalf("round trip of %q: %+v, %v", data, again, err)
		}
		for k, v := range st.KV {
			if got, ok := again.KV[k]; !ok || !bytes.Equal(got, v) {
				t.Fatalf("round trip of %q: key %q is %q, want %q", data, k, got, v)
			}
		}
	})
}
