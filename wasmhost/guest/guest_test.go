package guest

import (
	"testing"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

func TestQuery(t *testing.T) {
	r := &Request{RawQuery: "a=1&b=x+y&c%20d=%41%zz&flag"}
	tests := []struct {
		key, want string
		ok        bool
	}{
		{"a", "1", true},
		{"b", "x y", true},
		{"c d", "A%zz", true},
		{"flag", "", true},
		{"missing", "", false},
	}
	for _, tt := range tests {
		got, ok := r.Query(tt.key)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Query(%q) = %q, %v; want %q, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
}

func TestHeaderValue(t *testing.T) {
	r := &Request{Header: []Field{{"Content-Type", "text/plain"}, {"X-A", "1"}, {"X-A", "2"}}}
	if v := r.HeaderValue("x-a"); v != "1" {
		t.Errorf("HeaderValue(x-a) = %q", v)
	}
	if v := r.HeaderValue("X-B"); v != "" {
		t.Errorf("HeaderValue(X-B) = %q", v)
	}
}

func TestDecodeRequest(t *testing.T) {
	var b []byte
	b = wire.AppendString(b, "POST")
	b = wire.AppendString(b, "/p")
	b = wire.AppendString(b, "q=1")
	b = wire.AppendU32(b, 1)
	b = wire.AppendString(b, "X-A")
	b = wire.AppendString(b, "v")
	b = wire.AppendBytes(b, []byte("body"))
	req, ok := decodeRequest(b)
	if !ok || req.Method != "POST" || req.Path != "/p" || req.RawQuery != "q=1" ||
		len(req.Header) != 1 || req.Header[0] != (Field{"X-A", "v"}) || string(req.Body) != "body" {
		t.Fatalf("decodeRequest = %+v, %v", req, ok)
	}
	if _, ok := decodeRequest(b[:len(b)-1]); ok {
		t.Fatal("decodeRequest accepted a truncated request")
	}
}

func TestEncodeResponse(t *testing.T) {
	b := encodeResponse(&Response{Status: 201, Header: []Field{{"A", "b"}}, Body: []byte("x")})
	r := wire.NewReader(b)
	if r.U32() != 201 || r.Count(8) != 1 || r.String() != "A" || r.String() != "b" || string(r.Bytes()) != "x" || r.Err() {
		t.Fatalf("encodeResponse = %v", b)
	}
}
