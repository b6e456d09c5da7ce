package actors_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
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
func storeHost(t *testing.T, b ownership.Bucket, r routes, maxState int) *actors.Host {
	t.Helper()
	reg := actors.NewRegistry()
	require.NoError(t, reg.Register("store", r))
	h, err := actors.NewHost(actors.Config{Keeper: &fakeKeeper{}, Bucket: b, Registry: reg, System: keeper.NewSystem(nil), MaxState: maxState})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.HibernateAll(context.Background())) })
	return h
}

var store = ownership.Actor{Class: "store", Name: "s"}

// deliver runs one GET of path on the store actor at gen.
func deliver(t *testing.T, h *actors.Host, gen ownership.Generation, path string) *actors.Response {
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
