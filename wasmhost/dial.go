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

// The host side of ws_dial (ABI.md, minor version 2): a guest opens an
// outbound WebSocket through actors.DialSocket, which commits the event's
// writes first, dials through the node's egress, and records the socket
// with the actor so that its close reaches it wherever it is. What arrives
// on the socket comes to wasmkeep_on_socket, as on an accepted one.

// ws_dial's answers besides a socket id (ABI.md).
const (
	dialBad         = -1 // malformed (URL, tags), or the event rolled back
	dialRefused     = -2 // the egress allow-list does not allow it
	dialLimit       = -3 // the actor has actors.MaxDialed sockets open
	dialUnavailable = -4 // a commit did not land, or the node takes no more sockets
	dialFailed      = -5 // no connection, or the handshake was refused
	dialNoSockets   = -6 // the node serves no WebSockets
)

// errBadDial fails an event whose guest passed a malformed dial encoding.
var errBadDial = errors.New("guest outbound socket request malformed")

func dialFunctions(fn hostFunc) {
	// ws_dial(req, req_len) -> i64: the id of the socket, open, or a
	// negative code.
	fn("ws_dial", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		d, ok := decodeDialRequest(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		if !ok {
			panic(errBadDial)
		}
		if ev.rollback {
			// The dial would commit the writes the event rolled back.
			ev.logger().Debug("guest outbound socket refused: the event rolled back")
			stack[0] = api.EncodeI64(dialBad)
			return
		}
		id, err := actors.DialSocket(ctx, d)
		if err != nil {
			code := dialCode(err)
			ev.logger().Info("guest outbound socket failed", slog.Int("code", int(code)), slog.Any("err", err))
			stack[0] = api.EncodeI64(code)
			return
		}
		stack[0] = api.EncodeI64(int64(id))
	}, []api.ValueType{i32, i32}, []api.ValueType{i64})
}

// dialCode is ws_dial's answer for a dial that returned err.
func dialCode(err error) int64 {
	switch {
	case errors.Is(err, actors.ErrBadFetch):
		return dialBad
	case errors.Is(err, actors.ErrFetchRefused):
		return dialRefused
	case errors.Is(err, actors.ErrLimit):
		return dialLimit
	case errors.Is(err, actors.ErrUnavailable):
		return dialUnavailable
	case errors.Is(err, actors.ErrNoSockets):
		return dialNoSockets
	}
	return dialFailed
}

// decodeDialRequest decodes ws_dial's request: URL, headers and tags.
func decodeDialRequest(b []byte) (*actors.SocketDial, bool) {
	r := wire.NewReader(b)
	d := &actors.SocketDial{URL: r.String()}
	n := r.Count(8)
	d.Header = make(http.Header, n)
	for range n {
		name, value := r.String(), r.String()
		d.Header.Add(name, value)
	}
	if n := r.Count(4); n > 0 {
		d.Tags = make([]string, n)
		for i := range d.Tags {
			d.Tags[i] = r.String()
		}
	}
	return d, !r.Err()
}
