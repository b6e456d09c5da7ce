package actors

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
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
type SocketID uint64

func (id SocketID) String() string { return strconv.FormatUint(uint64(id), 10) }

// dialedBit marks the ID of a socket the actor dialed (DialSocket).
const dialedBit = 1 << 62

// Dialed says whether the socket is one the actor opened with DialSocket
// (an outbound socket), not one it accepted.
func (id SocketID) Dialed() bool { return id&dialedBit != 0 }

// SocketInfo describes one of the actor's open sockets.
type SocketInfo struct {
	ID         SocketID
	Tags       []string
	Attachment []byte
	// URL is the URL an outbound socket was dialed to, "" for a socket
	// the actor accepted.
	URL string
}

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
	// URL and Tags are set on the SocketClose or SocketError of a socket
	// the actor dialed (DialSocket): what it dialed, so that it can dial
	// again. Such an event comes exactly once per socket DialSocket
	// returned, on the node where the actor is when it comes (see
	// DialSocket).
	URL  string
	Tags []string
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
	List(tag string) []SocketInfo
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

// Outbound sockets. During an event, an actor may open a client WebSocket
// to a service with DialSocket. The socket belongs to the node, as an
// accepted one does: the actor may hibernate while it stays open, what
// arrives on it comes back as a SocketEvent (waking the actor), and
// SocketsOf reaches it (Send, Broadcast, Close, List, attachments; an
// auto-response answers on it too). It counts against the node's socket
// limit and is pinged as accepted sockets are.
//
// A socket lives on the node that opened it. When the actor leaves that
// node (a drain, a move, a lost lease, the node's end), the socket is
// closed, and the actor gets its SocketClose (code 1006 unless the close
// was seen where the actor was) at its next wake, wherever that is, with
// the URL and Tags it was dialed with, so that it can dial again. The
// actor keeps a record of each of its outbound sockets in its storage
// for that (a key of the node's, outside what List shows): the record is
// written when the socket opens and deleted with its close event (a
// handler that fails leaves it, and the close comes again at the next
// wake). DeleteAll keeps the records. When the commit of a record has an
// unknown outcome, DialSocket fails (the socket is closed) and the record
// may land all the same: the actor may then get the close of a socket it
// never had the ID of.

// SocketDial is an outbound WebSocket to open.
type SocketDial struct {
	URL    string      // ws:// or wss://
	Header http.Header // sent with the handshake
	Tags   []string    // at most 10, each 1 to 256 bytes, as AcceptSocket's
}

// MaxDialed is the number of outbound sockets one actor may have open.
const MaxDialed = 16

// DialSocket opens an outbound WebSocket and returns its ID once it is
// open; ctx must be the context of the calling event. Like a fetch it is
// a commit point: the event's writes so far are made durable before the
// service is dialed, and the socket's record after it opens, before
// DialSocket returns. The node dials only the hosts its operator allows
// (wasmkeep serve --egress-allow).
//
// Errors: ErrBadFetch (the URL or tags), ErrFetchRefused (the egress
// allow-list: nothing was dialed), ErrLimit (the actor has MaxDialed
// open), ErrFetchFailed (no connection, or the service refused the
// handshake), ErrUnavailable (a commit did not land, or the node takes no
// more sockets now), ErrNoSockets.
func DialSocket(ctx context.Context, d *SocketDial) (SocketID, error) {
	ev := eventOf(ctx)
	if ev == nil {
		return 0, ErrNotInEvent
	}
	return ev.DialSocket(ctx, d)
}

// ErrNoSockets: the node runs without a socket owner.
var ErrNoSockets = errors.New("this node serves no WebSockets")

// SocketsOf returns the sockets of the actor whose event ctx belongs to.
// Outside an event, or on a node without sockets, every call fails or does
// nothing.
func SocketsOf(ctx context.Context) Sockets {
	if ev := eventOf(ctx); ev != nil {
		if s := ev.Sockets(); s != nil {
			return s
		}
	}
	return noSockets{}
}

// noSockets is the Sockets outside an event or without an owner.
type noSockets struct{}

func (noSockets) Send(SocketID, bool, []byte)                  {}
func (noSockets) Broadcast(string, bool, []byte)               {}
func (noSockets) Close(SocketID, int, string)                  {}
func (noSockets) List(string) []SocketInfo                     { return nil }
func (noSockets) SetAttachment(SocketID, []byte) error         { return ErrNoSockets }
func (noSockets) Attachment(SocketID) ([]byte, error)          { return nil, ErrNoSockets }
func (noSockets) SetAutoResponse(string, string) error         { return ErrNoSockets }
func (noSockets) LastAutoResponse(SocketID) (time.Time, error) { return time.Time{}, ErrNoSockets }
