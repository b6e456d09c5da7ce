package ingress

import (
	"bytes"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestSignatureChecksWhatThePeerSays(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_700_000_000, 0)
	signed := func() *http.Request {
		r, err := http.NewRequest(http.MethodPost, "http://n1:8080/actor/counter/a%2Fb/x?y=1", bytes.NewReader(nil))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set(ForwardedHeader, "n2")
		r.Header.Set(CallChainHeader, "hop/p")
		signRequest(r, []byte("body"), key, now)
		return r
	}
	if err := verifyRequest(signed(), []byte("body"), key, now.Add(30*time.Second)); err != nil {
		t.Fatalf("a signed request within the window: %v", err)
	}
	for name, tc := range map[string]struct {
		change func(*http.Request)
		body   string
		key    string
		at     time.Duration
	}{
		"other body":        {body: "bodz"},
		"other key":         {key: "fedcba9876543210fedcba9876543210"},
		"other path":        {change: func(r *http.Request) { r.URL.RawPath, r.URL.Path = "/actor/counter/b", "/actor/counter/b" }},
		"other query":       {change: func(r *http.Request) { r.URL.RawQuery = "y=2" }},
		"other method":      {change: func(r *http.Request) { r.Method = http.MethodGet }},
		"other forwarder":   {change: func(r *http.Request) { r.Header.Set(ForwardedHeader, "n9") }},
		"other chain":       {change: func(r *http.Request) { r.Header.Set(CallChainHeader, "hop/q") }},
		"too old":           {at: 2 * time.Minute},
		"from the future":   {at: -2 * time.Minute},
		"no signature":      {change: func(r *http.Request) { r.Header.Del(SignatureHeader) }},
		"garbled signature": {change: func(r *http.Request) { r.Header.Set(SignatureHeader, "v1,x,y") }},
	} {
		r := signed()
		if tc.change != nil {
			tc.change(r)
		}
		body, k := "body", key
		if tc.body != "" {
			body = tc.body
		}
		if tc.key != "" {
			k = []byte(tc.key)
		}
		if err := verifyRequest(r, []byte(body), k, now.Add(tc.at)); !errors.Is(err, errUnsigned) {
			t.Errorf("%s: %v; want refused", name, err)
		}
	}
}
