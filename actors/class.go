package actors

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
)

// Class is a Go-native actor class. Handle runs one event of one actor;
// events of one actor never run concurrently. Writes to st become durable
// together when Handle returns without error, and are discarded otherwise.
// Handle must not keep st, req or the response after it returns.
type Class interface {
	Handle(ctx context.Context, req *Request, st Storage) (*Response, error)
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

// Response is an actor's answer to a Request. Status 0 means 200.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
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
