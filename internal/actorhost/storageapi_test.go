package actorhost_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// routes is a class whose events are chosen by the request's path.
type routes map[string]func(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error)

func (r routes) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if f, ok := r[req.Path]; ok {
		return f(ctx, req, st)
	}
	switch {
	case strings.HasPrefix(req.Path, "/put/"):
		// /put/<key>/<value>
		k, v, _ := strings.Cut(strings.TrimPrefix(req.Path, "/put/"), "/")
		if err := st.Put(k, []byte(v)); err != nil {
			return nil, err
		}
		return actors.Text(http.StatusOK, "put"), nil
	case req.Path == "/dump":
		return actors.Text(http.StatusOK, dump(st)), nil
	}
	return actors.Text(http.StatusNotFound, "no route "+req.Path), nil
}

// dump is every entry of st as the event sees it: k=v, comma-separated.
func dump(st actors.Storage) string {
	entries, err := st.List(actors.ListOptions{})
	if err != nil {
		return "error: " + err.Error()
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Key + "=" + string(e.Value)
	}
	return strings.Join(out, ",")
}

// storeHost is a host serving class "store" with r, whose actors' state is
// bounded by maxState (0: the default).
func storeHost(t *testing.T, b ownership.Bucket, r routes, maxState int) *actorhost.Host {
	t.Helper()
	reg := actors.NewRegistry()
	require.NoError(t, reg.Register("store", r))
	return hostOf(t, actorhost.Config{Bucket: b, Registry: reg, MaxState: maxState})
}

var store = ownership.Actor{Class: "store", Name: "s"}

// deliver runs one GET of path on the store actor at gen.
func deliver(t *testing.T, h *actorhost.Host, gen ownership.Generation, path string) *actors.Response {
	t.Helper()
	resp, err := h.Deliver(t.Context(), store, gen, &actors.Request{Method: http.MethodGet, Path: path, Header: http.Header{}})
	require.NoError(t, err, path)
	return resp
}

// durable is what the bucket holds for the store actor, read by another
// host (another node) at a later generation.
func durable(t *testing.T, b ownership.Bucket, r routes, gen ownership.Generation) string {
	t.Helper()
	return string(deliver(t, storeHost(t, b, r, 0), gen, "/dump").Body)
}

// stateETag is the version of the store actor's state object.
func stateETag(t *testing.T, b ownership.Bucket) ownership.ETag {
	t.Helper()
	obj, err := b.Get(t.Context(), actorstore.StateKey(store))
	require.NoError(t, err)
	return obj.ETag
}

// GetMany reads several keys in one call, seeing the event's own writes
// and deletes; a key without a value is left out, and the values are the
// event's copies.
func TestGetMany(t *testing.T) {
	r := routes{
		"/seed": func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			return actors.Text(http.StatusOK, "seeded"), st.Batch(actors.Op{Key: "a", Value: []byte("1")}, actors.Op{Key: "b", Value: []byte("2")})
		},
		"/get": func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			if err := st.Put("c", []byte("3")); err != nil {
				return nil, err
			}
			st.Delete("b")
			vals := actors.GetMany(st, "a", "b", "c", "missing", "a")
			var out []string
			for k, v := range vals {
				out = append(out, k+"="+string(v))
			}
			slices.Sort(out)
			vals["a"][0] = 'X' // a copy: storage keeps its own
			a, _ := st.Get("a")
			return actors.Text(http.StatusOK, strings.Join(out, ",")+" a="+string(a)), nil
		},
	}
	h := storeHost(t, memstore.New(memstore.Faults{}), r, 0)
	deliver(t, h, 1, "/seed")
	resp := deliver(t, h, 1, "/get")
	assert.Equal(t, "a=1,c=3 a=1", string(resp.Body))
	assert.Empty(t, actors.GetMany(nil), "no keys, no values (and no storage asked)")
}

// DeleteAll removes every key, the event's own earlier writes included;
// the event's puts after it stay, and all of it commits as one.
func TestDeleteAllWithPuts(t *testing.T) {
	r := routes{
		"/wipe": func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			if err := st.Put("c", []byte("3")); err != nil {
				return nil, err
			}
			if err := actors.DeleteAll(st); err != nil {
				return nil, err
			}
			before := dump(st)
			if err := st.Put("d", []byte("4")); err != nil {
				return nil, err
			}
			return actors.Text(http.StatusOK, "after DeleteAll: "+before), nil
		},
	}
	b := memstore.New(memstore.Faults{})
	h := storeHost(t, b, r, 0)
	deliver(t, h, 1, "/put/a/1")
	deliver(t, h, 1, "/put/b/2")
	assert.Equal(t, "after DeleteAll: ", string(deliver(t, h, 1, "/wipe").Body))
	assert.Equal(t, "d=4", string(deliver(t, h, 1, "/dump").Body))
	assert.Equal(t, "d=4", durable(t, b, r, 2), "the bucket after DeleteAll and a put in one event")
}

// An event that fails, or rolls back, after DeleteAll leaves every key as
// it was: nothing of it reaches the bucket.
func TestDeleteAllDiscarded(t *testing.T) {
	wipeThen := func(end func() (*actors.Response, error)) func(context.Context, *actors.Request, actors.Storage) (*actors.Response, error) {
		return func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			if err := actors.DeleteAll(st); err != nil {
				return nil, err
			}
			if err := st.Put("new", []byte("x")); err != nil {
				return nil, err
			}
			return end()
		}
	}
	r := routes{
		"/wipe-fail": wipeThen(func() (*actors.Response, error) { return nil, errors.New("boom") }),
		"/wipe-rollback": wipeThen(func() (*actors.Response, error) {
			return nil, actors.Rollback(actors.Text(http.StatusConflict, "kept"))
		}),
	}
	b := memstore.New(memstore.Faults{})
	h := storeHost(t, b, r, 0)
	deliver(t, h, 1, "/put/a/1")
	deliver(t, h, 1, "/put/b/2")
	etag := stateETag(t, b)

	resp := deliver(t, h, 1, "/wipe-fail")
	assert.Equal(t, http.StatusInternalServerError, resp.Status)
	resp = deliver(t, h, 1, "/wipe-rollback")
	assert.Equal(t, http.StatusConflict, resp.Status)
	assert.Equal(t, "kept", string(resp.Body))

	assert.Equal(t, "a=1,b=2", string(deliver(t, h, 1, "/dump").Body))
	assert.Equal(t, etag, stateETag(t, b), "a discarded event wrote the state object")
	assert.Equal(t, "a=1,b=2", durable(t, b, r, 2))
}

// What DeleteAll frees counts at once against the state bound: a put that
// would not fit beside the old keys fits after it, in the same event, and
// the limits still hold after it.
func TestDeleteAllMakesRoom(t *testing.T) {
	big := strings.Repeat("v", 60)
	r := routes{
		"/add": func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			return actors.Text(http.StatusOK, "added"), st.Put("b", []byte(big))
		},
		"/replace": func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			if err := actors.DeleteAll(st); err != nil {
				return nil, err
			}
			return actors.Text(http.StatusOK, "replaced"), st.Batch(actors.Op{Key: "b", Value: []byte(big)})
		},
		"/replace-too-big": func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			if err := actors.DeleteAll(st); err != nil {
				return nil, err
			}
			return actors.Text(http.StatusOK, "replaced"), st.Batch(actors.Op{Key: "b", Value: []byte(big)}, actors.Op{Key: "c", Value: []byte(big)})
		},
	}
	b := memstore.New(memstore.Faults{})
	h := storeHost(t, b, r, 100)
	deliver(t, h, 1, "/put/a/"+big)

	resp := deliver(t, h, 1, "/add")
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.Status)
	assert.Contains(t, string(resp.Body), "state would be 122 bytes, over 100")

	resp = deliver(t, h, 1, "/replace-too-big")
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.Status)
	assert.Contains(t, string(resp.Body), "batch op 1: storage limit: state would be 122 bytes, over 100")
	assert.Equal(t, "a="+big, string(deliver(t, h, 1, "/dump").Body), "the refused event deleted the keys")

	resp = deliver(t, h, 1, "/replace")
	assert.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	assert.Equal(t, "b="+big, durable(t, b, r, 2))
}

// A rolled-back event answers what the class chose (status, headers,
// body), also when the rollback comes back wrapped, and writes nothing:
// neither the working state nor the bucket has its writes.
func TestRollbackAnswersAndDiscards(t *testing.T) {
	writeThen := func(end func() (*actors.Response, error)) func(context.Context, *actors.Request, actors.Storage) (*actors.Response, error) {
		return func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			if err := st.Batch(actors.Op{Key: "v", Value: []byte("rolled back")}, actors.Op{Key: "other", Value: []byte("x")}); err != nil {
				return nil, err
			}
			st.Delete("kept")
			return end()
		}
	}
	chosen := func() *actors.Response {
		r := actors.Text(http.StatusConflict, "taken\n")
		r.Header.Set("X-Why", "name in use")
		return r
	}
	r := routes{
		"/rollback": writeThen(func() (*actors.Response, error) { return nil, actors.Rollback(chosen()) }),
		"/wrapped": writeThen(func() (*actors.Response, error) {
			return nil, fmt.Errorf("deep in the handler: %w", actors.Rollback(chosen()))
		}),
		"/status-zero": writeThen(func() (*actors.Response, error) {
			return nil, actors.Rollback(&actors.Response{Body: []byte("fine, nothing written")})
		}),
		// The error wins over a response returned beside it.
		"/beside": writeThen(func() (*actors.Response, error) {
			return actors.Text(http.StatusOK, "ignored"), actors.Rollback(chosen())
		}),
	}
	b := memstore.New(memstore.Faults{})
	h := storeHost(t, b, r, 0)
	deliver(t, h, 1, "/put/v/first")
	deliver(t, h, 1, "/put/kept/k")
	etag := stateETag(t, b)

	for _, path := range []string{"/rollback", "/wrapped", "/beside"} {
		resp := deliver(t, h, 1, path)
		assert.Equal(t, http.StatusConflict, resp.Status, path)
		assert.Equal(t, "taken\n", string(resp.Body), path)
		assert.Equal(t, "name in use", resp.Header.Get("X-Why"), path)
		assert.Equal(t, "kept=k,v=first", string(deliver(t, h, 1, "/dump").Body), "after %s", path)
	}
	resp := deliver(t, h, 1, "/status-zero")
	assert.Equal(t, http.StatusOK, resp.Status)
	assert.Equal(t, "fine, nothing written", string(resp.Body))

	assert.Equal(t, etag, stateETag(t, b), "a rolled-back event wrote the state object")
	assert.Equal(t, "kept=k,v=first", durable(t, b, r, 2))

	err := fmt.Errorf("wrapped: %w", actors.Rollback(nil))
	assert.ErrorIs(t, err, actors.ErrRollback)
	assert.NotErrorIs(t, errors.New("other"), actors.ErrRollback)
}

// A rollback without a response, or with one that accepts a WebSocket,
// fails the event with 500: its writes are discarded all the same.
func TestRollbackWithoutAnAnswerFails(t *testing.T) {
	writeThen := func(resp *actors.Response) func(context.Context, *actors.Request, actors.Storage) (*actors.Response, error) {
		return func(_ context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			if err := st.Put("v", []byte("rolled back")); err != nil {
				return nil, err
			}
			return nil, actors.Rollback(resp)
		}
	}
	r := routes{"/nil": writeThen(nil), "/accept": writeThen(actors.AcceptSocket("t"))}
	b := memstore.New(memstore.Faults{})
	h := storeHost(t, b, r, 0)
	deliver(t, h, 1, "/put/v/first")
	for _, path := range []string{"/nil", "/accept"} {
		resp := deliver(t, h, 1, path)
		assert.Equal(t, http.StatusInternalServerError, resp.Status, path)
		assert.Nil(t, resp.Accept, path)
		assert.Equal(t, "v=first", string(deliver(t, h, 1, "/dump").Body), "after %s", path)
	}
	assert.Equal(t, "v=first", durable(t, b, r, 2))
}

// A rollback after a call discards only what the event wrote after it:
// the call was a commit point, and the writes before it are durable.
func TestRollbackAfterCall(t *testing.T) {
	reg := relayRegistry(t)
	require.NoError(t, reg.Register("store", routes{
		"/call": func(ctx context.Context, _ *actors.Request, st actors.Storage) (*actors.Response, error) {
			if err := st.Put("before", []byte("1")); err != nil {
				return nil, err
			}
			resp, err := actors.Call(ctx, ownership.Actor{Class: "relay", Name: "b"}, &actors.Request{Method: http.MethodGet})
			if err != nil {
				return nil, err
			}
			if err := st.Put("after", []byte("1")); err != nil {
				return nil, err
			}
			return nil, actors.Rollback(actors.Text(http.StatusConflict, "callee said "+string(resp.Body)))
		},
	}))
	b := memstore.New(memstore.Faults{})
	h := newCallHost(t, b, &fakeKeeper{}, reg, &localCaller{})
	resp := deliver(t, h, 1, "/call")
	assert.Equal(t, http.StatusConflict, resp.Status)
	assert.Equal(t, "callee said v= served=1", string(resp.Body))
	assert.Equal(t, "before=1", string(deliver(t, h, 1, "/dump").Body))
	assert.Equal(t, "before=1", durable(t, b, routes{}, 2))
}

// ActorOf names the actor of the event, its own in a call it serves, and
// no actor outside an event.
func TestActorOf(t *testing.T) {
	reg := actors.NewRegistry()
	require.NoError(t, reg.Register("who", actors.ClassFunc(func(ctx context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
		me := actors.ActorOf(ctx)
		if name, ok := strings.CutPrefix(req.Path, "/call/"); ok {
			resp, err := actors.Call(ctx, ownership.Actor{Class: "who", Name: name}, &actors.Request{Method: http.MethodGet})
			if err != nil {
				return nil, err
			}
			return actors.Text(http.StatusOK, me.String()+" called "+string(resp.Body)), nil
		}
		return actors.Text(http.StatusOK, me.String()), nil
	})))
	h := newCallHost(t, memstore.New(memstore.Faults{}), &fakeKeeper{}, reg, &localCaller{})
	get := func(name, path string) string {
		resp, err := h.Deliver(t.Context(), ownership.Actor{Class: "who", Name: name}, 1, &actors.Request{Method: http.MethodGet, Path: path})
		require.NoError(t, err)
		return string(resp.Body)
	}
	assert.Equal(t, "who/ada", get("ada", ""))
	assert.Equal(t, "who/a b", get("a b", ""))
	assert.Equal(t, "who/ada called who/bob", get("ada", "/call/bob"))
	assert.Equal(t, ownership.Actor{}, actors.ActorOf(t.Context()))
}
