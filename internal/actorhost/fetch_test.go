package actorhost_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// fetcher is a class whose events store their body under "note", fetch
// the URL of their query's "url", and store what came back under "got".
func fetcher() actors.ClassFunc {
	return func(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
		if err := st.Put("note", req.Body); err != nil {
			return nil, err
		}
		resp, err := actors.Fetch(ctx, &actors.FetchRequest{URL: req.Query.Get("url")})
		if err != nil {
			return nil, err
		}
		if err := st.Put("got", resp.Body); err != nil {
			return nil, err
		}
		return &actors.Response{Status: resp.Status, Body: resp.Body}, nil
	}
}

// TestFetchIsACommitPoint: the event's writes before a fetch are in the
// bucket when the request reaches the service, which reads them there.
func TestFetchIsACommitPoint(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	a := ownership.Actor{Class: "fetcher", Name: "f"}
	var seen atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		snap, err := actorstore.ReadActor(r.Context(), b, a)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		v, _, err := snap.Get(r.Context(), "note")
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		seen.Store(string(v))
		w.Write([]byte("saw " + string(v)))
	}))
	defer srv.Close()
	reg := actors.NewRegistry()
	reg.Register("fetcher", fetcher())
	allow, err := egress.ParseAllow([]string{"127.0.0.1"})
	require.NoError(t, err)
	f, err := egress.New(egress.Config{Allow: allow})
	require.NoError(t, err)
	h := hostOf(t, actorhost.Config{Bucket: b, Registry: reg, Fetcher: f})

	req := &actors.Request{Method: http.MethodPost, Header: http.Header{}, Query: map[string][]string{"url": {srv.URL}}, Body: []byte("first")}
	resp, err := h.Deliver(t.Context(), a, 1, req)
	require.NoError(t, err)
	require.Equal(t, "saw first", string(resp.Body))
	require.Equal(t, "first", seen.Load(), "the service read the write made before the fetch")
	snap, err := actorstore.ReadActor(t.Context(), b, a)
	require.NoError(t, err)
	got, _, err := snap.Get(t.Context(), "got")
	require.NoError(t, err)
	require.Equal(t, "saw first", string(got), "the write after the fetch committed at the event's end")
}

// TestFetchRefusedCommitsNothing: a request the allow-list refuses (or a
// node with no egress) fails the event before anything is committed or
// sent; a request sent that fails leaves the event's outcome unknown.
func TestFetchRefusedCommitsNothing(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	a := ownership.Actor{Class: "fetcher", Name: "f"}
	reg := actors.NewRegistry()
	reg.Register("fetcher", fetcher())
	f, err := egress.New(egress.Config{})
	require.NoError(t, err)
	for _, fc := range []actorhost.Fetcher{nil, f} {
		h := hostOf(t, actorhost.Config{Bucket: b, Registry: reg, Fetcher: fc, ErrorsInAnswers: true})
		req := &actors.Request{Method: http.MethodPost, Header: http.Header{}, Query: map[string][]string{"url": {"http://127.0.0.1:1/"}}, Body: []byte("x")}
		resp, err := h.Deliver(t.Context(), a, 1, req)
		require.NoError(t, err)
		require.Equal(t, http.StatusInternalServerError, resp.Status)
		require.Contains(t, string(resp.Body), actors.ErrFetchRefused.Error())
		snap, err := actorstore.ReadActor(t.Context(), b, a)
		require.NoError(t, err)
		require.False(t, snap.Exists(), "nothing was committed")
	}

	allow, err := egress.ParseAllow([]string{"127.0.0.1"})
	require.NoError(t, err)
	f, err = egress.New(egress.Config{Allow: allow})
	require.NoError(t, err)
	h := hostOf(t, actorhost.Config{Bucket: b, Registry: reg, Fetcher: f, ErrorsInAnswers: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler) // the connection drops: no answer
	}))
	defer srv.Close()
	req := &actors.Request{Method: http.MethodPost, Header: http.Header{}, Query: map[string][]string{"url": {srv.URL}}, Body: []byte("y")}
	resp, err := h.Deliver(t.Context(), a, 1, req)
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, resp.Status, "the class failed the event")
	require.Contains(t, string(resp.Body), actors.ErrFetchFailed.Error())
	snap, err := actorstore.ReadActor(t.Context(), b, a)
	require.NoError(t, err)
	note, _, err := snap.Get(t.Context(), "note")
	require.NoError(t, err)
	require.Equal(t, "y", string(note), "what the event wrote before the fetch stays: it was committed before the request left")
}

// TestFetchKeyedRetry: an event with a client's key that sent a request
// and then failed is kept as having taken effect in part: a retry with the
// same key is not run again, so the request is not sent twice.
func TestFetchKeyedRetry(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	reg := actors.NewRegistry()
	reg.Register("fetcher", fetcher())
	allow, err := egress.ParseAllow([]string{"127.0.0.1"})
	require.NoError(t, err)
	f, err := egress.New(egress.Config{Allow: allow})
	require.NoError(t, err)
	h := hostOf(t, actorhost.Config{Bucket: memstore.New(memstore.Faults{}), Registry: reg, Fetcher: f})
	a := ownership.Actor{Class: "fetcher", Name: "f"}
	for range 2 {
		ctx := actorhost.WithEventKey(t.Context(), actorhost.ClientKey("charge-1", 7))
		req := &actors.Request{Method: http.MethodPost, Header: http.Header{}, Query: map[string][]string{"url": {srv.URL}}, Body: []byte("z")}
		resp, err := h.Deliver(ctx, a, 1, req)
		require.NoError(t, err)
		require.Equal(t, http.StatusInternalServerError, resp.Status)
	}
	require.EqualValues(t, 1, hits.Load(), "the retry with the same key did not send the request again")
}
