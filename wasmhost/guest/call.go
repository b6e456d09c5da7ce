package guest

import (
	"errors"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// Errors of Call (wasmhost/ABI.md, actor_call).
var (
	// ErrBadCall: the call was refused for what it asks (a bad class or
	// actor name, method, path, or a body over the node's limit), or the
	// event rolled back (Rollback) before it.
	ErrBadCall = errors.New("guest: bad actor call")
	// ErrCallCycle: the callee is waiting in this call chain (it would
	// wait for itself), or the chain is too deep.
	ErrCallCycle = errors.New("guest: actor call cycle")
	// ErrUnknownClass: no class of that name is served.
	ErrUnknownClass = errors.New("guest: unknown class")
	// ErrUnavailable: the callee cannot be served now (try later), or the
	// caller's own writes could not be committed before the call (the
	// event then fails whatever it answers).
	ErrUnavailable = errors.New("guest: actor unavailable")
	// ErrCallFailed: no answer within the node's bound, or the callee's
	// node failed.
	ErrCallFailed = errors.New("guest: actor call failed")
)

// Call sends req to the actor name of class and returns its response. It
// may be called during any event. The writes the event made so far (and
// its actor's earlier writes) are committed before the request leaves; the
// callee runs it as one event of its own, wherever it lives. Method must be
// GET, POST, PUT or DELETE; Path "" or starting with "/"; RawQuery escaped,
// without '?'. A response's Status is never 0.
func Call(class, name string, req *Request) (*Response, error) {
	target := wire.AppendString(wire.AppendString(nil, class), name)
	n := actorCall(target, encodeRequest(req))
	switch n {
	case -1:
		return nil, ErrBadCall
	case -2:
		return nil, ErrCallCycle
	case -3:
		return nil, ErrUnknownClass
	case -4:
		return nil, ErrUnavailable
	}
	if n < 0 {
		return nil, ErrCallFailed
	}
	buf := make([]byte, n)
	actorCallRead(buf)
	resp, ok := decodeResponse(buf)
	if !ok {
		return nil, ErrCallFailed
	}
	return resp, nil
}

func encodeRequest(req *Request) []byte {
	n := 20 + len(req.Method) + len(req.Path) + len(req.RawQuery) + len(req.Body)
	for _, f := range req.Header {
		n += 8 + len(f.Name) + len(f.Value)
	}
	b := make([]byte, 0, n)
	b = wire.AppendString(b, req.Method)
	b = wire.AppendString(b, req.Path)
	b = wire.AppendString(b, req.RawQuery)
	b = appendFields(b, req.Header)
	return wire.AppendBytes(b, req.Body)
}

func decodeResponse(b []byte) (*Response, bool) {
	r := wire.NewReader(b)
	resp := &Response{Status: int(r.U32())}
	resp.Header = readFields(r)
	resp.Body = r.Bytes()
	return resp, !r.Err()
}
