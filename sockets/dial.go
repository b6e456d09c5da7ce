package sockets

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Outbound sockets. An actor may open a client WebSocket to a service
// (Dial); from then on it is a socket of the actor's room like any other:
// it counts against MaxSockets, is pinged and closed for silence, its
// messages, close and error reach the Sink, the actor's Send, Broadcast,
// Close, List and attachments reach it, and a CloseActor or CloseAll
// closes it. So the actor may hibernate while it stays open, and a message
// on it wakes the actor, on this node, as a client's message does.
//
// What differs is the connection's side: the node is the client, so its
// frames are masked, each with a fresh key (a direct write masks its
// frame, direct.go; a broadcast writes each outbound socket on its own
// rather than in its batch of one shared frame), and the service's close
// frames are judged by gorilla alone (closeframe.go judges a client's). The dial
// goes through Config.Dial, the node's egress dialer, which refuses any
// address its allow-list does not name, at the address dialed.

// ErrNoDial: the Owner has no Config.Dial: this node opens no outbound
// sockets.
var ErrNoDial = errors.New("this node opens no outbound sockets")

// ErrDialFailed is matched (errors.Is) by a dial that reached no service
// or whose handshake failed (an answer other than 101, a timeout).
var ErrDialFailed = errors.New("outbound socket failed to open")

// DialRequest is an outbound socket to open.
type DialRequest struct {
	// URL is ws:// or wss://.
	URL string
	// Header is sent with the handshake (Host, Upgrade, Connection and the
	// Sec-WebSocket-* headers are the dialer's own, except
	// Sec-WebSocket-Protocol).
	Header http.Header
	// Tags, as for Accept.
	Tags []string
}

// DialedBit is set in the ID of every outbound socket (and of no accepted
// one), so that whoever holds an ID can tell which it names. The IDs of
// outbound sockets count from a random start in each Owner, so that an
// actor that keeps one across its moves does not meet it again on another
// node (accepted sockets never outlive their node's hold of the actor).
const DialedBit ID = 1 << 62

// Dialed says whether id names an outbound socket.
func (id ID) Dialed() bool { return id&DialedBit != 0 }

// CheckDialURL checks that raw is a URL an outbound socket may be opened
// to: ws:// or wss:// with a host, and returns it parsed.
func CheckDialURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" || u.Host == "" {
		return nil, fmt.Errorf("%w: URL %q: want ws:// or wss:// and a host", ErrInvalid, u.Redacted())
	}
	return u, nil
}

// Stamp names this Owner among every Owner of every node, for the whole
// time it lives: an ID is unique only within its Owner, so a record of a
// socket kept outside the node (an actor's record of its outbound sockets)
// names the socket by (Stamp, ID), and a record with another stamp names
// a socket that is gone.
func (o *Owner) Stamp() uint64 { return o.stamp }

func newStamp() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1 // never 0
}

// Dial opens an outbound WebSocket on behalf of actor a, owned by the
// node as an accepted one is (see the comment at the top of this file),
// and returns its ID once it is open: Sink.Opened has been called, and its
// messages go to the Sink. ctx bounds the dial and the handshake, as does
// Config.DialTimeout.
//
// Errors: ErrInvalid (the URL, the tags, the actor), ErrTooManySockets,
// ErrShutDown, ErrNoDial, or ErrDialFailed, which wraps Config.Dial's
// error when it refused or failed (so its refusal is matched through it). A CloseActor of a, or a CloseAll, while the
// dial is under way closes the socket as soon as it is open (the ID is
// returned all the same).
func (o *Owner) Dial(ctx context.Context, a ownership.Actor, req DialRequest) (ID, error) {
	if o.cfg.Dial == nil {
		return 0, ErrNoDial
	}
	u, err := CheckDialURL(req.URL)
	if err == nil {
		err = checkAccept(a, req.Tags)
	}
	if err != nil {
		o.m.dials.WithLabelValues("invalid").Inc()
		return 0, fmt.Errorf("dial socket for %s: %w", a, err)
	}
	if !o.takeSlots(1) {
		if o.closed.Load() {
			o.m.dials.WithLabelValues("shut_down").Inc()
			return 0, fmt.Errorf("dial socket for %s: %w", a, ErrShutDown)
		}
		o.m.dials.WithLabelValues("max_sockets").Inc()
		return 0, fmt.Errorf("dial socket for %s: %w (limit %d)", a, ErrTooManySockets, o.cfg.MaxSockets)
	}
	o.allMu.RLock()
	if o.closed.Load() {
		o.allMu.RUnlock()
		o.held.Add(-1)
		o.m.dials.WithLabelValues("shut_down").Inc()
		return 0, fmt.Errorf("dial socket for %s: %w", a, ErrShutDown)
	}
	o.wg.Add(1) // the reader's, or released below
	// Pending as an upgrade is, for the closes made meanwhile; it keeps no
	// broadcast (dial): what the actor broadcast before it had the socket
	// is not the socket's.
	p := &pendingAccept{tags: req.Tags, dial: true}
	rm := o.rooms.lock(a)
	rm.pending = append(rm.pending, p)
	rm.mu.Unlock()
	o.allMu.RUnlock()

	conn, wc, err := o.dial(ctx, u, req.Header)
	if err != nil {
		rm.mu.Lock()
		rm.dropPendingLocked(p)
		rm.mu.Unlock()
		o.rooms.dropIfEmpty(rm)
		o.held.Add(-1)
		o.wg.Done()
		return 0, fmt.Errorf("dial socket for %s to %s: %w", a, u.Redacted(), err)
	}
	s := o.newSocket(ID(o.nextDial.Add(1))&(DialedBit-1)|DialedBit, rm, req.Tags, conn)
	s.url, s.wc = u.String(), wc
	o.cfg.Sink.Opened(a)
	o.m.dials.WithLabelValues("opened").Inc()
	o.admit(s, rm, p)
	return s.id, nil
}

// dial connects to u and runs the client's handshake.
func (o *Owner) dial(ctx context.Context, u *url.URL, header http.Header) (*websocket.Conn, *wireConn, error) {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.DialTimeout)
	defer cancel()
	// A ws:// socket's TCP connection is written directly as an accepted
	// one's is (direct.go), its frames masked; wss:// has no direct
	// writes (TLS is between).
	var wc *wireConn
	dial := o.cfg.Dial
	if u.Scheme == "ws" {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := o.cfg.Dial(ctx, network, addr)
			if err == nil {
				if wc = newWireConn(c); wc != nil {
					return clientWire{wc}, nil
				}
			}
			return c, err
		}
	}
	d := websocket.Dialer{
		NetDialContext:   dial,
		Proxy:            nil, // what is dialed is what the dialer checks
		HandshakeTimeout: o.cfg.DialTimeout,
		ReadBufferSize:   readBufferSize,
		WriteBufferSize:  4096,
		WriteBufferPool:  &writeBuffers,
		TLSClientConfig:  o.cfg.DialTLS,
	}
	h := http.Header{}
	for k, v := range header {
		switch http.CanonicalHeaderKey(k) {
		case "Host", "Upgrade", "Connection", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions":
			continue // the dialer's own
		}
		h[k] = v
	}
	conn, resp, err := d.DialContext(ctx, u.String(), h)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		o.m.dials.WithLabelValues("failed").Inc()
		if resp != nil {
			return nil, nil, fmt.Errorf("%w: the service answered %s", ErrDialFailed, strings.TrimSpace(resp.Status))
		}
		// The dialer's refusal stays matchable (errors.Is) through it.
		return nil, nil, fmt.Errorf("%w: %w", ErrDialFailed, err)
	}
	return conn, wc, nil
}

// Holds says whether socket id of a holds its slot here: open, or closing
// and its terminal event not yet sent.
func (o *Owner) Holds(a ownership.Actor, id ID) bool {
	_, err := o.lookup(a, id)
	return err == nil
}
