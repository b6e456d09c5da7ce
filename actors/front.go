package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// The front. A node may have a Front: a stateless handler for every
// request outside /actor/ (the node's own paths, /healthz, /readyz,
// /metrics, /status and /debug/, aside). It runs on whichever node the
// request reaches, any number of requests at once, with no storage of its
// own; it reaches actors with Call (and services with Fetch), wherever
// they live, and may hand the request, a WebSocket upgrade included, to an
// actor with RouteTo. A call from any node's front to a room that
// hibernated with its sockets on another node wakes it there.
//
// In a front's context, Call and Fetch work as in an actor's event, except
// that nothing is committed first (a front has no writes); ActorOf is the
// zero Actor, SocketsOf does nothing, and the alarms, SQL and DialSocket
// fail with ErrNotInActor.

// Front serves the requests outside /actor/. req.Path is the request's
// whole path. An error answers 500 (with its text when the node shows
// errors), as a class's does.
type Front interface {
	ServeFront(ctx context.Context, req *Request) (*Response, error)
}

// FrontFunc is a Front made of a function.
type FrontFunc func(ctx context.Context, req *Request) (*Response, error)

// ServeFront calls f.
func (f FrontFunc) ServeFront(ctx context.Context, req *Request) (*Response, error) {
	return f(ctx, req)
}

// ErrNotInActor is matched (errors.Is) by what only an actor's event can
// do (storage, alarms, SQL, sockets of its own) asked of a front.
var ErrNotInActor = errors.New("not in an actor's event: a front has no storage, alarms or sockets of its own")

// Route is where a front hands its request: the actor, and the path
// under it ("" or starting with "/").
type Route struct {
	Actor ownership.Actor
	Path  string
}

// RouteTo is a front's response that hands the request, as it came (its
// method, query, headers and body; a WebSocket upgrade too), to actor to
// at path: the node serves it as a request for
// /actor/<class>/<name><path>, on the node that holds the actor, and its
// answer (or its socket) is the client's.
func RouteTo(to ownership.Actor, path string) *Response {
	return &Response{Route: &Route{Actor: to, Path: path}}
}

// CheckRoute reports what is wrong with a front's route, if anything.
func CheckRoute(r *Route) error {
	switch {
	case r.Actor.Class == "" || r.Actor.Name == "":
		return fmt.Errorf("route to %q: a class and a name are required", r.Actor)
	case strings.Contains(r.Actor.Class, "/") || strings.Contains(r.Actor.Name, "/"):
		return fmt.Errorf("route to %q: a class or name with a slash", r.Actor)
	case r.Path != "" && !strings.HasPrefix(r.Path, "/"):
		return fmt.Errorf("route path %q: want \"\" or one starting with /", r.Path)
	}
	return nil
}
