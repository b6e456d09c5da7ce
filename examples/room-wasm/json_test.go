package main

import (
	"encoding/json"
	"testing"
)

func TestQuote(t *testing.T) {
	for _, s := range []string{"", "ada", `a "quoted" \ back`, "tab\tnl\n\x01", "héllo ☃ 😀", "bad \xff byte"} {
		var got string
		if err := json.Unmarshal(quote(s), &got); err != nil {
			t.Fatalf("quote(%q) = %s: %v", s, quote(s), err)
		}
		want := s
		if s == "bad \xff byte" {
			want = "bad \uFFFD byte"
		}
		if got != want {
			t.Errorf("quote(%q) decodes to %q", s, got)
		}
	}
}

func TestDecodeObject(t *testing.T) {
	m, ok := decodeObject([]byte(` {"type":"say", "text":"h\u00e9 \"x\" \ud83d\ude00\n", "n": -1.5e3, "o": {"a":[1,true,null,"]"]}, "b": false} `))
	if !ok || m["type"] != "say" || m["text"] != "hé \"x\" 😀\n" || len(m) != 2 {
		t.Fatalf("decodeObject = %q, %v", m, ok)
	}
	if m, ok := decodeObject([]byte(`{}`)); !ok || len(m) != 0 {
		t.Fatalf("decodeObject({}) = %q, %v", m, ok)
	}
	for _, bad := range []string{``, `{`, `{"a"}`, `{"a":}`, `{"a":"b",}`, `{"a":"b"} x`, `["a"]`, `{"a":"\x"}`, `{"a":"` + "\x01" + `"}`, `{"a":tru}`, `{"a":"\u12"}`} {
		if m, ok := decodeObject([]byte(bad)); ok {
			t.Errorf("decodeObject(%q) = %q, true", bad, m)
		}
	}
}

func TestEncodeMessage(t *testing.T) {
	var m struct {
		From, Text string
		At         int64
	}
	if err := json.Unmarshal(encodeMessage("ada", "hi \"you\"", 42), &m); err != nil || m.From != "ada" || m.Text != `hi "you"` || m.At != 42 {
		t.Fatalf("encodeMessage: %+v, %v", m, err)
	}
}
