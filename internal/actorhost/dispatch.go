package actorhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
)

// An event's way is one direction: the node's entry (HTTP, a socket, an
// actor's call) hands it to Dispatch, which acquires the hold, delivers the
// event, and acquires and delivers again behind it while it was refused
// before it ran. The entry learns only the answer, or that another live
// node holds the actor (Elsewhere: it forwards or relays the event there).

// Elsewhere says another live node holds the actor: send the event there.
// Instance is that node's instance as this node knows it ("" when not
// known): what is sent is signed for it.
type Elsewhere struct {
	Node     ownership.NodeID
	Addr     string
	Instance ownership.InstanceID
}

// notRunTries bounds how often one event is granted and delivered when it
// was refused before it ran (UnavailableError.NotRun: the hold it was
// granted ended first, the actor having gone idle meanwhile). Nothing ran,
// so trying again is safe; each try is a new grant, after the idle hold
// ended, so the bound only stops an actor whose idle timeout is shorter
// than the way of an event to it (1 ms under the race detector on a loaded
// machine missed three times in a row in one run of 3,000).
const notRunTries = 10

// Dispatch runs req as one event of a: it acquires a's hold here and
// delivers the event (see Deliver), again while the event is refused
// before it ran. It returns the response once the event's writes are
// durable and its hold may act; or where a is held when another live node
// holds it; or an error: an *UnavailableError (refused here now: answer 503
// with its RetryAfter), a *DamagedError, ErrUnknownClass, keeper.
// ErrInvalidActor, or ctx's error (the event may still run). An event of
// a class this node does not serve goes where Config.Classes says.
func (e *Entry) Dispatch(ctx context.Context, a ownership.Actor, req *actors.Request) (*actors.Response, *Elsewhere, error) {
	var resp *actors.Response
	at, err := e.dispatch(ctx, a, 0, func(gen ownership.Generation, state *ownership.Sealed) error {
		r := e.run(ctx, &eventMsg{ctx: ctx, actor: a, gen: gen, sealed: state, req: req})
		resp = r.resp
		return r.err
	})
	return resp, at, err
}

// DispatchSocket runs a socket's event as Dispatch runs a request, with
// patience: a refusal that may pass (the bucket did not answer, the record
// was contended, the lease is being renewed: not a drain, a stop or
// damage) is tried again after the wait it suggests, for up to patience
// after the first refusal, since a socket's client cannot be told to retry.
// woke reports that the actor was not resident: the event woke it.
func (e *Entry) DispatchSocket(ctx context.Context, a ownership.Actor, ev *actors.SocketEvent, patience time.Duration) (woke bool, at *Elsewhere, err error) {
	at, err = e.dispatch(ctx, a, patience, func(gen ownership.Generation, state *ownership.Sealed) error {
		r := e.run(ctx, &eventMsg{ctx: ctx, actor: a, gen: gen, sealed: state, sock: ev})
		woke = r.woke
		return r.err
	})
	return woke, at, err
}

// Routable says whether an event of a can be served: its class is served
// here, or by a node Config.Classes knows of. The error is the one
// Dispatch would return (ErrUnknownClass, or an *UnavailableError when the
// nodes that serve the class take no actors now). An entry asks it before
// it reads a request's body.
func (e *Entry) Routable(ctx context.Context, a ownership.Actor) error {
	if _, ok := e.cfg.Registry.Lookup(a.Class); ok {
		return nil
	}
	if e.cfg.Classes == nil {
		return fmt.Errorf("%w %q", actors.ErrUnknownClass, a.Class)
	}
	_, err := e.cfg.Classes.Serving(ctx, a)
	return err
}

// Take acquires a here and makes it resident without running an event (a
// move's target takes the actor; see Adopt). It returns where a is held
// when another live node holds it.
func (e *Entry) Take(ctx context.Context, a ownership.Actor) (*Elsewhere, error) {
	return e.dispatch(ctx, a, 0, func(gen ownership.Generation, _ *ownership.Sealed) error { return e.Adopt(a, gen) })
}

// Bounds on the waits between the tries of a patient dispatch.
const (
	minRefusalWait = 50 * time.Millisecond
	maxRefusalWait = time.Second
)

// dispatch acquires a and runs deliver under the grant, at most
// notRunTries times while deliver is refused before it ran; with patience,
// it tries again after a refusal that may pass.
func (e *Entry) dispatch(ctx context.Context, a ownership.Actor, patience time.Duration, deliver func(ownership.Generation, *ownership.Sealed) error) (*Elsewhere, error) {
	if _, ok := e.cfg.Registry.Lookup(a.Class); !ok {
		if e.cfg.Classes == nil {
			return nil, fmt.Errorf("%w: %q", actors.ErrUnknownClass, a.Class)
		}
		// Another node serves it: the event goes there, which acquires
		// the actor or sends it on to its holder.
		at, err := e.cfg.Classes.Serving(ctx, a)
		if err != nil {
			return nil, err
		}
		return &at, nil
	}
	var deadline time.Time // set at the first refusal that may pass
	for {
		at, refusal, err := e.tryDispatch(ctx, a, deliver)
		if refusal == nil || refusal.Draining || patience <= 0 {
			return at, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(patience)
		}
		wait := min(max(refusal.RetryAfter, minRefusalWait), maxRefusalWait)
		if time.Until(deadline) < wait {
			refusal.Reason += fmt.Sprintf(" (tried for %s)", patience)
			return nil, refusal
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// tryDispatch is one acquisition and its deliveries. refusal is set when
// the keeper refused the event (it did not run).
func (e *Entry) tryDispatch(ctx context.Context, a ownership.Actor, deliver func(ownership.Generation, *ownership.Sealed) error) (at *Elsewhere, refusal *UnavailableError, err error) {
	for range notRunTries {
		d, err := e.cfg.Keeper.Acquire(ctx, a)
		if err != nil {
			return nil, nil, err
		}
		switch d.Verdict {
		case keeper.Granted:
		case keeper.Routed:
			return &Elsewhere{Node: d.Node, Addr: d.Addr, Instance: d.Instance}, nil, nil
		default:
			if d.Damaged != "" {
				return nil, nil, &actorstore.DamagedError{Actor: a, Key: d.Damaged, Err: fmt.Errorf("%w: %s", ownership.ErrDamaged, d.Reason)}
			}
			ua := &UnavailableError{Actor: a, Reason: d.Reason, RetryAfter: d.RetryAfter, NotRun: true, Draining: d.Draining}
			if d.Draining && d.Peer != "" {
				ua.Peer = &Elsewhere{Node: d.Peer, Addr: d.PeerAddr, Instance: d.PeerInstance}
				if c := e.cfg.Classes; c != nil && !c.Serves(ctx, d.Peer, a.Class) {
					// The peer the keeper named does not serve the class:
					// one that does takes the actor, if any is live.
					ua.Peer = nil
					if at, err := c.Serving(ctx, a); err == nil {
						ua.Peer = &at
					}
				}
			}
			return nil, ua, ua
		}
		err = deliver(d.Gen, d.State)
		var ua *UnavailableError
		if !errors.As(err, &ua) || !ua.NotRun || ctx.Err() != nil {
			return nil, nil, err
		}
		// Refused before it ran (its grant ended first): a new grant.
	}
	return nil, nil, &UnavailableError{Actor: a, Reason: fmt.Sprintf("its hold ended before the event ran, %d times", notRunTries), RetryAfter: e.cfg.RetryAfter, NotRun: true}
}
