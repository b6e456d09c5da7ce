package wasmhost

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// RouteHeader is the header by which a wasm front hands its request to an
// actor: its value is CLASS/NAME, or CLASS/NAME/PATH, and the response is
// then actors.RouteTo that actor and path (its status and body are not
// sent).
const RouteHeader = "Wasmkeep-Route"

// Front makes m the node's front (actors.Front; wasmkeep serve --front):
// each request outside /actor/ runs as an event of the module's
// wasmkeep_on_request, on one of its shared guests (isolation class) or on
// a guest started for it (isolation actor), any number at once. It has no
// storage: the guest's storage calls fail or find nothing, and so do its
// alarms and sockets; its calls to actors (actor_call), fetches and
// secrets work as an actor's do. A response with RouteHeader hands the
// request to the actor it names.
func Front(m *Module) actors.Front { return &front{m: m} }

type front struct {
	m *Module
	n atomic.Uint64
}

func (f *front) ServeFront(ctx context.Context, req *actors.Request) (*actors.Response, error) {
	// Each request is a member of its own: requests run at once, on the
	// shared guests as separate actors would.
	r := f.m.NewResident(ownership.Actor{Class: f.m.class, Name: fmt.Sprintf("front-%d", f.n.Add(1))})
	defer r.Close()
	resp, err := r.Handle(ctx, req, noStorage{})
	if err != nil || resp == nil {
		return resp, err
	}
	if route := resp.Header.Get(RouteHeader); route != "" {
		parts := strings.SplitN(route, "/", 3)
		if len(parts) < 2 {
			return nil, fmt.Errorf("front %s: route %q: want CLASS/NAME[/PATH]", f.m.class, route)
		}
		path := ""
		if len(parts) == 3 {
			path = "/" + parts[2]
		}
		return actors.RouteTo(ownership.Actor{Class: parts[0], Name: parts[1]}, path), nil
	}
	return resp, nil
}

// noStorage is a front's storage: nothing is in it, and nothing can be put.
type noStorage struct{}

func (noStorage) Get(string) ([]byte, bool)                       { return nil, false }
func (noStorage) Put(string, []byte) error                        { return actors.ErrNotInActor }
func (noStorage) Delete(string)                                   {}
func (noStorage) List(actors.ListOptions) ([]actors.Entry, error) { return nil, actors.ErrNotInActor }
func (noStorage) Batch(...actors.Op) error                        { return actors.ErrNotInActor }
