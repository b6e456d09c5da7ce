package keeper

import (
	"fmt"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Verdict is what became of an acquisition.
type Verdict uint8

const (
	// Refused: the event cannot be served here now (the zero Verdict, so
	// that a Decision nobody filled in never grants anything).
	Refused Verdict = iota
	// Granted: the event may run here, as owner at Decision.Gen.
	Granted
	// Routed: another live process holds the actor; send the event to
	// Decision.Node at Decision.Addr.
	Routed
)

func (v Verdict) String() string {
	switch v {
	case Refused:
		return "refused"
	case Granted:
		return "granted"
	case Routed:
		return "routed"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Decision answers one Acquire. Which fields are set depends on Verdict.
type Decision struct {
	Verdict Verdict

	// Gen is the generation of the live hold (Granted).
	Gen ownership.Generation
	// State, when set, is the actor's state as the acquisition that made
	// the hold sealed it (Granted; see ownership.Sealed).
	State *ownership.Sealed

	// Node and Addr name the holder (Routed). Addr is what that node wrote
	// in its lease record; it may be empty when this node has not read it.
	Node     ownership.NodeID
	Addr     string
	Instance ownership.InstanceID

	// Reason, RetryAfter and Draining explain a refusal: an HTTP 503 with
	// Retry-After. Draining says this node takes no actors now (it drains
	// or has stopped): a peer should be asked instead.
	Reason     string
	RetryAfter time.Duration
	Draining   bool
	// Peer and PeerAddr, when Draining, name the live peer to send the
	// event on to (ownership.Refuse).
	Peer         ownership.NodeID
	PeerAddr     string
	PeerInstance ownership.InstanceID
	// Damaged, when set, is the key of the actor's object (its ownership
	// record or its state) that is damaged in the bucket: the refusal is an
	// error (HTTP 500 naming the key), not a 503, since no retry, here or on
	// a peer, serves the actor until a person restores the object.
	Damaged string
}

func (d Decision) String() string {
	switch d.Verdict {
	case Granted:
		return fmt.Sprintf("granted at generation %d", d.Gen)
	case Routed:
		return fmt.Sprintf("routed to node %s at %q", d.Node, d.Addr)
	}
	if d.Damaged != "" {
		return fmt.Sprintf("refused: %s (damaged: %s)", d.Reason, d.Damaged)
	}
	s := fmt.Sprintf("refused: %s (retry after %v)", d.Reason, d.RetryAfter)
	if d.Draining {
		s += ", draining"
	}
	return s
}

func grantDecision(g ownership.Grant) Decision {
	return Decision{Verdict: Granted, Gen: g.Gen, State: g.State}
}

func routeDecision(r ownership.Route) Decision {
	return Decision{Verdict: Routed, Node: r.Node, Addr: r.Addr, Instance: r.Instance}
}

func refuseDecision(r ownership.Refuse) Decision {
	return Decision{Verdict: Refused, Reason: r.Reason, RetryAfter: r.RetryAfter, Draining: r.Draining, Damaged: r.Damaged,
		Peer: r.Peer, PeerAddr: r.PeerAddr, PeerInstance: r.PeerInstance}
}

// AcquireAnswer is the message RequestAcquire's requester receives.
type AcquireAnswer struct {
	Actor    ownership.Actor
	Tag      uint64 // as given to RequestAcquire
	Decision Decision
}

// MayActAnswer is the message RequestMayAct's requester receives.
type MayActAnswer struct {
	Actor ownership.Actor
	Gen   ownership.Generation
	Tag   uint64 // as given to RequestMayAct
	May   bool
}

// StatusAnswer is the message RequestStatus's requester receives. Ended:
// the keeper has ended, and Status is its last.
type StatusAnswer struct {
	Status ownership.Status
	Ended  bool
}

// ExitError is Err's value for a keeper that ended without a clean stop.
type ExitError struct {
	Node ownership.NodeID
	// Reason says why, in the Core's words ("lost lease: this node was
	// fenced", a twin, an unreadable lease record) or the keeper's (a
	// panic, the actor stopped from outside).
	Reason string
	// Broke says the keeper itself failed (a panic, a restart or a stop
	// from outside), rather than the protocol ending it. Panic and Stack
	// are set when a panic ended it.
	Broke bool
	Panic any
	Stack []byte
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("ownership keeper of node %s ended: %s", e.Node, e.Reason)
}
