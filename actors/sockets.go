package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// WebSockets. An actor accepts an upgrade by answering its HTTP event with
// AcceptSocket; the socket then belongs to the node (package sockets), so
// the actor may hibernate while it stays open. What arrives on it comes
// back as a SocketEvent, waking the actor if it hibernated, to classes that
// implement SocketHandler. During any event, SocketsOf(ctx) reaches the
// actor's sockets: what it sends or closes goes out with the event's
// output, once the event's writes are durable (the output gate), and not at
// all if the event fails or rolls back (Rollback).

// SocketID names one of the actor's sockets.
type SocketID = sockets.ID

// SocketEventKind says what happened on a socket.
type SocketEventKind uint8

const (
	// SocketMessage: a message arrived (Text, Data).
	SocketMessage SocketEventKind = iota + 1
	// SocketClose: the socket closed (Code, Reason, Clean): the peer's close
	// frame, or 1006 when the connection dropped without one.
	SocketClose
	// SocketError: the node closed the socket for a fault (Code, Err): 1009
	// message too big, 1013 slow reader, 1011 no answer to pings, 1002
	// protocol error.
	SocketError
)

func (k SocketEventKind) String() string {
	switch k {
	case SocketMessage:
		return "message"
	case SocketClose:
		return "close"
	case SocketError:
		return "error"
	}
	return fmt.Sprintf("socket-event(%d)", uint8(k))
}

// SocketEvent is one event of one of the actor's sockets.
type SocketEvent struct {
	Kind   SocketEventKind
	Socket SocketID
	Text   bool   // SocketMessage: a text (not binary) message
	Data   []byte // SocketMessage
	Code   int    // SocketClose, SocketError
	Reason string // SocketClose
	Clean  bool   // SocketClose: the close handshake ran
	Err    string // SocketError
}

// SocketHandler is implemented by the Handlers (a Class, or a Resident)
// whose actors take WebSocket events. HandleSocket runs like Handle: one
// event at a time, its writes to st committed together when it returns
// nil; an error, Rollback's too, discards them and the event's socket
// output. Events for a Handler that does not implement it are dropped.
type SocketHandler interface {
	Handler
	HandleSocket(ctx context.Context, ev *SocketEvent, st Storage) error
}

// Accept asks the node to upgrade the HTTP event's request to a WebSocket
// owned by the node, carrying Tags (at most 10, each 1 to 256 bytes).
type Accept struct {
	Tags []string
}

// AcceptSocket is the response that accepts the event's WebSocket upgrade.
func AcceptSocket(tags ...string) *Response {
	return &Response{Status: 101, Accept: &Accept{Tags: tags}}
}

// Sockets is what an event can do with its actor's sockets.
type Sockets interface {
	// Send queues a message for the socket; it goes out with the event's
	// output. One the node cannot send (over its message bound, or text
	// that is not UTF-8) is dropped and logged; so for Broadcast.
	Send(id SocketID, text bool, data []byte)
	// Broadcast queues a message for every open socket carrying tag (every
	// socket when tag is ""); it goes out with the event's output.
	Broadcast(tag string, text bool, data []byte)
	// Close queues a close with code and reason; it goes out with the
	// event's output. A code that cannot be sent (those that can: 1000 to
	// 1003, 1007 to 1014, 3000 to 4999) or a reason over 123 bytes or not
	// UTF-8 closes the socket with 1011 and no reason instead, and is
	// logged, as in a wasm guest.
	Close(id SocketID, code int, reason string)
	// List returns the actor's open sockets carrying tag ("" for all), in
	// the order they were accepted.
	List(tag string) []sockets.SocketInfo
	// SetAttachment keeps data (at most 16 KiB) with the socket until it
	// closes; it outlives the actor's hibernation. Immediate.
	SetAttachment(id SocketID, data []byte) error
	// Attachment returns the socket's attachment.
	Attachment(id SocketID) ([]byte, error)
	// SetAutoResponse makes the node answer a text message equal to request
	// with response on any of the actor's sockets, without waking it; an
	// empty request removes it. Immediate.
	SetAutoResponse(request, response string) error
	// LastAutoResponse is when the node last auto-responded on the socket
	// (zero if never).
	LastAutoResponse(id SocketID) (time.Time, error)
}

// ErrNoSockets: the node runs without a socket owner.
var ErrNoSockets = errors.New("this node serves no WebSockets")

// SocketsOf returns the sockets of the actor whose event ctx belongs to.
// Outside an event, or on a node without sockets, every call fails or does
// nothing.
func SocketsOf(ctx context.Context) Sockets {
	if ev, ok := ctx.Value(eventValuesKey{}).(*eventValues); ok && ev.socks.owner != nil {
		return &ev.socks
	}
	return noSockets{}
}

// socketOp is one queued send, broadcast or close.
type socketOp struct {
	kind   uint8 // opSend, opBroadcast, opClose
	id     SocketID
	tag    string
	text   bool
	data   []byte
	code   int
	reason string
}

const (
	opSend uint8 = iota + 1
	opBroadcast
	opClose
)

// eventSockets is the Sockets of one event: reads go to the owner, sends
// and closes wait in out until the event's output is released.
type eventSockets struct {
	owner *sockets.Owner
	actor ownership.Actor
	out   []socketOp
}

func (s *eventSockets) Send(id SocketID, text bool, data []byte) {
	s.out = append(s.out, socketOp{kind: opSend, id: id, text: text, data: append([]byte(nil), data...)})
}

func (s *eventSockets) Broadcast(tag string, text bool, data []byte) {
	s.out = append(s.out, socketOp{kind: opBroadcast, tag: tag, text: text, data: append([]byte(nil), data...)})
}

func (s *eventSockets) Close(id SocketID, code int, reason string) {
	s.out = append(s.out, socketOp{kind: opClose, id: id, code: code, reason: reason})
}

func (s *eventSockets) List(tag string) []sockets.SocketInfo { return s.owner.List(s.actor, tag) }

func (s *eventSockets) SetAttachment(id SocketID, data []byte) error {
	return s.owner.SetAttachment(s.actor, id, data)
}

func (s *eventSockets) Attachment(id SocketID) ([]byte, error) {
	return s.owner.Attachment(s.actor, id)
}

func (s *eventSockets) SetAutoResponse(request, response string) error {
	return s.owner.SetAutoResponse(s.actor, sockets.AutoResponse{Request: request, Response: response})
}

func (s *eventSockets) LastAutoResponse(id SocketID) (time.Time, error) {
	return s.owner.LastAutoResponse(s.actor, id)
}

// flushSockets carries out the queued operations: the event's output is
// released. A socket that closed meanwhile is passed over. What the owner
// refuses as invalid is logged; a close it refuses (a code or reason that
// cannot be sent) closes the socket with 1011 instead.
func flushSockets(owner *sockets.Owner, a ownership.Actor, ops []socketOp, log func() *slog.Logger) {
	for _, op := range ops {
		var err error
		switch op.kind {
		case opSend:
			err = owner.Send(a, op.id, op.text, op.data)
		case opBroadcast:
			_, err = owner.Broadcast(a, op.tag, op.text, op.data)
		case opClose:
			if err = owner.Close(a, op.id, op.code, op.reason); errors.Is(err, sockets.ErrInvalid) {
				log().Warn("socket closed with 1011: the actor's close code or reason cannot be sent",
					slog.Any("socket", op.id), slog.Int("code", op.code), slog.Any("err", err))
				_ = owner.Close(a, op.id, 1011, "")
				continue
			}
		}
		if errors.Is(err, sockets.ErrInvalid) {
			log().Warn("socket message not sent: the node cannot send it", slog.Any("socket", op.id), slog.Any("err", err))
		}
	}
}

// noSockets is the Sockets outside an event or without an owner.
type noSockets struct{}

func (noSockets) Send(SocketID, bool, []byte)                  {}
func (noSockets) Broadcast(string, bool, []byte)               {}
func (noSockets) Close(SocketID, int, string)                  {}
func (noSockets) List(string) []sockets.SocketInfo             { return nil }
func (noSockets) SetAttachment(SocketID, []byte) error         { return ErrNoSockets }
func (noSockets) Attachment(SocketID) ([]byte, error)          { return nil, ErrNoSockets }
func (noSockets) SetAutoResponse(string, string) error         { return ErrNoSockets }
func (noSockets) LastAutoResponse(SocketID) (time.Time, error) { return time.Time{}, ErrNoSockets }
