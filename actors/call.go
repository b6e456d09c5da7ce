package actors

import (
	"context"
	"errors"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Actor-to-actor calls. During an event, an actor may send a request to
// another actor with Call and wait for its response, wherever that actor
// lives: resident here, hibernated, or held by another node (the call is
// then forwarded to it, like an HTTP request). The callee serves it as one
// event of its own, in its own order.
//
// A call is a commit point for the caller. Before the request leaves, every
// write the caller's event could reveal is made durable: the writes of its
// earlier events and the event's own writes so far, committed together;
// and the caller's hold must still be allowed to act. So the callee never
// sees (and can never act on) a write that a crash could undo. The event's
// writes after the call commit when it ends; should it fail then, only
// those are discarded. A commit that fails before the call fails the call
// and the event.
//
// Events of one actor never overlap, so a call back to an actor that is
// waiting for a call of its own would wait forever. The actors of a call
// chain travel with it (to other nodes too), and a call to one of them is
// refused at once with ErrCallCycle; so is a chain deeper than
// MaxCallDepth. Two actors calling each other from two unrelated events
// cannot be told apart from slow callees: each waits until the call's
// bound (the node's call timeout, --call-timeout, or the event's own deadline) ends it.

// MaxCallDepth bounds a chain of calls: an event reached through this many
// calls cannot call further.
const MaxCallDepth = 16

// ErrUnavailable is matched (errors.Is) by the errors of an event or a
// call refused before it ran: the actor could not be acted for here or
// anywhere for now (its hold, its node's lease or the bucket). It took no
// effect; a retry is safe. A storage read that the bucket could not answer
// fails the event with it too.
var ErrUnavailable = errors.New("actor unavailable")

// ErrOutcomeUnknown is matched (errors.Is) by the errors of an event or a
// call that may or may not have taken effect (its commit's answer was
// lost, or its node stopped answering after it was sent).
var ErrOutcomeUnknown = errors.New("actor event outcome unknown")

// ErrUnknownClass: no class is registered under the name.
var ErrUnknownClass = errors.New("unknown class")

// ErrCallCycle: the callee is already in the call chain (it waits for this
// very call to return), or the chain is MaxCallDepth deep.
var ErrCallCycle = errors.New("actor call cycle")

// ErrBadCall is matched (errors.Is) by a call refused for what it asks: a
// bad class or actor name, method, path or body.
var ErrBadCall = errors.New("bad actor call")

// ErrNotInEvent: Call was given a context that is not an event's.
var ErrNotInEvent = errors.New("actor call outside an event")

// ErrCallFailed is matched (errors.Is) by a call that could not be
// completed: its bound ended, or the callee's node did not answer.
var ErrCallFailed = errors.New("actor call failed")

// Call sends req to the actor to and returns its response. ctx must be the
// context of the calling event (the one Handle or HandleSocket was given,
// or one derived from it); the call is bounded by it and by the node's
// call timeout. See the comment at the top of this file for what a call
// commits first, and the errors it can return besides the Caller's.
func Call(ctx context.Context, to ownership.Actor, req *Request) (*Response, error) {
	ev := eventOf(ctx)
	if ev == nil {
		return nil, ErrNotInEvent
	}
	return ev.Call(ctx, to, req)
}
