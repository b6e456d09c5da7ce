package guest

import (
	"errors"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// WebSockets. A request handler accepts a WebSocket upgrade by returning
// Accept(tags...); the socket then belongs to the node, so the guest
// may be replaced (and the actor hibernate) while it stays open. What
// arrives on it comes to the handler registered with HandleSocket. During
// any event, Sockets reaches the actor's sockets: sends and closes go out
// with the event's output, after its storage writes are durable, and not
// at all if the event fails.

// SocketID names one of the actor's sockets.
type SocketID uint64

// Dialed says whether the socket is one the actor opened with DialSocket
// (an outbound socket), not one it accepted.
func (id SocketID) Dialed() bool { return id&wire.SocketDialed != 0 }

// SocketEventKind says what happened on a socket.
type SocketEventKind uint8

// Socket event kinds.
const (
	// SocketMessage: a message arrived (Text, Data).
	SocketMessage SocketEventKind = wire.SocketMessage
	// SocketClose: the socket closed (Code, Reason, Clean): the peer's
	// close frame, or 1006 when the connection dropped without one.
	SocketClose SocketEventKind = wire.SocketClose
	// SocketError: the node closed the socket for a fault (Code, Err).
	SocketError SocketEventKind = wire.SocketError
)

// SocketEvent is one event of one of the actor's sockets. By the time of
// a close or error event the socket is no longer listed.
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
	// again. That event comes exactly once per socket DialSocket
	// returned, wherever the actor is when it comes.
	URL  string
	Tags []string
}

// SocketInfo describes one open socket of the actor.
type SocketInfo struct {
	ID         SocketID
	Tags       []string
	Attachment []byte
	// URL is the URL an outbound socket was dialed to, "" for a socket
	// the actor accepted.
	URL string
}

// socketHandler is the registered socket event handler. Invariant: set
// only by package initialisers.
var socketHandler func(*SocketEvent) error

// HandleSocket registers h as the handler of socket events. Call it once,
// from an init function. A handler that returns an error fails its event:
// its storage writes and its sends are discarded, and the guest is
// replaced. Without a handler, socket events are dropped.
func HandleSocket(h func(*SocketEvent) error) {
	if socketHandler != nil {
		panic("guest: HandleSocket called twice")
	}
	socketHandler = h
}

// Limits of Accept, SetAttachment and Close, as the host checks them.
const (
	MaxTags        = 10
	MaxTagBytes    = 256
	MaxAttachment  = 16 << 10
	MaxCloseReason = 123
)

// Accept accepts the WebSocket upgrade of the request being served, the
// socket carrying tags (at most MaxTags, each 1 to MaxTagBytes bytes) to
// List and Broadcast by. Return its response from the request handler. If
// the host refuses (bad tags, or not called from a request handler), the
// response is a 500 saying so.
func Accept(tags ...string) *Response {
	n := 4
	for _, t := range tags {
		n += 4 + len(t)
	}
	b := make([]byte, 0, n)
	b = wire.AppendU32(b, uint32(len(tags)))
	for _, t := range tags {
		b = wire.AppendString(b, t)
	}
	if wsAccept(b) != 0 {
		return Text(500, "guest: websocket accept refused (bad tags, or not a request)\n")
	}
	return &Response{Status: 101}
}

// ErrSocket is returned by SetAttachment for an attachment over
// MaxAttachment or a socket that is gone.
var ErrSocket = errors.New("guest: socket gone or attachment too large")

// ErrAutoResponse is returned by SetAutoResponse when the host refuses the
// pair.
var ErrAutoResponse = errors.New("guest: auto-response refused")

// SocketSet is the set of sockets of the actor whose event is running.
// Use the package variable Sockets.
type SocketSet struct{}

// Sockets is the sockets of the current event's actor.
var Sockets SocketSet

func flags(text bool) uint32 {
	if text {
		return wire.FlagText
	}
	return 0
}

// Send queues a message for socket id; it goes out with the event's
// output. A socket that closed meanwhile is passed over.
func (SocketSet) Send(id SocketID, text bool, data []byte) {
	wsSend(uint64(id), flags(text), data)
}

// Broadcast queues a message for every open socket carrying tag (every
// socket when tag is ""); it goes out with the event's output.
func (SocketSet) Broadcast(tag string, text bool, data []byte) {
	wsBroadcast(tag, flags(text), data)
}

// Close queues a close of socket id with code and reason; it goes out
// with the event's output. A code that cannot be sent (1000 to 1014 but
// 1004 to 1006, or 3000 to 4999) or a reason over MaxCloseReason bytes
// sends a 1011 close without a reason instead.
func (SocketSet) Close(id SocketID, code int, reason string) {
	if code < -1<<31 || code > 1<<31-1 || wsClose(uint64(id), int32(code), reason) != 0 {
		wsClose(uint64(id), 1011, "")
	}
}

// List returns the actor's open sockets carrying tag ("" for all), in
// the order they were accepted (those it dialed after those it
// accepted).
func (SocketSet) List(tag string) []SocketInfo {
	buf := make([]byte, wsListLen(tag))
	wsListRead(buf)
	list, ok := decodeSocketList(buf)
	if !ok {
		panic("guest: socket list from the host is malformed")
	}
	return list
}

// SetAttachment keeps data (at most MaxAttachment bytes; empty removes
// it) with socket id until it closes: it outlives the guest and the
// actor's hibernation. It takes effect at once. It fails with ErrSocket.
func (SocketSet) SetAttachment(id SocketID, data []byte) error {
	if wsAttachmentSet(uint64(id), data) != 0 {
		return ErrSocket
	}
	return nil
}

// Attachment returns the attachment of socket id, and false if it has
// none or is gone.
func (SocketSet) Attachment(id SocketID) ([]byte, bool) {
	n := wsAttachmentLen(uint64(id))
	if n < 0 {
		return nil, false
	}
	b := make([]byte, n)
	wsAttachmentRead(b)
	return b, true
}

// SetAutoResponse makes the node answer a text message equal to request
// with response, on any of the actor's sockets, without an event; both
// empty remove it. Each is at most 2048 bytes. It takes effect at once.
// It fails with ErrAutoResponse if the host refuses.
func (SocketSet) SetAutoResponse(request, response string) error {
	if wsAutoResponse(request, response) != 0 {
		return ErrAutoResponse
	}
	return nil
}

// LastAutoResponse is when the node last answered socket id with the
// auto-response, in Unix milliseconds: 0 if never; ok is false if the
// socket is gone.
func (SocketSet) LastAutoResponse(id SocketID) (unixMilli int64, ok bool) {
	at := wsLastAutoResponse(uint64(id))
	if at < 0 {
		return 0, false
	}
	return at, true
}

// onSocket serves one socket event: it pulls the event in and runs the
// socket handler. It returns a wire return code.
func onSocket() int32 {
	if socketHandler == nil {
		return wire.NotHandled
	}
	buf := make([]byte, socketEventLen())
	socketEventRead(buf)
	ev, ok := decodeSocketEvent(buf)
	if !ok {
		return wire.Failed
	}
	if socketHandler(ev) != nil {
		return wire.Failed
	}
	return wire.OK
}

func decodeSocketEvent(b []byte) (*SocketEvent, bool) {
	r := wire.NewReader(b)
	ev := &SocketEvent{Kind: SocketEventKind(r.U8()), Socket: SocketID(r.U64())}
	fl := r.U8()
	ev.Code = int(int32(r.U32()))
	data := r.Bytes()
	// Minor version 2 (the SDK's): a dialed socket's URL and tags.
	ev.URL = r.String()
	ev.Tags = readTags(r)
	if r.Err() {
		return nil, false
	}
	switch ev.Kind {
	case SocketMessage:
		ev.Text, ev.Data = fl&wire.FlagText != 0, data
	case SocketClose:
		ev.Clean, ev.Reason = fl&wire.FlagClean != 0, string(data)
	case SocketError:
		ev.Err = string(data)
	}
	return ev, true
}

func decodeSocketList(b []byte) ([]SocketInfo, bool) {
	r := wire.NewReader(b)
	list := make([]SocketInfo, r.Count(20))
	for i := range list {
		list[i].ID = SocketID(r.U64())
		list[i].Tags = readTags(r)
		list[i].Attachment = r.Bytes()
		list[i].URL = r.String() // minor version 2
	}
	return list, !r.Err()
}

// readTags reads a count of strings, then each; nil for none.
func readTags(r *wire.Reader) []string {
	n := r.Count(4)
	if n == 0 {
		return nil
	}
	tags := make([]string, n)
	for i := range tags {
		tags[i] = r.String()
	}
	return tags
}
