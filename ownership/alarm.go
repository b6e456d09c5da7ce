package ownership

import "time"

// The delivery rules of actors' alarms. An alarm is a record of its
// actor's state, committed with the event that sets it; the bucket's
// alarm index names each set (a nonce, new at every set) by when it is
// due, and is written before the commit that carries the set. A node's
// poller hands each due entry to the actor's event, which judges it
// against the record (JudgeAlarm), and deletes the entry only once that
// event came to an end whose writes, and whatever it read, are durable
// (AlarmEntryDone). The rules are here, pure, so that the actors layer
// and the simulation share them, and a broken variant of one is tried
// against the simulation as the runtime would run it.

// AlarmSet names one set of an alarm: its nonce, new at each set, and
// when it is due.
type AlarmSet struct {
	Nonce string
	At    time.Time
}

// AlarmVerdict is what an alarm's event makes of the index entry it
// delivers (JudgeAlarm).
type AlarmVerdict uint8

const (
	// AlarmFire: the entry's set is the one the actor keeps, and it is
	// due: the handler runs.
	AlarmFire AlarmVerdict = iota + 1
	// AlarmGone: the actor keeps no such set: the alarm was deleted, set
	// again (a new nonce, with an entry of its own), fired already, or
	// the commit that set it never landed. The entry is a stale hint.
	AlarmGone
	// AlarmNotDue: the set stands but is not due by this node's clock:
	// the entry waits for a later pass.
	AlarmNotDue
)

func (v AlarmVerdict) String() string {
	switch v {
	case AlarmFire:
		return "fire"
	case AlarmGone:
		return "gone"
	case AlarmNotDue:
		return "not due"
	case 0:
		return "none"
	}
	return "AlarmVerdict(?)"
}

// JudgeAlarm judges an index entry written for the set entry, against
// the actor's record of that alarm (cur, if present) at now, the clock
// of the node that runs the event. Only the very set the entry was
// written for fires: an entry left by an earlier set, or by a commit that
// did not land, costs one event and nothing else.
func JudgeAlarm(entry AlarmSet, cur AlarmSet, present bool, now time.Time) AlarmVerdict {
	switch {
	case !present || cur.Nonce != entry.Nonce:
		return AlarmGone
	case cur.At.After(now):
		return AlarmNotDue
	}
	return AlarmFire
}

// AlarmEnds says whether the event that fired the set fired ends the
// alarm, its writes deleting the record: unless its handler set the alarm
// again (cur is a new nonce) or deleted it. The record must go with the
// event that fired it: its entry is deleted once that event is durable,
// and a record left behind would have none.
func AlarmEnds(fired string, cur AlarmSet, present bool) bool {
	return present && cur.Nonce == fired
}

// AlarmEntryDone says whether the poller may delete an alarm's index
// entry after a delivery: v is what the delivery's event judged (0 when
// none ran on this node: the actor is held elsewhere, or the delivery
// failed before its event), and durable that the event's answer came
// through the output gate, so that its writes (the alarm's end, or its
// retry with an entry of its own) are durable, and so is what it read.
// Anything else leaves the entry for a later pass, on this node or any:
// a fire whose commit did not land must be delivered again, and a gone
// that read writes which did not land may have read wrong.
func AlarmEntryDone(v AlarmVerdict, durable bool) bool {
	switch v {
	case AlarmFire, AlarmGone:
		return durable
	}
	return false
}
