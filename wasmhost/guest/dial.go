package guest

import (
	"errors"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// Outbound WebSockets (wasmhost/ABI.md, ws_dial, minor version 2). During
// any event an actor may open a client WebSocket to a service outside the
// cluster with DialSocket. The socket belongs to the node, as an accepted
// one does: the actor may hibernate while it stays open, what arrives on
// it comes to the handler registered with HandleSocket (SocketID.Dialed
// tells it apart), and Sockets sends on it, closes it and lists it.
//
// A socket lives on the node that opened it. When the actor leaves that
// node (a drain, a move), the socket is closed, and the actor gets its
// close event (code 1006) at its next wake, wherever that is, with the
// URL and Tags it was dialed with, so that it can dial again: exactly one
// close or error event comes for each socket DialSocket returned.

// Errors of DialSocket (wasmhost/ABI.md, ws_dial).
var (
	// ErrBadDial: the URL (ws:// or wss:// and a host) or the tags (at
	// most MaxTags, each 1 to MaxTagBytes bytes) are refused, or the event
	// rolled back (Rollback) before it. Nothing was dialed.
	ErrBadDial = errors.New("guest: bad outbound socket")
	// ErrDialRefused: the node's egress allow-list does not allow where
	// the socket goes (wasmkeep serve --egress-allow). Nothing was dialed.
	ErrDialRefused = errors.New("guest: outbound socket refused by the egress allow-list")
	// ErrDialLimit: the actor has MaxDialed outbound sockets open.
	ErrDialLimit = errors.New("guest: too many outbound sockets")
	// ErrDialFailed: no connection, or the service refused the handshake.
	ErrDialFailed = errors.New("guest: outbound socket failed")
	// ErrNoSockets: the node serves no WebSockets.
	ErrNoSockets = errors.New("guest: this node serves no WebSockets")
)

// MaxDialed is how many outbound sockets one actor may have open.
const MaxDialed = 16

// DialSocket opens a WebSocket to url (ws:// or wss://), sending header
// with the handshake, the socket carrying tags (as Accept's) to List and
// Broadcast by, and returns its ID once it is open. It may be called
// during any event. Like Fetch it is a commit point: the writes the event
// made so far (and its actor's earlier writes) are committed before the
// service is dialed; if they cannot be, DialSocket returns ErrUnavailable
// and the event fails whatever it answers. ErrUnavailable is also the
// node taking no more sockets now.
func DialSocket(url string, header []Field, tags ...string) (SocketID, error) {
	n := 12 + len(url)
	for _, f := range header {
		n += 8 + len(f.Name) + len(f.Value)
	}
	for _, t := range tags {
		n += 4 + len(t)
	}
	b := make([]byte, 0, n)
	b = wire.AppendString(b, url)
	b = appendFields(b, header)
	b = wire.AppendU32(b, uint32(len(tags)))
	for _, t := range tags {
		b = wire.AppendString(b, t)
	}
	switch id := wsDial(b); {
	case id == -1:
		return 0, ErrBadDial
	case id == -2:
		return 0, ErrDialRefused
	case id == -3:
		return 0, ErrDialLimit
	case id == -4:
		return 0, ErrUnavailable
	case id == -6:
		return 0, ErrNoSockets
	case id < 0:
		return 0, ErrDialFailed
	default:
		return SocketID(id), nil
	}
}
