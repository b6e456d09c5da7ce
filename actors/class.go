package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Handler runs actors' HTTP events. Handle runs one event of one actor;
// events of one actor never run concurrently. Writes to st become durable
// together when Handle returns without error, and are discarded otherwise:
// an error answers 500, logged, or 413 when it wraps ErrLimit, and
// Rollback's answers the response the class chose. ActorOf(ctx) names the
// actor. Handle must not keep st, req or the response after it returns. A
// nil response with a nil error fails the event with 500 (its writes
// discarded, the failure logged), as a wasm guest's nil response does.
//
// A Class is a Handler for every actor of the class; a Resident is one
// for one actor, during one residency.
type Handler interface {
	Handle(ctx context.Context, req *Request, st Storage) (*Response, error)
}

// Class is a Go-native actor class: the code of a kind of actor, which
// handles the events of every actor of the kind (Handler), unless it is a
// ResidentClass. A Registry maps class names to Classes.
type Class interface {
	Handler
}

// ResidentClass is implemented by classes that keep resources per resident
// actor (a wasm class keeps a guest per actor, or a place on a shared
// one). When an actor of such a class becomes resident, the node calls
// NewResident once, on the actor's goroutine before its first event, and
// sends every event of that residency to the returned Resident instead of
// the class; it calls Close on the same goroutine when the actor stops
// being resident (hibernation, eviction, a move or a drain, the node's
// stop). The Class's own Handle is then not called.
type ResidentClass interface {
	Class
	NewResident(a ownership.Actor) Resident
}

// Resident is an actor's in-memory object for one residency: it handles
// the events of that residency; see ResidentClass. It is called from one
// goroutine at a time.
type Resident interface {
	Handler
	// Close releases what the actor held; nothing is called after it.
	Close()
}

// ClassFunc adapts a function to Class.
type ClassFunc func(ctx context.Context, req *Request, st Storage) (*Response, error)

// Handle calls f.
func (f ClassFunc) Handle(ctx context.Context, req *Request, st Storage) (*Response, error) {
	return f(ctx, req, st)
}

// Request is one HTTP event for an actor.
type Request struct {
	Method string
	// Path is what follows /actor/<class>/<name> in the URL path ("" or
	// "/..."), unescaped.
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
}

// IsUpgrade says whether r asks to open a WebSocket: a GET whose
// Upgrade header is websocket and whose Connection header names upgrade.
// A class that takes WebSockets answers it with AcceptSocket.
func (r *Request) IsUpgrade() bool {
	if r.Method != http.MethodGet || !strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), "websocket") {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// ActorOf returns the actor whose event ctx belongs to (the context Handle
// or HandleSocket was given, or one derived from it): its class, as
// registered, and its name. Outside an event it is the zero Actor.
func ActorOf(ctx context.Context) ownership.Actor {
	if ev := eventOf(ctx); ev != nil {
		return ev.Actor()
	}
	return ownership.Actor{}
}

// Rollback returns the error with which Handle discards the event's writes
// and still answers resp, status, headers and body, as the class chose. It
// is found wrapped too (errors.As), so code deep in a handler may return
// it. Everything else is as for a failed event: the storage is as before
// the event (its writes before a Call it made are durable already, and
// stay), and what it queued on its sockets (sends, broadcasts, closes) is
// not carried out, since it could tell of the discarded writes; attachments
// and auto-responses were set at once and stay. Nothing is logged. A nil
// resp, or one that accepts a WebSocket, fails the event with 500. From
// HandleSocket, which has no response, it discards the event's writes and
// output without logging a failure.
func Rollback(resp *Response) error { return &rollbackError{resp: resp} }

// ErrRollback is matched (errors.Is) by the errors Rollback returns.
var ErrRollback = errors.New("event rolled back")

type rollbackError struct{ resp *Response }

func (e *rollbackError) Error() string {
	if e.resp == nil {
		return "event rolled back, with no response"
	}
	return fmt.Sprintf("event rolled back, answering %d", cmp.Or(e.resp.Status, http.StatusOK))
}

func (e *rollbackError) Is(target error) bool { return target == ErrRollback }

// RollbackResponse is the response the class chose to answer (the node
// finds it with errors.As).
func (e *rollbackError) RollbackResponse() *Response { return e.resp }

// Response is an actor's answer to a Request. Status 0 means 200.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Accept, when set, upgrades the request to a WebSocket owned by the
	// node (see AcceptSocket); Status, Header and Body are then not sent.
	Accept *Accept
	// Route, set by a front only (RouteTo), hands the request to an actor;
	// Status, Header and Body are then not sent.
	Route *Route
}

// Text returns a text/plain response.
func Text(status int, body string) *Response {
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	return &Response{Status: status, Header: h, Body: []byte(body)}
}

// Registry maps class names to classes. Register fills it before the node
// serves; Replace changes a class while it serves (a deploy). Lookup is
// safe concurrently with both: it reads the map of the moment, which a
// change never modifies (it stores a new one).
type Registry struct {
	mu      sync.Mutex // writers
	classes atomic.Pointer[map[string]Class]
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{}
	r.classes.Store(&map[string]Class{})
	return r
}

// Register adds a class under name. A name may be registered once.
func (r *Registry) Register(name string, c Class) error {
	if name == "" || c == nil {
		return fmt.Errorf("register class %q: empty name or nil class", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := (*r.classes.Load())[name]; dup {
		return fmt.Errorf("register class %q: already registered", name)
	}
	r.store(name, c)
	return nil
}

// Replace makes c the class under name, registered or not, for the events
// that look it up from now on; an actor in memory goes on with the class it
// was made with until it leaves memory (or is told to switch).
func (r *Registry) Replace(name string, c Class) error {
	if name == "" || c == nil {
		return fmt.Errorf("replace class %q: empty name or nil class", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.store(name, c)
	return nil
}

// store stores a copy of the map with name set to c; r.mu is held.
func (r *Registry) store(name string, c Class) {
	m := maps.Clone(*r.classes.Load())
	m[name] = c
	r.classes.Store(&m)
}

// Lookup returns the class registered under name.
func (r *Registry) Lookup(name string) (Class, bool) {
	c, ok := (*r.classes.Load())[name]
	return c, ok
}

// Names lists the registered classes in order.
func (r *Registry) Names() []string {
	classes := *r.classes.Load()
	names := make([]string, 0, len(classes))
	for n := range classes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// BuiltIn returns a registry with the classes every node ships: counter,
// kv and sql.
func BuiltIn() *Registry {
	r := NewRegistry()
	_ = r.Register("counter", Counter{})
	_ = r.Register("kv", KV{})
	_ = r.Register("sql", SQLConsole{})
	return r
}
