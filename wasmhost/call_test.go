package wasmhost

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// hostCaller routes calls to the actors of one host at generation 1, as a
// node routes those it holds; a name "bad" is refused as a node refuses a
// bad name. It records the caller's state as each call leaves.
type hostCaller struct {
	bucket ownership.Bucket
	seen   []string
}

func (c *hostCaller) Call(ctx context.Context, here *actorhost.Host, to ownership.Actor, req *actors.Request) (*actors.Response, error) {
	if to.Name == "bad" {
		return nil, fmt.Errorf("call: %w: name", actors.ErrBadCall)
	}
	obj, err := c.bucket.Get(ctx, actorstore.StateKey(ownership.Actor{Class: "probe", Name: "a"}))
	c.seen = append(c.seen, fmt.Sprint(string(obj.Body), err))
	return here.Deliver(ctx, to, 1, req)
}

// TestGuestCall: a wasm actor calls a Go actor and reads its answer;
// its writes before the call are durable as the call leaves; cycles,
// unknown classes and refused calls come back as the SDK's errors.
func TestGuestCall(t *testing.T) {
	reg := probeRegistry(t, Config{})
	ctx := context.Background()
	echo := func(_ context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
		resp := actors.Text(http.StatusAccepted, fmt.Sprintf("%s %s k=%s %s", req.Method, req.Path, req.Query.Get("k"), req.Body))
		resp.Header.Set("X-Echo", req.Header.Get("X-Token"))
		return resp, nil
	}
	if err := reg.Register("echo", actors.ClassFunc(echo)); err != nil {
		t.Fatal(err)
	}
	bucket := memstore.New(memstore.Faults{})
	c := &hostCaller{bucket: bucket}
	h, err := actorhost.New(actorhost.Config{Keeper: anyKeeper{}, Bucket: bucket, Registry: reg, System: keeper.NewSystem(nil), Caller: c})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.HibernateAll(ctx) }()
	a := ownership.Actor{Class: "probe", Name: "a"}
	call := func(query, want string) {
		t.Helper()
		req := post("/call", query, "payload")
		req.Header.Set("X-Token", "tok")
		resp, err := h.Deliver(t.Context(), a, 1, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(resp.Body); resp.Status != http.StatusOK || got != want {
			t.Fatalf("call ?%s = %d %q, want 200 %q", query, resp.Status, got, want)
		}
	}
	call("class=echo&name=x&path=/p%20q&q=k%3Dv", "202 tok POST /p q k=v payload")
	if len(c.seen) != 1 || !strings.Contains(c.seen[0], "before-call") {
		t.Fatalf("the caller's state as the call left: %q; want its write before-call in it", c.seen)
	}
	call("class=probe&name=a", "error: guest: actor call cycle")
	call("class=nope&name=x", "error: guest: unknown class")
	call("class=echo&name=bad", "error: guest: bad actor call")
	// The probe's guest served every event: no call broke it.
	resp, err := h.Deliver(t.Context(), a, 1, get("/events", ""))
	if err != nil || string(resp.Body) != "5" {
		t.Fatalf("events after the calls: %v %v; want 5 on one guest", resp, err)
	}
}

// TestGuestFetch: a wasm actor sends an outbound request and reads its
// answer; its writes before the request are durable as it arrives; the
// allow-list's refusals, bad requests, bodies over their bounds and
// requests with no answer come back as the SDK's errors.
func TestGuestFetch(t *testing.T) {
	reg := probeRegistry(t, Config{})
	ctx := context.Background()
	bucket := memstore.New(memstore.Faults{})
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/drop" {
			panic(http.ErrAbortHandler)
		}
		if r.URL.Path == "/big" {
			w.Write(make([]byte, 2048))
			return
		}
		obj, err := bucket.Get(r.Context(), actorstore.StateKey(ownership.Actor{Class: "probe", Name: "a"}))
		seen = append(seen, fmt.Sprint(string(obj.Body), err))
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Header.Get("X-Token"))
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	}))
	defer srv.Close()
	allow, err := egress.ParseAllow([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := egress.New(egress.Config{Allow: allow, MaxResponseBody: 1024})
	if err != nil {
		t.Fatal(err)
	}
	h, err := actorhost.New(actorhost.Config{Keeper: anyKeeper{}, Bucket: bucket, Registry: reg, System: keeper.NewSystem(nil), Fetcher: f})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.HibernateAll(ctx) }()
	a := ownership.Actor{Class: "probe", Name: "a"}
	fetch := func(query, want string) {
		t.Helper()
		req := post("/fetch", query, "payload")
		req.Header.Set("X-Token", "tok")
		resp, err := h.Deliver(t.Context(), a, 1, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(resp.Body); resp.Status != http.StatusOK || got != want {
			t.Fatalf("fetch ?%s = %d %q, want 200 %q", query, resp.Status, got, want)
		}
	}
	fetch("method=PUT&url="+url.QueryEscape(srv.URL+"/p"), "202 tok PUT /p payload")
	if len(seen) != 1 || !strings.Contains(seen[0], "before-fetch") {
		t.Fatalf("the actor's state as the request arrived: %q; want its write before-fetch in it", seen)
	}
	fetch("url="+url.QueryEscape("http://10.1.2.3/"), "error: guest: outbound request refused by the egress allow-list")
	fetch("url="+url.QueryEscape("ftp://127.0.0.1/"), "error: guest: bad outbound request")
	fetch("url="+url.QueryEscape(srv.URL+"/big"), "error: guest: outbound request body over its limit")
	fetch("url="+url.QueryEscape(srv.URL+"/drop"), "error: guest: outbound request failed")
	resp, err := h.Deliver(t.Context(), a, 1, get("/events", ""))
	if err != nil || string(resp.Body) != "6" {
		t.Fatalf("events after the fetches: %v %v; want 6 on one guest", resp, err)
	}
}
