package actorhost_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// perActor is a ResidentClass whose actors count their own events in
// memory, and report each residency's end.
type perActor struct {
	closed chan string
}

func (perActor) Handle(context.Context, *actors.Request, actors.Storage) (*actors.Response, error) {
	panic("Handle of a ResidentClass called")
}

func (p perActor) NewResident(a ownership.Actor) actors.Resident {
	return &perResident{name: a.Name, closed: p.closed}
}

type perResident struct {
	name   string
	events int
	closed chan string
}

func (c *perResident) Handle(context.Context, *actors.Request, actors.Storage) (*actors.Response, error) {
	c.events++
	return actors.Text(http.StatusOK, c.name+" "+strconv.Itoa(c.events)), nil
}

func (c *perResident) Close() { c.closed <- c.name }

// TestResidentClass: each resident actor of a ResidentClass gets its own
// handler for its residency, closed when it stops being resident.
func TestResidentClass(t *testing.T) {
	closed := make(chan string, 4)
	reg := actors.NewRegistry()
	if err := reg.Register("per", perActor{closed: closed}); err != nil {
		t.Fatal(err)
	}
	h, err := actorhost.New(actorhost.Config{
		Keeper: &fakeKeeper{}, Bucket: memstore.New(memstore.Faults{}), Registry: reg,
		System: keeper.NewSystem(nil), MaxResident: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(name, want string) {
		t.Helper()
		resp, err := h.Deliver(t.Context(), ownership.Actor{Class: "per", Name: name}, 1, get(""))
		if err != nil || string(resp.Body) != want {
			t.Fatalf("event for %s = %v, %v; want %q", name, resp, err, want)
		}
	}
	deliver("a", "a 1")
	deliver("b", "b 1")
	deliver("a", "a 2")
	deliver("c", "c 1") // evicts b, the least recently used
	if got := <-closed; got != "b" {
		t.Fatalf("closed %q, want b", got)
	}
	deliver("b", "b 1") // a new residency, a new handler; evicts a
	if got := <-closed; got != "a" {
		t.Fatalf("closed %q, want a", got)
	}
	if err := h.HibernateAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{<-closed: true, <-closed: true}
	if !got["b"] || !got["c"] {
		t.Fatalf("closed at stop %v, want b and c", got)
	}
}
