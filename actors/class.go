package actors

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Class is a Go-native actor class. Handle runs one event of one actor;
// events of one actor never run concurrently. Writes to st become durable
// together when Handle returns without error, and are discarded otherwise.
// Handle must not keep st, req or the response after it returns. A nil
// response with a nil error fails the event with 500 (its writes
// discarded, the failure logged), as a wasm guest's nil response does.
type Class interface {
	Handle(ctx context.Context, req *Request, st Storage) (*Response, error)
}

// ResidentClass is implemented by classes that keep resources per resident
// actor (a wasm class keeps one wasm instance per actor). When an actor of
// such a class becomes resident, its proto.actor actor calls NewResident
// once, on its own goroutine before its first event, and sends every event
// of that residency to the returned Resident instead of the class; it calls
// Close on the same goroutine when the actor stops being resident
// (hibernation, eviction, StopActing, node stop). The Class's own Handle is
// then not called by Host.
type ResidentClass interface {
	Class
	NewResident(a ownership.Actor) Resident
}

// Resident is an actor's in-memory object for one residency: it serves the
// events of that residency; see ResidentClass. It is called from one
// goroutine at a time.
type Resident interface {
	Class
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

// Response is an actor's answer to a Request. Status 0 means 200.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Accept, when set, upgrades the request to a WebSocket owned by the
	// node (see AcceptSocket); Status, Header and Body are then not sent.
	Accept *Accept
}

// Text returns a text/plain response.
func Text(status int, body string) *Response {
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	return &Response{Status: status, Header: h, Body: []byte(body)}
}

// Registry maps class names to classes. Fill it before the node serves:
// Register is not safe concurrently with Lookup; Lookup alone is.
type Registry struct {
	classes map[string]Class
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{classes: map[string]Class{}} }

// Register adds a class under name. A name may be registered once.
func (r *Registry) Register(name string, c Class) error {
	if name == "" || c == nil {
		return fmt.Errorf("register class %q: empty name or nil class", name)
	}
	if _, dup := r.classes[name]; dup {
		return fmt.Errorf("register class %q: already registered", name)
	}
	r.classes[name] = c
	return nil
}

// Lookup returns the class registered under name.
func (r *Registry) Lookup(name string) (Class, bool) {
	c, ok := r.classes[name]
	return c, ok
}

// Names lists the registered classes in order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.classes))
	for n := range r.classes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// BuiltIn returns a registry with the classes every node ships: counter.
func BuiltIn() *Registry {
	r := NewRegistry()
	_ = r.Register("counter", Counter{})
	return r
}
