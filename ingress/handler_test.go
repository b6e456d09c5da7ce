package ingress_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/peer"
)

// fakeKeeper gives every event one decision, and says whether the lease
// is valid.
type fakeKeeper struct {
	d     keeper.Decision
	valid bool
}

func (k fakeKeeper) Status() ownership.Status                    { return ownership.Status{LeaseValid: k.valid} }
func (fakeKeeper) PeerUnreachable(ownership.NodeID)              {}
func (fakeKeeper) RouteFailed(ownership.Actor, ownership.NodeID) {}

// fakeHost dispatches by its keeper's decision: a granted event is
// answered with the actor's name (a panic for the name "panic").
type fakeHost struct{ k fakeKeeper }

func (h fakeHost) Dispatch(_ context.Context, a ownership.Actor, req *actors.Request) (*actors.Response, *actorhost.Elsewhere, error) {
	switch d := h.k.d; d.Verdict {
	case keeper.Routed:
		return nil, &actorhost.Elsewhere{Node: d.Node, Addr: d.Addr}, nil
	case keeper.Refused:
		return nil, nil, &actorhost.UnavailableError{Actor: a, Reason: d.Reason, RetryAfter: d.RetryAfter, NotRun: true}
	}
	if a.Name == "panic" {
		panic("boom")
	}
	return actors.Text(http.StatusOK, a.Name+" "+req.Path), nil, nil
}

func (fakeHost) Take(context.Context, ownership.Actor) (*actorhost.Elsewhere, error) { return nil, nil }

// Routable: the fake serves only the handler's registry, and knows no peer.
func (fakeHost) Routable(context.Context, ownership.Actor) error { return actors.ErrUnknownClass }

func newHandler(t *testing.T, k fakeKeeper) *ingress.Handler {
	t.Helper()
	h, err := ingress.New(ingress.Config{Node: "n1", Keeper: k, Host: fakeHost{k}, Registry: actors.BuiltIn(), MaxBody: 16, FailoverWait: 300 * time.Millisecond, Peers: peersOf(t, k)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func serve(h http.Handler, method, target, body string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestRequests(t *testing.T) {
	granted := fakeKeeper{d: keeper.Decision{Verdict: keeper.Granted, Gen: 1}, valid: true}
	refused := fakeKeeper{d: keeper.Decision{Verdict: keeper.Refused, Reason: "node lease not valid", RetryAfter: 2500 * time.Millisecond}}
	routed := fakeKeeper{d: keeper.Decision{Verdict: keeper.Routed, Node: "n2", Addr: "127.0.0.1:1"}}
	forwarded := http.Header{peer.ForwardedHeader: {"n3"}}
	for _, tc := range []struct {
		name   string
		k      fakeKeeper
		method string
		target string
		body   string
		header http.Header
		status int
		want   string // in the body
		retry  string // Retry-After
	}{
		{"served", granted, "GET", "/actor/counter/a/b/c?x", "", nil, 200, "a /b/c", ""},
		{"escaped name", granted, "POST", "/actor/counter/a%2Fb", "", nil, 200, "a/b ", ""},
		{"empty name", granted, "GET", "/actor/counter/", "", nil, 400, "name is empty", ""},
		{"no name", granted, "GET", "/actor/counter", "", nil, 400, "want /actor/<class>/<name>", ""},
		{"empty class", granted, "GET", "/actor//a", "", nil, 400, "class is empty", ""},
		{"long name", granted, "GET", "/actor/counter/" + strings.Repeat("x", 257), "", nil, 400, "257 bytes, over 256", ""},
		{"control character", granted, "GET", "/actor/counter/a%01b", "", nil, 400, "control character", ""},
		{"invalid utf-8", granted, "GET", "/actor/counter/a%FFb", "", nil, 400, "not UTF-8", ""},
		{"dot segments", granted, "GET", "/actor/counter/../x", "", nil, 200, ".. /x", ""},
		{"unknown class", granted, "GET", "/actor/nope/a", "", nil, 404, `unknown class "nope"`, ""},
		{"body too large", granted, "PUT", "/actor/counter/a", strings.Repeat("b", 17), nil, 413, "body over 16 bytes", ""},
		{"body at the limit", granted, "PUT", "/actor/counter/a", strings.Repeat("b", 16), nil, 200, "a", ""},
		{"method", granted, "PATCH", "/actor/counter/a", "", nil, 405, "method not allowed", ""},
		{"refused", refused, "GET", "/actor/counter/a", "", nil, 503, "node lease not valid", "3"},
		{"no second forward", routed, "GET", "/actor/counter/a", "", forwarded, 503, "already forwarded", "1"},
		{"holder unreachable", routed, "GET", "/actor/counter/a", "", nil, 503, "does not answer (dial tcp 127.0.0.1:1", "1"},
		{"panic", granted, "GET", "/actor/counter/panic", "", nil, 500, "internal error", ""},
		{"healthz", refused, "GET", "/healthz", "", nil, 200, "ok", ""},
		{"readyz", granted, "GET", "/readyz", "", nil, 200, "ready", ""},
		{"not ready", refused, "GET", "/readyz", "", nil, 503, "lease not valid", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(newHandler(t, tc.k), tc.method, tc.target, tc.body, tc.header)
			body, _ := io.ReadAll(w.Body)
			if w.Code != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("%s %s: %d %q, want %d containing %q", tc.method, tc.target, w.Code, body, tc.status, tc.want)
			}
			if got := w.Header().Get("Retry-After"); got != tc.retry {
				t.Errorf("Retry-After %q, want %q", got, tc.retry)
			}
		})
	}
}

// peersOf is the peer client of node n1 whose keeper is k.
func peersOf(t *testing.T, k peer.Keeper) *peer.Client {
	t.Helper()
	c, err := peer.New(peer.Config{Node: "n1", Keeper: k})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
