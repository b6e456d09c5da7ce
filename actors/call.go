package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

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
// bound (Config.CallTimeout, or the event's own deadline) ends it.

// MaxCallDepth bounds a chain of calls: an event reached through this many
// calls cannot call further.
const MaxCallDepth = 16

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

// Caller routes a call to the actor it names: an event here (through
// here, the Host of the calling actor, which passes itself), or a request
// to the node that holds it. The node provides it (package ingress), made
// before the Host. Errors: ErrUnknownClass, an *UnavailableError,
// ErrCallFailed, or ErrBadCall naming what is wrong with the address or
// the request.
type Caller interface {
	Call(ctx context.Context, here *Host, to ownership.Actor, req *Request) (*Response, error)
}

// Call sends req to the actor to and returns its response. ctx must be the
// context of the calling event (the one Handle or HandleSocket was given,
// or one derived from it); the call is bounded by it and by the node's
// call timeout. See the comment at the top of this file for what a call
// commits first, and the errors it can return besides the Caller's.
func Call(ctx context.Context, to ownership.Actor, req *Request) (*Response, error) {
	ev, ok := ctx.Value(eventValuesKey{}).(*eventValues)
	if !ok {
		return nil, ErrNotInEvent
	}
	return ev.call.call(ctx, to, req)
}

type chainKey struct{}

// WithCallChain returns ctx carrying the actors whose events wait for the
// call ctx serves, outermost first: an event delivered with it refuses to
// call any of them. The node uses it for calls that arrive from another
// node.
func WithCallChain(ctx context.Context, chain []ownership.Actor) context.Context {
	return context.WithValue(ctx, chainKey{}, chain)
}

// CallChain returns the call chain ctx carries (see WithCallChain).
func CallChain(ctx context.Context) []ownership.Actor {
	chain, _ := ctx.Value(chainKey{}).([]ownership.Actor)
	return chain
}

// eventCall is what Call needs of the running event: its resident actor (on
// whose goroutine the event, and so the call, runs) and its storage.
type eventCall struct {
	ra    *residentActor
	actx  actor.Context
	t     *txn
	outer []ownership.Actor // the chain the event was called through, if any
	m     *eventMsg
	// earlier: part of the event took effect (a call was sent, or its
	// writes so far landed at a commit point); wroteAtFailure: a commit
	// point that did not land carried writes of the event.
	earlier, wroteAtFailure bool
	// calls counts the calls the event made (each has a key of its own);
	// marked: the event's key is kept as taking effect in part.
	calls  int
	marked bool
}

func (ec *eventCall) call(ctx context.Context, to ownership.Actor, req *Request) (*Response, error) {
	ra := ec.ra
	if ra.h.cfg.Caller == nil {
		return nil, fmt.Errorf("%w: this node routes no calls", ErrCallFailed)
	}
	chain := append(slices.Clip(ec.outer), ra.actor)
	if slices.Contains(chain, to) {
		return nil, fmt.Errorf("%w: %s/%s is waiting in this call chain", ErrCallCycle, to.Class, to.Name)
	}
	if len(chain) > MaxCallDepth {
		return nil, fmt.Errorf("%w: chain deeper than %d calls", ErrCallCycle, MaxCallDepth)
	}
	if k := ec.m.key; k != nil && !ec.marked {
		// Should the event not end, a retry with its key must not run
		// again what took effect before: it is kept with the commit that
		// makes its writes so far durable.
		e := ledgerEntry{partial: true, sum: k.sum}
		if err := ec.t.ledgerRecord(k.EventKey, &e, time.Now(), ra.h.cfg.MaxKeys, k.absent); err != nil {
			return nil, err
		}
		ec.marked = true
	}
	if err := ra.commitForCall(ec); err != nil {
		return nil, err
	}
	var from *EventKey
	if ec.m.key != nil {
		from = &ec.m.key.EventKey
	}
	key := callKey(from, ra.actor.String(), to.String(), ec.calls)
	ec.calls++
	cctx, cancel := context.WithTimeout(WithEventKey(WithCallChain(ctx, chain), key), ra.h.cfg.CallTimeout)
	defer cancel()
	start := time.Now()
	resp, err := ra.h.cfg.Caller.Call(cctx, ra.h, to, req)
	if callSent(err) {
		ec.earlier = true
		ec.m.stage.Store(stageCalled)
	}
	if err != nil && cctx.Err() != nil && !errors.Is(err, ErrCallFailed) {
		err = fmt.Errorf("%w: no answer from %s/%s within %v: %w", ErrCallFailed, to.Class, to.Name, time.Since(start).Round(time.Millisecond), err)
	}
	return resp, err
}

// callSent says whether a call that returned err may have reached its
// callee: anything but a refusal, or a call refused before it left.
func callSent(err error) bool {
	var ua *UnavailableError
	return !errors.As(err, &ua) && !errors.Is(err, ErrUnknownClass) && !errors.Is(err, ErrBadCall) && !errors.Is(err, ErrCallCycle)
}

// commitForCall makes durable everything the running event could reveal
// to a callee: the event's writes so far join the working state (t goes on
// over it), and the working state is committed; then the hold must still
// be allowed to act. It runs on the resident actor's goroutine, in the
// middle of the event: commits are waited for here, not through the mailbox
// (their done messages, arriving later, are ignored).
func (ra *residentActor) commitForCall(ec *eventCall) error {
	ctx, t := ec.actx, ec.t
	gen := ra.gen
	wrote := t.dirty()
	if wrote {
		ra.version++
		t.rebase(ra.version)
	}
	for ra.loaded && ra.gen == gen && ra.durable < ra.version {
		if ra.inflight == nil {
			ra.startCommit(ctx)
		}
		ra.committedAt(ctx, <-ra.inflight.done)
	}
	if !ra.loaded || ra.gen != gen {
		ec.wroteAtFailure = wrote
		return ra.h.unavailable(ra.actor, "commit before the call did not land")
	}
	if wrote {
		ec.earlier = true // its writes so far are durable
	}
	if !ra.h.cfg.Keeper.MayAct(ra.actor, ra.gen) {
		return ra.h.unavailable(ra.actor, "hold no longer live or node lease not valid")
	}
	return nil
}
