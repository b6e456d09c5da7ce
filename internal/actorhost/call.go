package actorhost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Caller routes a call to the actor it names: an event here (through
// here, the Host of the calling actor, which passes itself), or a request
// to the node that holds it. The node provides it (package ingress), made
// before the Host. Errors: ErrUnknownClass, an *UnavailableError,
// ErrCallFailed, or ErrBadCall naming what is wrong with the address or
// the request.
type Caller interface {
	Call(ctx context.Context, here *Host, to ownership.Actor, req *actors.Request) (*actors.Response, error)
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
	t     *actorstore.Txn
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

func (ec *eventCall) call(ctx context.Context, to ownership.Actor, req *actors.Request) (*actors.Response, error) {
	ra := ec.ra
	if ra.h.cfg.Caller == nil {
		return nil, fmt.Errorf("%w: this node routes no calls", actors.ErrCallFailed)
	}
	chain := append(slices.Clip(ec.outer), ra.actor)
	if slices.Contains(chain, to) {
		return nil, fmt.Errorf("%w: %s/%s is waiting in this call chain", actors.ErrCallCycle, to.Class, to.Name)
	}
	if len(chain) > actors.MaxCallDepth {
		return nil, fmt.Errorf("%w: chain deeper than %d calls", actors.ErrCallCycle, actors.MaxCallDepth)
	}
	if err := ec.commitPoint(); err != nil {
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
	if err != nil && cctx.Err() != nil && !errors.Is(err, actors.ErrCallFailed) {
		err = fmt.Errorf("%w: no answer from %s/%s within %v: %w", actors.ErrCallFailed, to.Class, to.Name, time.Since(start).Round(time.Millisecond), err)
	}
	return resp, err
}

// Fetcher sends the outbound HTTP requests of actors (package egress).
// Check refuses, without sending anything, a request that could not be
// sent (its method, URL, body or the allow-list's rules for its host);
// Fetch sends one for actor a and reads its whole answer.
type Fetcher interface {
	Check(req *actors.FetchRequest) error
	Fetch(ctx context.Context, a ownership.Actor, req *actors.FetchRequest) (*actors.FetchResponse, error)
}

// fetch sends an outbound HTTP request from the event: a commit point,
// as a call is, once the request is known to be one that may be sent.
func (ec *eventCall) fetch(ctx context.Context, req *actors.FetchRequest) (*actors.FetchResponse, error) {
	ra := ec.ra
	f := ra.h.cfg.Fetcher
	if f == nil {
		return nil, fmt.Errorf("%w: this node sends no outbound requests", actors.ErrFetchRefused)
	}
	if err := f.Check(req); err != nil {
		return nil, err
	}
	if err := ec.commitPoint(); err != nil {
		return nil, err
	}
	ec.earlier = true // sent: the service may act on it, whatever comes back
	ec.m.stage.Store(stageCalled)
	return f.Fetch(ctx, ra.actor, req)
}

// commitPoint makes durable, before a call or a fetch leaves, everything
// the event could reveal (commitForCall). Should the event not end, a
// retry with its key must not run again what took effect before: the key
// is kept as taking effect in part, with the same commit.
func (ec *eventCall) commitPoint() error {
	ra := ec.ra
	if k := ec.m.key; k != nil && !ec.marked {
		e := actorstore.LedgerEntry{Partial: true, Sum: k.sum}
		if err := ec.t.LedgerRecord(k.ledger(), &e, time.Now(), ra.h.cfg.MaxKeys, k.absent); err != nil {
			return err
		}
		ec.marked = true
	}
	return ra.commitForCall(ec)
}

// callSent says whether a call that returned err may have reached its
// callee: anything but a refusal, or a call refused before it left.
func callSent(err error) bool {
	var ua *UnavailableError
	return !errors.As(err, &ua) && !errors.Is(err, actors.ErrUnknownClass) && !errors.Is(err, actors.ErrBadCall) && !errors.Is(err, actors.ErrCallCycle)
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
	wrote := t.Dirty()
	if wrote {
		ra.indexAlarms(t) // the commit below carries them
		ra.version++
		t.Rebase(ra.version)
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
