package wasmhost

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/url"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// The host side of actor_call (ABI.md): a guest calls another actor
// through actors.Call, which commits the caller's writes first and routes
// the call wherever the callee lives.

// actor_call's answers besides a response size (ABI.md).
const (
	callBad         = -1 // the call is refused for what it asks
	callCycle       = -2 // the callee waits in this call chain, or it is too deep
	callUnknown     = -3 // no class of that name
	callUnavailable = -4 // the callee (or the caller's own hold) cannot serve now
	callFailed      = -5 // no answer within the bound, or the callee's node failed
)

// errBadCall fails an event whose guest passed a malformed call encoding.
var errBadCall = errors.New("guest actor call malformed")

func callFunctions(fn hostFunc) {
	// actor_call(target, target_len, req, req_len) -> i32: the size of
	// the encoded response, kept for actor_call_read, or a negative code.
	fn("actor_call", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		ev.call = nil
		to, ok := decodeTarget(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		if !ok {
			panic(errBadCall)
		}
		req, ok := decodeCallRequest(read(mod, api.DecodeU32(stack[2]), api.DecodeU32(stack[3])))
		if !ok {
			panic(errBadCall)
		}
		if ev.rollback {
			// The call would commit the writes the event rolled back.
			ev.logger().Debug("guest actor call refused: the event rolled back",
				slog.String("to_class", to.Class), slog.String("to_name", to.Name))
			stack[0] = api.EncodeI32(callBad)
			return
		}
		resp, err := actors.Call(ctx, to, req)
		if err != nil {
			code := callCode(err)
			ev.logger().Info("guest actor call failed", slog.String("to_class", to.Class), slog.String("to_name", to.Name),
				slog.Int("code", int(code)), slog.Any("err", err))
			stack[0] = api.EncodeI32(code)
			return
		}
		stack[0] = keep(&ev.call, encodeResponse(resp), callFailed)
	}, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	// actor_call_read(ptr, len) -> i32: copies the response of the last
	// actor_call into the buffer.
	fn("actor_call_read", readKept(func(ev *event) *[]byte { return &ev.call }), []api.ValueType{i32, i32}, []api.ValueType{i32})
}

// keep keeps b, the encoded answer of a host call, in *dst for the call's
// _read function, and returns the call's result: b's size, or tooBig when
// an i32 cannot tell it.
func keep(dst *[]byte, b []byte, tooBig int32) uint64 {
	if len(b) > math.MaxInt32 {
		*dst = nil
		return api.EncodeI32(tooBig)
	}
	*dst = b
	return api.EncodeU32(uint32(len(b)))
}

// readKept is the _read function of what keep kept in the event's field:
// (ptr, len) -> i32, the count copied; the answer is forgotten.
func readKept(field func(*event) *[]byte) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		kept := field(eventOf(ctx))
		n := write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), *kept)
		*kept = nil
		stack[0] = api.EncodeU32(n)
	}
}

// callCode is actor_call's answer for a call that returned err.
func callCode(err error) int32 {
	switch {
	case errors.Is(err, actors.ErrBadCall):
		return callBad
	case errors.Is(err, actors.ErrCallCycle):
		return callCycle
	case errors.Is(err, actors.ErrUnknownClass):
		return callUnknown
	case errors.Is(err, actors.ErrUnavailable):
		return callUnavailable
	}
	return callFailed
}

// decodeTarget decodes actor_call's target: class and name strings.
func decodeTarget(b []byte) (ownership.Actor, bool) {
	r := wire.NewReader(b)
	a := ownership.Actor{Class: r.String(), Name: r.String()}
	return a, !r.Err()
}

// decodeCallRequest decodes a request the guest sends, laid out as the
// request the host hands guests (encodeRequest).
func decodeCallRequest(b []byte) (*actors.Request, bool) {
	r := wire.NewReader(b)
	req := &actors.Request{Method: r.String(), Path: r.String()}
	query := r.String()
	n := r.Count(8)
	req.Header = make(http.Header, n)
	for range n {
		name, value := r.String(), r.String()
		req.Header.Add(name, value)
	}
	req.Body = r.Bytes()
	if r.Err() {
		return nil, false
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, false
	}
	req.Query = q
	return req, true
}

// encodeResponse lays resp out as ABI.md's response encoding, headers
// sorted by name.
func encodeResponse(resp *actors.Response) []byte {
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	b := wire.AppendU32(nil, uint32(status))
	b = appendHeader(b, resp.Header)
	return wire.AppendBytes(b, resp.Body)
}
