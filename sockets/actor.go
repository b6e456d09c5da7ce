package sockets

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// The operations of this file act for one actor: each takes the actor and
// finds only that actor's sockets, so an actor can never reach another's.
// Each is a boundary of the actor's room (contain, failure.go): a panic in
// it closes the room's sockets with 1011, and it returns ErrInternal.

// SocketInfo describes one open socket of an actor.
type SocketInfo struct {
	ID         ID
	Tags       []string
	Attachment []byte
	// URL is the URL an outbound socket was dialed to (Dial), "" for an
	// accepted one.
	URL string
}

// Send queues a message for socket id of a and returns at once; a writer
// goroutine sends it. data is copied. Errors: ErrUnknownSocket, ErrClosing,
// ErrInvalid (over MaxMessage; or a text message that is not UTF-8, which
// matches ErrInvalidUTF8 too: nothing is sent, and the socket stays open),
// ErrSlowReader (the send queue was full, or the node's queues were and
// this socket held the most: the socket is now closing with 1013),
// ErrInternal.
func (o *Owner) Send(a ownership.Actor, id ID, text bool, data []byte) (err error) {
	defer o.contain(a, opSend, &err)
	if err := o.checkMessage(text, data); err != nil {
		return fmt.Errorf("send on socket %v of %s: %w", id, a, err)
	}
	s, err := o.lookup(a, id)
	if err != nil {
		return err
	}
	o.fault(a, opSend)
	return s.send(kindOf(text), slices.Clone(data))
}

// Broadcast queues data for every open socket of a carrying tag (every open
// socket when tag is ""), as Send does, and returns how many it was queued
// for. A message Send refuses is refused for all (ErrInvalid). A socket
// whose queue is full is closed with 1013 and not counted. A
// socket whose upgrade is under way (its client may already hold the
// handshake's answer) is not counted either, but gets the message first
// once it is open.
func (o *Owner) Broadcast(a ownership.Actor, tag string, text bool, data []byte) (n int, err error) {
	b := batches.Get().(*batch)
	defer func() {
		// The room's boundary (contain), which first ends the claims the
		// broadcast holds, so that the failure's closes do not wait for
		// them.
		if p := recover(); p != nil {
			protect(func() { o.abandon(b) })
			n, err = 0, o.recovered(a, opBroadcast, p)
		}
		b.reset()
		batches.Put(b)
	}()
	if err := o.checkMessage(text, data); err != nil {
		return 0, fmt.Errorf("broadcast to %s: %w", a, err)
	}
	kind, shared := kindOf(text), slices.Clone(data) // one copy, read by every writer
	targets := o.broadcastTargets(a, tag, kind, shared)
	if len(targets) > 1 { // got before any socket is claimed: making one takes a while
		b.ring = o.rings.get()
	}
	for _, s := range targets {
		switch {
		case tag != "" && !slices.Contains(s.tags, tag):
		case s.url != "" || !s.claimDirect(len(shared)):
			// An outbound socket's frames are masked, each with its own
			// key: not the one frame the batch writes to every socket.
			b.queue = append(b.queue, s)
		case !s.wc.claim():
			b.unclaimed = append(b.unclaimed, s)
		default:
			b.direct = append(b.direct, s)
		}
	}
	o.fault(a, opBroadcast) // every target claimed
	n = o.writeDirect(b, kind, shared)
	for _, s := range b.unclaimed {
		if s.directDone(kind, shared, 0, errNoDirect) == nil { // queued
			n++
		}
		b.settled++
	}
	for _, s := range b.queue {
		if s.send(kind, shared) == nil {
			n++
		}
	}
	return n, nil
}

// Close starts the close handshake of socket id of a with code (one a close
// frame may carry: 1000 to 1003, 1007 to 1014, or an application's own, 3000
// to 4999) and reason (UTF-8, at most MaxCloseReason bytes), after the
// messages already queued. Sink.Gone is called before Close returns;
// Sink.Close follows when the client answers, or with 1006 after
// WriteTimeout.
func (o *Owner) Close(a ownership.Actor, id ID, code int, reason string) (err error) {
	defer o.contain(a, opClose, &err)
	if err := checkClose(code, reason); err != nil {
		return fmt.Errorf("close socket %v of %s: %w", id, a, err)
	}
	s, err := o.lookup(a, id)
	if err != nil {
		return err
	}
	o.fault(a, opClose)
	return s.close(code, reason, "actor")
}

// List returns a's open sockets (not closing) carrying tag, every open one
// when tag is "", in ID order (none if the room failed meanwhile).
func (o *Owner) List(a ownership.Actor, tag string) []SocketInfo {
	defer o.contain(a, opList, nil)
	o.fault(a, opList)
	list := o.sockets(a)
	slices.SortFunc(list, func(x, y *socket) int { return cmp.Compare(x.id, y.id) })
	out := []SocketInfo{}
	for _, s := range list {
		if tag != "" && !slices.Contains(s.tags, tag) {
			continue
		}
		s.mu.Lock()
		closing, att := s.closing, slices.Clone(s.attachment)
		s.mu.Unlock()
		if !closing {
			out = append(out, SocketInfo{ID: s.id, Tags: slices.Clone(s.tags), Attachment: att, URL: s.url})
		}
	}
	return out
}

// SetAttachment keeps data (copied, at most MaxAttachment bytes; nil
// removes it) with socket id of a until its slot is freed: it outlives the
// actor's hibernation.
func (o *Owner) SetAttachment(a ownership.Actor, id ID, data []byte) (err error) {
	defer o.contain(a, opAttachment, &err)
	if len(data) > MaxAttachment {
		return fmt.Errorf("attachment of socket %v of %s: %w: %d bytes, limit %d", id, a, ErrInvalid, len(data), MaxAttachment)
	}
	s, err := o.lookup(a, id)
	if err != nil {
		return err
	}
	o.fault(a, opAttachment)
	att := slices.Clone(data)
	s.mu.Lock()
	s.attachment = att
	s.mu.Unlock()
	return nil
}

// Attachment returns a copy of the attachment of socket id of a (nil when
// none).
func (o *Owner) Attachment(a ownership.Actor, id ID) (_ []byte, err error) {
	defer o.contain(a, opAttachment, &err)
	s, err := o.lookup(a, id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.attachment), nil
}

// AutoResponse is a pair the Owner answers by itself: a text message equal
// to Request gets Response back, without the Sink (and so without waking
// the actor). Both are UTF-8 (text messages).
type AutoResponse struct {
	Request  string
	Response string
	response []byte
}

// SetAutoResponse sets a's auto-response for all its sockets, present and
// future; a zero AutoResponse removes it. Each string is 1 to
// MaxAutoResponse bytes. It stays until removed, whether the actor has
// sockets or not: the node removes it when the actor leaves this node.
func (o *Owner) SetAutoResponse(a ownership.Actor, ar AutoResponse) (err error) {
	defer o.contain(a, opAutoResponse, &err)
	o.fault(a, opAutoResponse)
	if ar.Request == "" && ar.Response == "" {
		if r := o.rooms.find(a); r != nil {
			r.auto.Store(nil)
			o.rooms.dropIfEmpty(r)
		}
		return nil
	}
	if ar.Request == "" || ar.Response == "" || len(ar.Request) > MaxAutoResponse || len(ar.Response) > MaxAutoResponse {
		return fmt.Errorf("auto-response of %s: %w: request (%d bytes) and response (%d bytes) must have 1 to %d bytes", a, ErrInvalid, len(ar.Request), len(ar.Response), MaxAutoResponse)
	}
	if !utf8.ValidString(ar.Request) || !utf8.ValidString(ar.Response) {
		return fmt.Errorf("auto-response of %s: %w: %w", a, ErrInvalid, ErrInvalidUTF8)
	}
	ar.response = []byte(ar.Response)
	r := o.rooms.lock(a)
	r.auto.Store(&ar)
	r.mu.Unlock()
	return nil
}

// AutoResponseOf returns a's auto-response (zero when none).
func (o *Owner) AutoResponseOf(a ownership.Actor) (ar AutoResponse) {
	defer o.contain(a, opAutoResponse, nil)
	if r := o.rooms.find(a); r != nil {
		if p := r.auto.Load(); p != nil {
			ar = *p
		}
	}
	ar.response = nil
	return ar
}

// LastAutoResponse returns when socket id of a was last auto-answered (the
// zero time if never).
func (o *Owner) LastAutoResponse(a ownership.Actor, id ID) (_ time.Time, err error) {
	defer o.contain(a, opAutoResponse, &err)
	s, err := o.lookup(a, id)
	if err != nil {
		return time.Time{}, err
	}
	ns := s.lastAuto.Load()
	if ns == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, ns), nil
}

// checkMessage refuses a message the node must not send: over
// MaxMessage, or text that is not UTF-8 (RFC 6455 section 5.6: a client
// fails the connection on it, as the node does).
func (o *Owner) checkMessage(text bool, data []byte) error {
	if len(data) > o.cfg.MaxMessage {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalid, len(data), o.cfg.MaxMessage)
	}
	if text && !utf8.Valid(data) {
		return fmt.Errorf("%w: %w", ErrInvalid, ErrInvalidUTF8)
	}
	return nil
}

func kindOf(text bool) frameKind {
	if text {
		return textFrame
	}
	return binaryFrame
}

// checkClose accepts the codes a close frame may carry (validCloseCode)
// and a reason of UTF-8 that fits one.
func checkClose(code int, reason string) error {
	if !validCloseCode(code) {
		return fmt.Errorf("%w: close code %d cannot be sent", ErrInvalid, code)
	}
	if len(reason) > MaxCloseReason {
		return fmt.Errorf("%w: close reason of %d bytes, limit %d", ErrInvalid, len(reason), MaxCloseReason)
	}
	if !utf8.ValidString(reason) {
		return fmt.Errorf("%w: close reason: %w", ErrInvalid, ErrInvalidUTF8)
	}
	return nil
}

// broadcastTargets returns a's open sockets, and keeps the message for the
// sockets of a being accepted that carry tag (every one for ""), in the
// same hold of the lock that makes an accepted socket visible: each
// broadcast reaches a new socket either through its pending queue or
// directly, never neither.
func (o *Owner) broadcastTargets(a ownership.Actor, tag string, kind frameKind, data []byte) []*socket {
	r := o.rooms.find(a)
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pending {
		if !p.dial && (tag == "" || slices.Contains(p.tags, tag)) {
			kept := p.bytes
			p.keep(kind, data, o.cfg.SendQueue)
			o.hold(p.bytes - kept)
		}
	}
	return r.socketsLocked(nil)
}
