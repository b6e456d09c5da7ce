package actors

import (
	"context"
	"errors"
	"net/http"
)

// Outbound HTTP. During an event, an actor may send an HTTP request to a
// service outside the cluster with Fetch and wait for its response. The
// node sends it through one client of its own, bounded in time and in
// bytes both ways, to the hosts its operator allows (wasmkeep serve
// --egress-allow); nothing else is reachable.
//
// A fetch is a commit point, as a call to another actor is (see Call):
// before the request leaves, every write the event could reveal is made
// durable, so a remote service never acts on a write that could still be
// lost. A commit that fails before the request fails the fetch and the
// event. Once sent, the request may have taken effect: an event that then
// fails has an unknown outcome for its client, as after a call.

// FetchRequest is an outbound HTTP request.
type FetchRequest struct {
	Method string // "" means GET
	URL    string // http:// or https://
	Header http.Header
	Body   []byte
}

// FetchResponse is the whole answer to a FetchRequest.
type FetchResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// ErrFetchRefused is matched (errors.Is) by a request, or an outbound
// socket (DialSocket), the node's egress allow-list does not allow
// (nothing was sent).
var ErrFetchRefused = errors.New("outbound request refused by the egress allow-list")

// ErrBadFetch is matched (errors.Is) by a malformed request: its method,
// its URL (http:// or https:// and a host; ws:// or wss:// for
// DialSocket), a socket's tags, or since the event rolled back. Nothing
// was sent.
var ErrBadFetch = errors.New("bad outbound request")

// ErrFetchFailed is matched (errors.Is) by a request that got no answer
// (a connection, a timeout, a bound of redirects), or an outbound socket
// that did not open (no connection, a handshake the service refused). It
// may have reached the service.
var ErrFetchFailed = errors.New("outbound request failed")

// Fetch sends req and returns the whole response. ctx must be the context
// of the calling event; the request is bounded by it and by the node's
// fetch timeout. A body over the node's bounds fails it with an error
// matching ErrLimit. See the comment at the top of this file for what it
// commits first.
func Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error) {
	ev := eventOf(ctx)
	if ev == nil {
		return nil, ErrNotInEvent
	}
	return ev.Fetch(ctx, req)
}
