package peer

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
		r.Header.Set("Cookie", "session=a")
		r.Header.Add("X-Many", "1")
		r.Header.Add("X-Many", "2")
		Sign(r, []byte("body"), key, now)
		return r
	}
	if _, _, _, err := verify(signed(), []byte("body"), key, now.Add(30*time.Second)); err != nil {
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
		"other cookie":      {change: func(r *http.Request) { r.Header.Set("Cookie", "session=b") }},
		"cookie removed":    {change: func(r *http.Request) { r.Header.Del("Cookie") }},
		"values reordered":  {change: func(r *http.Request) { r.Header["X-Many"] = []string{"2", "1"} }},
		"value added":       {change: func(r *http.Request) { r.Header.Add("X-Many", "3") }},
		"names changed": {change: func(r *http.Request) {
			p := strings.Split(r.Header.Get(SignatureHeader), ",")
			p[3] = strings.Replace(p[3], "Cookie;", "", 1)
			r.Header.Set(SignatureHeader, strings.Join(p, ","))
		}},
		"other nonce": {change: func(r *http.Request) {
			p := strings.Split(r.Header.Get(SignatureHeader), ",")
			p[2] = "AAAAAAAAAAAAAAAAAAAAAA"
			r.Header.Set(SignatureHeader, strings.Join(p, ","))
		}},
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
		if _, _, _, err := verify(r, []byte(body), k, now.Add(tc.at)); !errors.Is(err, ErrUnsigned) {
			t.Errorf("%s: %v; want refused", name, err)
		}
	}
}

func TestPeerRequestReplayRefusedAndUnsignedHeadersDropped(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	h := NewVerifier(key, "n1", "")
	r, err := http.NewRequest(http.MethodGet, "http://n1/actor/counter/a", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set(ForwardedHeader, "n2")
	r.Header.Set(ForwardedToHeader, "n1")
	r.Header.Set("Cookie", "session=a")
	Sign(r, nil, key, time.Now())
	replay := r.Clone(r.Context())
	elsewhere := r.Clone(r.Context())
	// Added on the way (as a transport adds its own): not signed, so not
	// seen by the actor.
	r.Header.Set("Accept-Encoding", "gzip")
	r.Header.Set("Content-Length", "0")
	if err := h.Check(r, nil); err != nil {
		t.Fatalf("first: %v", err)
	}
	if _, ok := r.Header["Accept-Encoding"]; ok {
		t.Error("an unsigned header stayed")
	}
	if r.Header.Get("Cookie") != "session=a" || r.Header.Get(ForwardedHeader) != "n2" || r.Header.Get("Content-Length") != "0" {
		t.Errorf("signed headers lost: %v", r.Header)
	}
	if err := h.Check(replay, nil); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay: %v; want %v", err, ErrReplayed)
	}
	other := NewVerifier(key, "n3", "")
	if err := other.Check(elsewhere, nil); !errors.Is(err, ErrUnsigned) || !strings.Contains(err.Error(), "signed for node") {
		t.Fatalf("a request for n1 played to n3: %v; want refused", err)
	}
}

// TestSignatureSurvivesTheWire sends signed requests through Go's own
// client to a server: what the receiver reads must check, whatever form
// the sender's headers had (names not canonical, values with spaces, an
// empty User-Agent, a Host entry).
func TestSignatureSurvivesTheWire(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	got := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _, _, err := verify(r, body, key, time.Now())
		got <- err
	}))
	defer srv.Close()
	for name, h := range map[string]http.Header{
		"plain":             {"X-A": {"1"}},
		"lower-case name":   {"content-type": {"text/plain"}, "x-many": {"1", "2"}},
		"spaced value":      {"X-A": {"  padded  "}},
		"empty user agent":  {"User-Agent": {""}},
		"host in the map":   {"Host": {"elsewhere"}},
		"both forms":        {"X-B": {"1"}, "x-b": {"2"}},
		"a user agent":      {"User-Agent": {"client/1"}},
		"empty other value": {"X-Empty": {""}},
	} {
		body := []byte("payload")
		r, err := http.NewRequest(http.MethodPost, srv.URL+"/actor/c/n?x=1", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range h {
			r.Header[k] = vs
		}
		r.Header.Set(ForwardedHeader, "n2")
		Sign(r, body, key, time.Now())
		res, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res.Body.Close()
		if err := <-got; err != nil {
			t.Errorf("%s: refused at the receiver: %v", name, err)
		}
	}
}

func TestNoncesForgottenAfterTwoWindows(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	n := newNonces(func() time.Time { return now })
	if !n.first("a", now) || n.first("a", now.Add(2*SignatureWindow)) {
		t.Fatal("a nonce within two windows was taken again")
	}
	if !n.first("a", now.Add(2*SignatureWindow+2*time.Second)) {
		t.Fatal("a nonce past two windows is still remembered")
	}
	if len(n.secs) != 1 {
		t.Errorf("%d seconds remembered, want 1 (the old ones swept)", len(n.secs))
	}
}

// TestPeerRequestForAnotherStart: a request signed for another instance of
// the node is refused, and so is one naming none that was signed before
// this start (a node of an earlier version would send one, fresh).
func TestPeerRequestForAnotherStart(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	h := NewVerifier(key, "n1", "now")
	req := func(inst string, at time.Time) *http.Request {
		r, err := http.NewRequest(http.MethodGet, "http://n1/actor/counter/a", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set(ForwardedHeader, "n2")
		r.Header.Set(ForwardedToHeader, "n1")
		if inst != "" {
			r.Header.Set(ForwardedInstanceHeader, inst)
		}
		Sign(r, nil, key, at)
		return r
	}
	if err := h.Check(req("before", time.Now()), nil); !errors.Is(err, ErrOtherInstance) {
		t.Fatalf("for another instance: %v", err)
	}
	if err := h.Check(req("", time.Now().Add(-time.Second)), nil); !errors.Is(err, ErrOtherInstance) {
		t.Fatalf("for no instance, signed before the start: %v", err)
	}
	if err := h.Check(req("", time.Now().Add(time.Second)), nil); err != nil {
		t.Fatalf("for no instance, signed after the start: %v", err)
	}
	if err := h.Check(req("now", time.Now()), nil); err != nil {
		t.Fatalf("for this instance: %v", err)
	}
}
