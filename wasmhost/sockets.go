package wasmhost

import (
	"context"
	"errors"
	"log/slog"
	"math"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/sockets"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// The WebSocket part of the guest ABI (ABI.md): accepting an upgrade,
// the socket event a guest serves, and what an event can do with the
// actor's sockets, through actors.SocketsOf of the event's context. Sends,
// broadcasts and closes are queued with the event's output.

// errBadTags fails a ws_accept call whose tag encoding is malformed.
var errBadTags = errors.New("wasmkeep ws_accept given a malformed tag encoding")

// maxCloseReason bounds a close reason (a close frame's payload is at
// most 125 bytes, 2 of them the code).
const maxCloseReason = 123

// socketsKey lets the package's tests give an event sockets of their own.
type socketsKey struct{}

// socketsOf returns the sockets of the actor whose event ctx belongs to.
func socketsOf(ctx context.Context) actors.Sockets {
	if s, ok := ctx.Value(socketsKey{}).(actors.Sockets); ok {
		return s
	}
	return actors.SocketsOf(ctx)
}

func socketFunctions(fn hostFunc) {
	i32s := func(n int) []api.ValueType {
		t := make([]api.ValueType, n)
		for i := range t {
			t[i] = i32
		}
		return t
	}
	one := i32s(1)
	// ws_accept(tags, tags_len) -> i32: 0, or 1 if refused (too many tags,
	// a tag empty or too long, not a request event).
	fn("ws_accept", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		r := wire.NewReader(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		tags := make([]string, r.Count(4))
		for i := range tags {
			tags[i] = r.String()
		}
		if r.Err() {
			panic(errBadTags)
		}
		if !ev.request || len(tags) > sockets.MaxTags {
			ev.logger().Debug("guest ws_accept refused", slog.Bool("request", ev.request), slog.Int("tags", len(tags)))
			stack[0] = 1
			return
		}
		for _, t := range tags {
			if t == "" || len(t) > sockets.MaxTagBytes {
				ev.logger().Debug("guest ws_accept refused: tag of bad size", slog.Int("bytes", len(t)))
				stack[0] = 1
				return
			}
		}
		ev.accept, ev.accepted = tags, true
		stack[0] = 0
	}, i32s(2), one)
	// ws_send(id i64, flags, ptr, len) -> i32: 0, or 1 for unknown flags.
	fn("ws_send", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		flags := api.DecodeU32(stack[1])
		data := read(mod, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
		if flags&^wire.FlagText != 0 {
			stack[0] = 1
			return
		}
		ev.ws.Send(actors.SocketID(stack[0]), flags&wire.FlagText != 0, data)
		stack[0] = 0
	}, []api.ValueType{i64, i32, i32, i32}, one)
	// ws_broadcast(tag, tag_len, flags, ptr, len) -> i32: 0, or 1 for
	// unknown flags.
	fn("ws_broadcast", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		tag := read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
		flags := api.DecodeU32(stack[2])
		data := read(mod, api.DecodeU32(stack[3]), api.DecodeU32(stack[4]))
		if flags&^wire.FlagText != 0 {
			stack[0] = 1
			return
		}
		ev.ws.Broadcast(string(tag), flags&wire.FlagText != 0, data)
		stack[0] = 0
	}, i32s(5), one)
	// ws_close(id i64, code, reason, reason_len) -> i32: 0, or 1 for a code
	// that cannot be sent or a reason over 123 bytes.
	fn("ws_close", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		code := int(api.DecodeI32(stack[1]))
		reason := read(mod, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
		if !closeCodeSendable(code) || len(reason) > maxCloseReason {
			ev.logger().Debug("guest ws_close refused", slog.Int("code", code), slog.Int("reason_bytes", len(reason)))
			stack[0] = 1
			return
		}
		ev.ws.Close(actors.SocketID(stack[0]), code, string(reason))
		stack[0] = 0
	}, []api.ValueType{i64, i32, i32, i32}, one)
	// ws_list_len(tag, tag_len) -> i32: the size of the encoded list of
	// the actor's open sockets carrying tag ("" for all). The list waits
	// for ws_list_read.
	fn("ws_list_len", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		tag := read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
		ev.wsList = encodeSocketList(ev.ws.List(string(tag)), ev.minor)
		if len(ev.wsList) > math.MaxInt32 { // cannot happen: bounded by the node's sockets
			ev.wsList = nil
			panic(errors.New("wasmkeep ws_list_len: list over 2 GiB"))
		}
		stack[0] = api.EncodeU32(uint32(len(ev.wsList)))
	}, i32s(2), one)
	// ws_list_read(ptr, len) -> i32: copies the list of the last
	// ws_list_len into the buffer.
	fn("ws_list_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		n := write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), ev.wsList)
		ev.wsList = nil
		stack[0] = api.EncodeU32(n)
	}, i32s(2), one)
	// ws_attachment_set(id i64, ptr, len) -> i32: 0, or 1 if refused (too
	// big, or the socket is gone).
	fn("ws_attachment_set", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		data := read(mod, api.DecodeU32(stack[1]), api.DecodeU32(stack[2]))
		if err := ev.ws.SetAttachment(actors.SocketID(stack[0]), data); err != nil {
			ev.logger().Debug("guest ws_attachment_set refused", slog.Any("err", err))
			stack[0] = 1
			return
		}
		stack[0] = 0
	}, []api.ValueType{i64, i32, i32}, one)
	// ws_attachment_len(id i64) -> i32: the attachment's size, or -1 if
	// the socket has none or is gone. It waits for ws_attachment_read.
	fn("ws_attachment_len", func(ctx context.Context, _ api.Module, stack []uint64) {
		ev := eventOf(ctx)
		att, err := ev.ws.Attachment(actors.SocketID(stack[0]))
		if err != nil || len(att) == 0 {
			ev.att = nil
			stack[0] = api.EncodeI32(-1)
			return
		}
		ev.att = att
		stack[0] = api.EncodeU32(uint32(len(att)))
	}, []api.ValueType{i64}, one)
	// ws_attachment_read(ptr, len) -> i32: copies the attachment of the
	// last ws_attachment_len into the buffer.
	fn("ws_attachment_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		n := write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), ev.att)
		ev.att = nil
		stack[0] = api.EncodeU32(n)
	}, i32s(2), one)
	// ws_auto_response(req, req_len, resp, resp_len) -> i32: 0, or 1 if
	// refused.
	fn("ws_auto_response", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		req := read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
		resp := read(mod, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
		if err := ev.ws.SetAutoResponse(string(req), string(resp)); err != nil {
			ev.logger().Debug("guest ws_auto_response refused", slog.Any("err", err))
			stack[0] = 1
			return
		}
		stack[0] = 0
	}, i32s(4), one)
	// ws_last_auto_response(id i64) -> i64: when the node last answered the
	// socket with the auto-response, in Unix milliseconds; 0 if never, -1
	// if the socket is gone.
	fn("ws_last_auto_response", func(ctx context.Context, _ api.Module, stack []uint64) {
		at, err := eventOf(ctx).ws.LastAutoResponse(actors.SocketID(stack[0]))
		switch {
		case err != nil:
			stack[0] = api.EncodeI64(-1)
		case at.IsZero():
			stack[0] = 0
		default:
			stack[0] = api.EncodeI64(at.UnixMilli())
		}
	}, []api.ValueType{i64}, []api.ValueType{i64})
	// socket_event_len() -> i32: the size of the encoded socket event; 0
	// in a request event.
	fn("socket_event_len", func(ctx context.Context, _ api.Module, stack []uint64) {
		stack[0] = api.EncodeU32(uint32(len(eventOf(ctx).sock)))
	}, nil, one)
	// socket_event_read(ptr, len) -> i32: copies the socket event into the
	// buffer.
	fn("socket_event_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		stack[0] = api.EncodeU32(write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), ev.sock))
	}, i32s(2), one)
}

// closeCodeSendable reports whether an actor may close a socket with code
// (as package sockets checks it).
func closeCodeSendable(code int) bool {
	return (code >= 1000 && code <= 1014 && (code < 1004 || code > 1006)) || (code >= 3000 && code <= 4999)
}

// encodeSocketList lays out the result of ws_list_len: a count, then each
// socket's id, tags and attachment, and for a guest of minor version 2 or
// later (wire.MinorDial) the URL it was dialed to ("" if accepted).
func encodeSocketList(list []actors.SocketInfo, minor uint32) []byte {
	dial := minor >= wire.MinorDial
	n := 4
	for _, s := range list {
		n += 16 + len(s.Attachment)
		for _, t := range s.Tags {
			n += 4 + len(t)
		}
		if dial {
			n += 4 + len(s.URL)
		}
	}
	b := make([]byte, 0, n)
	b = wire.AppendU32(b, uint32(len(list)))
	for _, s := range list {
		b = wire.AppendU64(b, uint64(s.ID))
		b = appendTags(b, s.Tags)
		b = wire.AppendBytes(b, s.Attachment)
		if dial {
			b = wire.AppendString(b, s.URL)
		}
	}
	return b
}

// appendTags lays tags out as a count, then each.
func appendTags(b []byte, tags []string) []byte {
	b = wire.AppendU32(b, uint32(len(tags)))
	for _, t := range tags {
		b = wire.AppendString(b, t)
	}
	return b
}

// encodeSocketEvent lays out a socket event as socket_event_read gives
// it: kind, socket id, flags, code, then the message's data, the close
// reason or the error text; for a guest of minor version 2 or later
// (wire.MinorDial), then the URL and tags of a dialed socket's close or
// error ("" and none otherwise). An older guest gets the event as its
// minor version has it: its decoder refuses bytes left over.
func encodeSocketEvent(e *actors.SocketEvent, minor uint32) []byte {
	var flags uint8
	if e.Text {
		flags |= wire.FlagText
	}
	if e.Clean {
		flags |= wire.FlagClean
	}
	var data []byte
	switch e.Kind {
	case actors.SocketMessage:
		data = e.Data
	case actors.SocketClose:
		data = []byte(e.Reason)
	case actors.SocketError:
		data = []byte(e.Err)
	}
	n := 1 + 8 + 1 + 4 + 4 + len(data)
	dial := minor >= wire.MinorDial
	if dial {
		n += 8 + len(e.URL)
		for _, t := range e.Tags {
			n += 4 + len(t)
		}
	}
	b := make([]byte, 0, n)
	b = append(b, uint8(e.Kind))
	b = wire.AppendU64(b, uint64(e.Socket))
	b = append(b, flags)
	b = wire.AppendU32(b, uint32(int32(e.Code)))
	b = wire.AppendBytes(b, data)
	if dial {
		b = wire.AppendString(b, e.URL)
		b = appendTags(b, e.Tags)
	}
	return b
}
