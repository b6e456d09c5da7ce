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

func TestEncodeListOptions(t *testing.T) {
	b, ok := encodeListOptions(ListOptions{Prefix: "p/", Start: "p/b", End: "p/y", Limit: 5, Reverse: true})
	if !ok {
		t.Fatal("encodeListOptions refused valid options")
	}
	r := wire.NewReader(b)
	if r.String() != "p/" || r.String() != "p/b" || r.String() != "p/y" || r.U32() != 5 || r.U32() != listReverse || r.Err() {
		t.Fatalf("encodeListOptions = %v", b)
	}
	b, _ = encodeListOptions(ListOptions{})
	r = wire.NewReader(b)
	if r.String() != "" || r.String() != "" || r.String() != "" || r.U32() != 0 || r.U32() != 0 || r.Err() {
		t.Fatalf("encodeListOptions of no options = %v", b)
	}
	for _, limit := range []int{-1, 1 << 32} {
		if _, ok := encodeListOptions(ListOptions{Limit: limit}); ok {
			t.Errorf("encodeListOptions accepted limit %d", limit)
		}
	}
}

func TestDecodeEntries(t *testing.T) {
	b := wire.AppendU32(nil, 2)
	b = wire.AppendString(b, "a")
	b = wire.AppendString(b, "1")
	b = wire.AppendString(b, "b")
	b = wire.AppendString(b, "")
	entries, ok := decodeEntries(b)
	if !ok || len(entries) != 2 || entries[0].Key != "a" || string(entries[0].Value) != "1" ||
		entries[1].Key != "b" || len(entries[1].Value) != 0 {
		t.Fatalf("decodeEntries = %+v, %v", entries, ok)
	}
	if entries, ok := decodeEntries(wire.AppendU32(nil, 0)); !ok || len(entries) != 0 {
		t.Fatalf("decodeEntries of none = %+v, %v", entries, ok)
	}
	if _, ok := decodeEntries(b[:len(b)-1]); ok {
		t.Fatal("decodeEntries accepted a truncated result")
	}
	if _, ok := decodeEntries(wire.AppendU32(nil, 1<<30)); ok {
		t.Fatal("decodeEntries accepted a count past the end")
	}
}

func TestEncodeBatch(t *testing.T) {
	b := encodeBatch([]Op{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("ignored"), Delete: true}, {Key: "c"}})
	want := []byte{
		3, 0, 0, 0,
		batchPut, 1, 0, 0, 0, 'a', 1, 0, 0, 0, '1',
		batchDelete, 1, 0, 0, 0, 'b',
		batchPut, 1, 0, 0, 0, 'c', 0, 0, 0, 0,
	}
	if string(b) != string(want) {
		t.Fatalf("encodeBatch = %v, want %v", b, want)
	}
	if cap(b) != len(b) {
		t.Errorf("encodeBatch sized its buffer %d for %d bytes", cap(b), len(b))
	}
	if b := encodeBatch(nil); string(b) != "\x00\x00\x00\x00" {
		t.Fatalf("encodeBatch(nil) = %v", b)
	}
}

// TestDecodeSocketEvent: events as the host lays them out for minor
// version 2, with a dialed socket's URL and tags last.
func TestDecodeSocketEvent(t *testing.T) {
	b := []byte{wire.SocketMessage}
	b = wire.AppendU64(b, 1<<40|7)
	b = append(b, wire.FlagText)
	b = wire.AppendU32(b, 0)
	b = wire.AppendString(b, "hi")
	b = wire.AppendString(b, "")
	b = wire.AppendU32(b, 0)
	ev, ok := decodeSocketEvent(b)
	if !ok || ev.Kind != SocketMessage || ev.Socket != 1<<40|7 || !ev.Text || string(ev.Data) != "hi" || ev.URL != "" || ev.Tags != nil {
		t.Fatalf("decodeSocketEvent(message) = %+v, %v", ev, ok)
	}
	if ev.Socket.Dialed() {
		t.Fatal("an accepted socket's id is taken as dialed")
	}
	b = []byte{wire.SocketClose}
	b = wire.AppendU64(b, 1<<62|3)
	b = append(b, wire.FlagClean)
	b = wire.AppendU32(b, 1001)
	b = wire.AppendString(b, "away")
	b = wire.AppendString(b, "ws://feed/x")
	b = wire.AppendU32(b, 2)
	b = wire.AppendString(b, "feed")
	b = wire.AppendString(b, "b")
	ev, ok = decodeSocketEvent(b)
	if !ok || ev.Kind != SocketClose || ev.Socket != 1<<62|3 || !ev.Clean || ev.Code != 1001 || ev.Reason != "away" || ev.Data != nil ||
		ev.URL != "ws://feed/x" || len(ev.Tags) != 2 || ev.Tags[0] != "feed" || ev.Tags[1] != "b" {
		t.Fatalf("decodeSocketEvent(close) = %+v, %v", ev, ok)
	}
	if !ev.Socket.Dialed() {
		t.Fatal("a dialed socket's id is not taken as dialed")
	}
	if _, ok := decodeSocketEvent(b[:len(b)-1]); ok {
		t.Fatal("decodeSocketEvent accepted a truncated event")
	}
	if _, ok := decodeSocketEvent(append(b, 0)); ok {
		t.Fatal("decodeSocketEvent accepted a byte left over")
	}
}

func TestDecodeSocketList(t *testing.T) {
	b := wire.AppendU32(nil, 2)
	b = wire.AppendU64(b, 1)
	b = wire.AppendU32(b, 2)
	b = wire.AppendString(b, "a")
	b = wire.AppendString(b, "b")
	b = wire.AppendString(b, "ada")
	b = wire.AppendString(b, "")
	b = wire.AppendU64(b, 1<<62|2)
	b = wire.AppendU32(b, 0)
	b = wire.AppendString(b, "")
	b = wire.AppendString(b, "wss://feed/y")
	list, ok := decodeSocketList(b)
	if !ok || len(list) != 2 || list[0].ID != 1 || len(list[0].Tags) != 2 || list[0].Tags[1] != "b" ||
		string(list[0].Attachment) != "ada" || list[0].URL != "" || list[1].ID != 1<<62|2 || list[1].Tags != nil ||
		len(list[1].Attachment) != 0 || list[1].URL != "wss://feed/y" {
		t.Fatalf("decodeSocketList = %+v, %v", list, ok)
	}
	if _, ok := decodeSocketList(b[:len(b)-1]); ok {
		t.Fatal("decodeSocketList accepted a truncated list")
	}
	if _, ok := decodeSocketList(wire.AppendU32(nil, 1<<30)); ok {
		t.Fatal("decodeSocketList accepted a count past the end")
	}
}

// TestCallEncodings: a call's request is laid out as the host's request
// (so decodeRequest reads it back), and a response as the guest hands out
// its own (so decodeResponse reads encodeResponse's bytes).
func TestCallEncodings(t *testing.T) {
	req := &Request{Method: "POST", Path: "/a b", RawQuery: "k=v", Body: []byte("body"),
		Header: []Field{{Name: "X-A", Value: "1"}, {Name: "X-A", Value: "2"}}}
	got, ok := decodeRequest(encodeRequest(req))
	if !ok || got.Method != req.Method || got.Path != req.Path || got.RawQuery != req.RawQuery ||
		string(got.Body) != "body" || len(got.Header) != 2 || got.Header[1] != req.Header[1] {
		t.Fatalf("request round trip: %+v, %v", got, ok)
	}
	resp := &Response{Status: 418, Header: []Field{{Name: "X-B", Value: "v"}}, Body: []byte("tea")}
	back, ok := decodeResponse(encodeResponse(resp))
	if !ok || back.Status != 418 || len(back.Header) != 1 || back.Header[0] != resp.Header[0] || string(back.Body) != "tea" {
		t.Fatalf("response round trip: %+v, %v", back, ok)
	}
	if _, ok := decodeResponse(append(encodeResponse(resp), 0)); ok {
		t.Fatal("a response with a byte left over decoded")
	}
}

func TestEncodeKeys(t *testing.T) {
	b := encodeKeys([]string{"a", "", "bc"})
	want := []byte{3, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0, 2, 0, 0, 0, 'b', 'c'}
	if string(b) != string(want) || cap(b) != len(b) {
		t.Fatalf("encodeKeys = %v (cap %d), want %v", b, cap(b), want)
	}
}

func TestDecodeValues(t *testing.T) {
	b := wire.AppendU32(nil, 3)
	b = append(b, 1)
	b = wire.AppendString(b, "1")
	b = append(b, 0, 1)
	b = wire.AppendString(b, "")
	vals := map[string][]byte{}
	if !decodeValues(b, []string{"a", "x", "e"}, vals) || len(vals) != 2 || string(vals["a"]) != "1" ||
		vals["e"] == nil || len(vals["e"]) != 0 {
		t.Fatalf("decodeValues = %q", vals)
	}
	for name, tt := range map[string]struct {
		b    []byte
		keys []string
	}{
		"truncated":   {b[:len(b)-1], []string{"a", "x", "e"}},
		"left over":   {append(b[:len(b):len(b)], 0), []string{"a", "x", "e"}},
		"wrong count": {b, []string{"a", "x"}},
		"bad flag":    {append(wire.AppendU32(nil, 1), 2), []string{"a"}},
	} {
		if decodeValues(tt.b, tt.keys, map[string][]byte{}) {
			t.Errorf("%s: decodeValues accepted it", name)
		}
	}
}
