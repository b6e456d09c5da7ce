package actors

import (
	"bytes"
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
