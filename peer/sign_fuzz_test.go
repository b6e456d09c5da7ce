package peer

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzPeerSignature: a request signed with any method, path, header and
// body checks; the same request with any other signature header is
// refused, and so is one whose header or body changed; nothing panics.
func FuzzPeerSignature(f *testing.F) {
	f.Add("GET", "/actor/c/n", "q=1", "X-A", "v", []byte("body"), "v2,1,AAAAAAAAAAAAAAAAAAAAAA,X-A,xyz")
	f.Add("POST", "/actor/c/n%2F", "", "Cookie", "a=b", []byte{}, "v2,,,,")
	f.Add("PUT", "/actor/x/y", "a=%ff", "X-Many", "", []byte{0xff}, "v1,0,abc")
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, method, path, query, name, value string, body []byte, forged string) {
		u := &url.URL{Scheme: "http", Host: "n1", Path: path, RawQuery: query}
		r, err := http.NewRequest(method, u.String(), bytes.NewReader(body))
		if err != nil || !token(name) || http.CanonicalHeaderKey(name) != name || unsignedHeaders[name] ||
			name == "Host" || name == "Trailer" || name == "User-Agent" {
			return
		}
		r.Header.Set(ForwardedHeader, "n2")
		r.Header[name] = []string{value}
		Sign(r, body, key, now)
		value = r.Header.Get(name) // as the wire has it
		if _, _, _, err := verify(r, body, key, now); err != nil {
			t.Fatalf("a signed request is refused: %v", err)
		}
		good := r.Header.Get(SignatureHeader)
		if forged != good {
			r.Header.Set(SignatureHeader, forged)
			if _, _, _, err := verify(r, body, key, now); err == nil {
				t.Fatalf("forged signature %q taken (the real one: %q)", forged, good)
			}
			r.Header.Set(SignatureHeader, good)
		}
		r.Header[name] = []string{value + "x"}
		if _, _, _, err := verify(r, body, key, now); err == nil && name != SignatureHeader {
			t.Fatalf("a changed %s header is taken", name)
		}
		r.Header[name] = []string{value}
		if _, _, _, err := verify(r, append(bytes.Clone(body), 0), key, now); err == nil {
			t.Fatal("a changed body is taken")
		}
	})
}

// token says whether s is an HTTP token, as a header name must be (no
// HTTP client sends another).
func token(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
