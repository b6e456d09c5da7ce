package keeper

import (
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// fastHolds answers Acquire and MayAct for live holds without a round trip
// through the actor's mailbox: most events are for actors whose hold is
// live here, and the Core grants those at once.
//
// Invariant: an entry (a, gen) exists only while the Core would answer an
// Acquire of a with a grant at gen and MayAct(a, gen) with true, and only
// until its until time. The shell adds an entry after a step that granted
// a's live hold and changed nothing else (Core.Serving says so, and until
// when), and clears every entry before it carries out the effects of any
// other step but one that only reported damage (pureReport): any other
// input may end a hold, move an actor or change the node's mode, and the
// Core's next deadline bounds until, so time alone changes nothing before
// it. Clearing under the write lock before the effects run
// makes the fast answer the one the actor would have given had the request
// been handled just before that step. Inputs from outside (Idle, Drain, …)
// drop what they could change when they are posted, not when the actor
// takes them (Keeper.input): a caller that says Idle and then acquires gets
// the answer that follows the Idle, as through the mailbox.
//
// An entry is added after its step, and an input from outside may be
// posted before the step's put while the actor has not taken it yet (it is
// queued behind the step): the put would then undo its forget, and a hold
// that the queued Idle ends would be answered live (an event granted by it
// would run, and fail its output gate after its writes landed). So every
// input posted from outside counts as queued from its forget until the
// shell takes it (taken), and no entry is put for an actor with an input
// queued, or while an input about the whole node is.
type fastHolds struct {
	mu     sync.RWMutex
	holds  map[ownership.Actor]fastHold
	shut   bool                    // the keeper ended: no more entries
	queued map[ownership.Actor]int // inputs posted for an actor, not yet taken
	all    int                     // inputs about the whole node posted, not yet taken
}

type fastHold struct {
	gen   ownership.Generation
	until time.Time
}

func newFastHolds() *fastHolds {
	return &fastHolds{holds: map[ownership.Actor]fastHold{}, queued: map[ownership.Actor]int{}}
}

// lookup returns the generation a's live hold serves at now, if known.
func (f *fastHolds) lookup(a ownership.Actor, now time.Time) (ownership.Generation, bool) {
	f.mu.RLock()
	h, ok := f.holds[a]
	f.mu.RUnlock()
	if !ok || !now.Before(h.until) {
		return 0, false
	}
	return h.gen, true
}

// put records that a's live hold serves at gen until until.
func (f *fastHolds) put(a ownership.Actor, gen ownership.Generation, until time.Time) {
	f.mu.Lock()
	if !f.shut && f.all == 0 && f.queued[a] == 0 {
		f.holds[a] = fastHold{gen: gen, until: until}
	}
	f.mu.Unlock()
}

// clear forgets every entry; with shut, for good.
func (f *fastHolds) clear(shut bool) {
	f.mu.Lock()
	if len(f.holds) > 0 {
		clear(f.holds)
	}
	f.shut = f.shut || shut
	f.mu.Unlock()
}

// forget drops the entries an input posted from outside could change:
// its actor's, or every one for an input about the whole node; and counts
// the input queued until taken is called for it. It reports whether it
// counted it.
func (f *fastHolds) forget(in ownership.Input) bool {
	a, one := inputActor(in)
	if !one && isPureReport(in) {
		return false // changes no hold; see pureReport
	}
	f.mu.Lock()
	if one {
		delete(f.holds, a)
		f.queued[a]++
	} else {
		clear(f.holds)
		f.all++
	}
	f.mu.Unlock()
	return true
}

// taken says the actor took an input that forget counted (or that its
// post failed).
func (f *fastHolds) taken(in ownership.Input) {
	a, one := inputActor(in)
	if !one && isPureReport(in) {
		return
	}
	f.mu.Lock()
	if one {
		if f.queued[a]--; f.queued[a] <= 0 {
			delete(f.queued, a)
		}
	} else {
		f.all--
	}
	f.mu.Unlock()
}

// inputActor returns the actor an outside input is about, if it is about
// one.
func inputActor(in ownership.Input) (ownership.Actor, bool) {
	switch in := in.(type) {
	case ownership.Idle:
		return in.Actor, true
	case ownership.HoldEnded:
		return in.Actor, true
	case ownership.SocketOpened:
		return in.Actor, true
	case ownership.SocketGone:
		return in.Actor, true
	case ownership.Move:
		return in.Actor, true
	case ownership.Moved:
		return in.Actor, true
	}
	return ownership.Actor{}, false
}

// isPureReport says whether an input from outside changes no hold by
// itself: a damage report, a peer found unreachable (the lease read it
// starts changes what it changes in a step of its own), or a route that
// failed (it drops a route, never a hold).
func isPureReport(in ownership.Input) bool {
	switch in.(type) {
	case ownership.DamageFound, ownership.PeerUnreachable, ownership.RouteFailed:
		return true
	}
	return false
}

// pureGrant says whether a step for input in, which gave effects, only
// granted the acquisition of a live hold: then it changed nothing the
// fast entries depend on.
func pureGrant(in ownership.Input, effects []ownership.Effect) (ownership.Actor, bool) {
	acq, ok := in.(ownership.Acquire)
	if !ok {
		return ownership.Actor{}, false
	}
	granted := false
	for _, e := range effects {
		switch e := e.(type) {
		case ownership.Grant:
			if e.Ref != acq.Ref || granted {
				return ownership.Actor{}, false
			}
			granted = true
		case ownership.Count, ownership.SetGauge, ownership.Observe, ownership.SetTimer:
		default:
			return ownership.Actor{}, false
		}
	}
	return acq.Actor, granted
}

// pureReport says whether a step for input in, which gave effects, only
// counted and reported the damage a reader outside the keeper found
// (DamageFound), or another pure report (isPureReport): then, too, it
// changed nothing the fast entries depend on,
// and an actor whose state is damaged, met on every one of its events,
// does not send every other actor's acquisitions through the mailbox.
func pureReport(in ownership.Input, effects []ownership.Effect) bool {
	_, unreachable := in.(ownership.PeerUnreachable)
	if !isPureReport(in) {
		return false
	}
	for _, e := range effects {
		switch e.(type) {
		case ownership.Count, ownership.Report, ownership.SetGauge, ownership.Observe, ownership.SetTimer:
		case ownership.Request:
			if !unreachable { // the peer's lease read; its reply is a step of its own
				return false
			}
		default:
			return false
		}
	}
	return true
}
