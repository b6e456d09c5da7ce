package wasmhost

import (
	"context"
	"net/http"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// TestGuestbookGuest runs the SQL guest of docs/CLASSES.md (testdata/guestbook) on
// an actorhost.Host, with the requests and answers docs/CLASSES.md shows, and its rows
// after a restart on the same bucket.
func TestGuestbookGuest(t *testing.T) {
	r := newRuntime(t, Config{})
	m := mustCompile(t, r, "guestbook-wasm", guest(t, "./testdata/guestbook"))
	reg := actors.NewRegistry()
	if err := reg.Register("guestbook-wasm", m); err != nil {
		t.Fatal(err)
	}
	bucket := memstore.New(memstore.Faults{})
	var h *actorhost.Host
	start := func() {
		t.Helper()
		var err error
		h, err = actorhost.New(actorhost.Config{Keeper: anyKeeper{}, Bucket: bucket, Registry: reg, System: keeper.NewSystem(nil)})
		if err != nil {
			t.Fatal(err)
		}
	}
	expect := func(req *actors.Request, want string) {
		t.Helper()
		resp, err := h.Deliver(t.Context(), ownership.Actor{Class: "guestbook-wasm", Name: "hotel"}, 1, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusOK || string(resp.Body) != want {
			t.Fatalf("%s ?%s = %d %q, want %q", req.Method, req.Query.Encode(), resp.Status, resp.Body, want)
		}
	}
	start()
	expect(post("", "who=ada", "lovely room"), "entry 1\n")
	expect(post("", "who=bob", "the stairs!"), "entry 2\n")
	expect(post("", "who=ada", "again"), "entry 3\n")
	expect(get("", "who=a"), "ada: lovely room\nada: again\n")
	if err := h.HibernateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	start()
	defer func() { _ = h.HibernateAll(context.Background()) }()
	expect(get("", ""), "ada: lovely room\nbob: the stairs!\nada: again\n")
}
