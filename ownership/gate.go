package ownership

import "fmt"

// The output gate decides what becomes of an event that ran: its answer
// is released, or the event is refused, or its outcome is unknown. Each of
// the three means one thing to a client, and the rule that picks one is
// here, pure, so that the actors layer and the simulation share it (and a
// broken variant of it can be tried against the simulation).
//
//   - Released: the event took effect (its writes are durable in the
//     bucket), or it had no effect and its hold may still act, so what it
//     read is current.
//   - Refused: the event took no effect anywhere, and never will: a retry,
//     here or on any node, is always safe.
//   - Unknown: the event may have taken effect, or may still: only a retry
//     that the actor can recognise (an Idempotency-Key) is safe.
//
// A commit is a conditional write of the actor's state object on the
// version the hold last wrote or read. One that landed proves that no later
// hold had sealed the state before it (a seal is a write of that object,
// which would have changed its version), and every later hold starts from
// the object as the commit left it or later. So the event's writes are
// part of the actor's history whoever holds it now, and its answer is
// released even if this hold may no longer act: refusing it would tell a
// client that something that happened did not. Only an event with no
// effect of its own (a read) depends on the hold still being live: its
// answer could be stale under a later hold, and refusing it costs nothing,
// since nothing happened.

// Gated is the output gate's verdict on an event (Gate).
type Gated uint8

const (
	// GateRelease: the event's answer goes out.
	GateRelease Gated = iota + 1
	// GateRefuse: the event took no effect; it is refused, and a retry is
	// safe.
	GateRefuse
	// GateUnknown: the event may have taken effect; its outcome is unknown.
	GateUnknown
)

func (g Gated) String() string {
	switch g {
	case GateRelease:
		return "release"
	case GateRefuse:
		return "refuse"
	case GateUnknown:
		return "unknown"
	}
	return fmt.Sprintf("Gated(%d)", uint8(g))
}

// EventEnd is what the gate knows of an event that ran.
type EventEnd struct {
	// Wrote: the event has writes of its own in the commit whose outcome
	// is Commit.
	Wrote bool
	// Earlier: part of the event took effect before its end: it sent a
	// call to another actor, or its writes so far became durable at a
	// commit point before a call.
	Earlier bool
	// Commit is the outcome of the commit that carries the event's writes
	// and every write it could have seen: Landed once durable; Refused,
	// NotFound or Failed when it did not land and never will (or was never
	// sent); Unknown (or BucketDamaged) when it may still land.
	Commit Outcome
	// MayAct: the event's hold is live under a valid lease now. Asked
	// only of an event with no effect whose commit landed.
	MayAct func() bool
}

// Gate decides what becomes of an event that ran.
func Gate(e EventEnd) Gated {
	switch {
	case e.Commit == Landed && (e.Wrote || e.Earlier):
		// Durable: it happened, whoever holds the actor now.
		return GateRelease
	case e.Commit == Landed:
		if e.MayAct() {
			return GateRelease
		}
		return GateRefuse // a read under a hold that ended: nothing happened
	case e.Earlier:
		// Its end did not commit, but what it did before (a call, the
		// writes of a commit point) took effect.
		return GateUnknown
	case e.Wrote && (e.Commit == Unknown || e.Commit == BucketDamaged):
		return GateUnknown // the commit may still land
	}
	return GateRefuse
}
