package guest

import (
	"errors"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// Errors of Fetch (wasmhost/ABI.md, http_fetch).
var (
	// ErrBadFetch: the request is malformed (its method, or its URL:
	// http:// or https:// and a host), or the event rolled back
	// (Rollback) before it. Nothing was sent.
	ErrBadFetch = errors.New("guest: bad outbound request")
	// ErrFetchRefused: the node's egress allow-list does not allow where
	// the request goes (wasmkeep serve --egress-allow). Nothing was sent.
	ErrFetchRefused = errors.New("guest: outbound request refused by the egress allow-list")
	// ErrFetchLimit: the request's body, or its answer's, is over the
	// node's bound.
	ErrFetchLimit = errors.New("guest: outbound request body over its limit")
	// ErrFetchFailed: no answer (a connection, a timeout, too many
	// redirects). The request may have reached the service.
	ErrFetchFailed = errors.New("guest: outbound request failed")
)

// FetchRequest is an outbound HTTP request.
type FetchRequest struct {
	Method string // "" means GET
	URL    string // http:// or https://
	Header []Field
	Body   []byte
}

// Fetch sends req to a service outside the cluster and returns its whole
// response. It may be called during any event. The writes the event made
// so far (and its actor's earlier writes) are committed before the
// request leaves, so the service never acts on a write that could be
// lost; if they cannot be, Fetch returns ErrUnavailable and the event
// fails whatever it answers. A response's Status is never 0.
func Fetch(req *FetchRequest) (*Response, error) {
	n := 16 + len(req.Method) + len(req.URL) + len(req.Body)
	for _, f := range req.Header {
		n += 8 + len(f.Name) + len(f.Value)
	}
	b := make([]byte, 0, n)
	b = wire.AppendString(b, req.Method)
	b = wire.AppendString(b, req.URL)
	b = appendFields(b, req.Header)
	b = wire.AppendBytes(b, req.Body)
	switch n := httpFetch(b); {
	case n == -1:
		return nil, ErrBadFetch
	case n == -2:
		return nil, ErrFetchRefused
	case n == -3:
		return nil, ErrFetchLimit
	case n == -4:
		return nil, ErrUnavailable
	case n < 0:
		return nil, ErrFetchFailed
	default:
		buf := make([]byte, n)
		httpFetchRead(buf)
		resp, ok := decodeResponse(buf)
		if !ok {
			return nil, ErrFetchFailed
		}
		return resp, nil
	}
}
