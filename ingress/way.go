package ingress

import (
	"context"
	"errors"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/peer"
)

// An event's way to its actor is one loop, whether it is a client's request
// (serveActor) or an actor's call (Call): run it here when this node holds
// the actor or may take it (Host.Dispatch), send it to the node that holds
// it otherwise, and try again within the failover wait while it may not
// have run. Only what differs between the two is given to the loop: how
// each runs here, how each is sent, and what key it starts with.

// way is one event on its way to its actor.
type way struct {
	a ownership.Actor
	// ctx is the event's context (its call chain), with no event key in
	// it: the loop gives each try the key the rules below say.
	ctx context.Context
	// key is the event's key, if keyed. keyHere says the event runs here
	// with it from the first try: a client's key, a peer's, or a call's that
	// must be remembered even when it takes no effect (EventKey.Always).
	// Otherwise the event runs here without it until it has been sent to
	// another node once, and with it (no longer fresh) after.
	key            actorhost.EventKey
	keyed, keyHere bool
	// keyless: a WebSocket upgrade, whose answer (a socket) cannot be
	// given twice, so it has no key.
	keyless bool
	// handOver: a draining node's refusal sends the event to the peer it
	// names. Not for an event another node sent here: it is sent once.
	handOver bool
	// here runs the event on this node (Host.Dispatch) under ctx.
	here func(ctx context.Context) (*actors.Response, *actorhost.Elsewhere, error)
	// send sends the event to the node at, with key (nil: none), and
	// says what became of it. Unless last, an answer that the event did
	// not run there, or (retrying) that its outcome is not known there
	// yet, is not the event's answer: the loop sends it again.
	send func(ctx context.Context, at actorhost.Elsewhere, key *actorhost.EventKey, last, retrying bool) (peer.Sent, error)
}

// wayEnd is how an event's way ended.
type wayEnd struct {
	// at is nil when the event ran here (or was refused here): resp and
	// err are its answer.
	resp *actors.Response
	err  error
	// at is the node the event was last sent to; sent what became of it:
	// peer.Answered when the holder's answer was given, peer.Unknown when
	// no answer came for a try that may have reached the event (its
	// outcome is unknown), anything else when no try ran it (refused).
	at   *actorhost.Elsewhere
	sent peer.Sent
	// retried: the event was sent again after a try that may have reached
	// it, for the whole failover wait.
	retried bool
}

// ranHere is what the first try of an event here gave. The entry makes that
// try itself, and builds a way only when the try does not end the event
// (goesOn): most events are served here, and a way's closures would cost
// each of them two allocations.
type ranHere struct {
	resp *actors.Response
	at   *actorhost.Elsewhere
	err  error
}

// ends says whether the first try here ends the event: served or refused
// here, not held elsewhere, not handed over, not to be tried again.
func (r ranHere) ends(keyHere, handOver bool) bool {
	return r.at == nil && !goesOn(r.err, keyHere, handOver)
}

// goesOn says whether an event refused or failed here goes on its way: a
// draining node's refusal naming a peer (handOver), or an outcome unknown
// of an event run here with its key, which another try finds out.
func goesOn(err error, keyHere, handOver bool) bool {
	if err == nil {
		return false
	}
	if ua := (*actorhost.UnavailableError)(nil); handOver && errors.As(err, &ua) && ua.Draining && ua.Peer != nil {
		return true
	}
	return keyHere && errors.Is(err, actors.ErrOutcomeUnknown) && !ran(err)
}

// deliver takes the event its way (see above) from its first try here,
// first, trying for up to wait after the first failure, and says how it
// ended.
func deliver(wait time.Duration, w way, first ranHere) wayEnd {
	f := failover{wait: wait}
	hereCtx, hereKeyed := w.ctx, false // what runs here, and whether with a key
	if w.keyed && w.keyHere {
		hereCtx, hereKeyed = actorhost.WithEventKey(w.ctx, w.key), true
	}
	retrying := false // a try before this one may have reached the event
	for try := 0; ; try++ {
		resp, at, err := first.resp, first.at, first.err
		if try > 0 {
			resp, at, err = w.here(hereCtx)
		}
		var ua *actorhost.UnavailableError
		handOver := false
		if at == nil && w.handOver && errors.As(err, &ua) && ua.Draining {
			// This node hands its actors over: the event goes to the peer
			// the keeper named, which takes the actor (its record released
			// here first). What that peer answers is the answer, its
			// refusal too: it cannot send the event on (an event is
			// forwarded once), and this node takes no actor any more, so
			// the client is better off asking another node itself than
			// waiting here (and keeping this node from stopping).
			at, handOver = ua.Peer, ua.Peer != nil
		}
		if at == nil {
			if hereKeyed && errors.Is(err, actors.ErrOutcomeUnknown) && !ran(err) && f.next(w.ctx) {
				// Its commit had no answer: with its key, another try
				// finds out whether it landed, and runs it if it did not.
				retrying = true
				continue
			}
			return wayEnd{resp: resp, err: err}
		}
		var sent *actorhost.EventKey
		if !w.keyless {
			// What is sent carries a key, so that it can be sent again
			// whatever becomes of it: the actor runs it at most once.
			// Sent for the first time, a key the node made is fresh: the
			// holder does not look for an earlier run of it. Run here
			// after it was sent, it is not.
			if !w.keyed {
				w.key, w.keyed = actorhost.NewNodeKey(), true
			}
			stale := w.key
			stale.Fresh = false
			hereCtx, hereKeyed = actorhost.WithEventKey(w.ctx, stale), true
			k := w.key
			k.Fresh = k.Fresh && !retrying
			sent = &k
		}
		out, ferr := w.send(w.ctx, *at, sent, f.last() || handOver, retrying)
		if out == peer.Answered || (out == peer.Unknown && !w.keyed) {
			return wayEnd{at: at, sent: out, err: ferr}
		}
		// Not sent, refused without running, or sent with no answer: sent
		// again once the holder answers or the record is free (the holder
		// fenced), within the failover wait. The key makes the last safe.
		retrying = retrying || out == peer.Unknown
		if !f.next(w.ctx) {
			if retrying {
				return wayEnd{at: at, sent: peer.Unknown, retried: true, err: ferr}
			}
			return wayEnd{at: at, sent: out, err: ferr}
		}
	}
}
