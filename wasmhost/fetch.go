package wasmhost

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// The host side of http_fetch (ABI.md): a guest sends an outbound HTTP
// request through actors.Fetch, which commits the event's writes first
// and sends it through the node's egress client.

// http_fetch's answers besides a response size (ABI.md).
const (
	fetchBad         = -1 // malformed (method, URL), or the event rolled back
	fetchRefused     = -2 // the egress allow-list does not allow it
	fetchLimit       = -3 // a body over its bound
	fetchUnavailable = -4 // the event's writes could not be committed first
	fetchFailed      = -5 // no answer: a connection, a timeout, redirects
)

// errBadFetch fails an event whose guest passed a malformed fetch encoding.
var errBadFetch = errors.New("guest outbound request malformed")

func fetchFunctions(fn hostFunc) {
	// http_fetch(req, req_len) -> i32: the size of the encoded response,
	// kept for http_fetch_read, or a negative code.
	fn("http_fetch", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		ev.fetched = nil
		req, ok := decodeFetchRequest(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		if !ok {
			panic(errBadFetch)
		}
		if ev.rollback {
			// The fetch would commit the writes the event rolled back.
			ev.logger().Debug("guest outbound request refused: the event rolled back")
			stack[0] = api.EncodeI32(fetchBad)
			return
		}
		resp, err := actors.Fetch(ctx, req)
		if err != nil {
			code := fetchCode(err)
			ev.logger().Info("guest outbound request failed", slog.Int("code", int(code)), slog.Any("err", err))
			stack[0] = api.EncodeI32(code)
			return
		}
		stack[0] = keep(&ev.fetched, encodeResponse(&actors.Response{Status: resp.Status, Header: resp.Header, Body: resp.Body}), fetchLimit)
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// http_fetch_read(ptr, len) -> i32: copies the response of the last
	// http_fetch into the buffer.
	fn("http_fetch_read", readKept(func(ev *event) *[]byte { return &ev.fetched }), []api.ValueType{i32, i32}, []api.ValueType{i32})
}

// fetchCode is http_fetch's answer for a fetch that returned err.
func fetchCode(err error) int32 {
	switch {
	case errors.Is(err, actors.ErrBadFetch):
		return fetchBad
	case errors.Is(err, actors.ErrFetchRefused):
		return fetchRefused
	case errors.Is(err, actors.ErrLimit):
		return fetchLimit
	case errors.Is(err, actors.ErrUnavailable):
		return fetchUnavailable
	}
	return fetchFailed
}

// decodeFetchRequest decodes http_fetch's request: method, URL, headers
// and body.
func decodeFetchRequest(b []byte) (*actors.FetchRequest, bool) {
	r := wire.NewReader(b)
	req := &actors.FetchRequest{Method: r.String(), URL: r.String()}
	n := r.Count(8)
	req.Header = make(http.Header, n)
	for range n {
		name, value := r.String(), r.String()
		req.Header.Add(name, value)
	}
	req.Body = r.Bytes()
	return req, !r.Err()
}
