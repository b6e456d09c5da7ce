package sim

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Rooms have an alarm, as actors do (internal/actorstore/alarms.go,
// node/alarms.go): a record of the room's state, kept in its head's
// payload after the count ("<count or run:key>|<nonce>,<due ms>,<retry>"),
// so that it lands with the commit that sets it. A client's event sets it
// now and then (a new nonce, due within AlarmMaxDelay by its node's
// clock), or deletes it. The bucket keeps an index of the sets,
// alarms/<due ms>/<class>/<name>/<alarm>/<nonce>, one entry per set,
// written before the commit that carries the set.
//
// Every node lists the index every AlarmPoll (sooner when the first entry
// not due comes due before that), and hands each due entry to the room's
// event through its core, as any event: acquired here, or left to the
// node that holds it. The event judges the entry (ownership.JudgeAlarm):
// a fire runs the handler, which fails now and then during the chaos (the
// alarm is set again for a retry, with an entry of its own, or given up
// after the last), and otherwise ends the alarm unless it set it again
// (ownership.AlarmEnds); a gone or not due one writes nothing. The
// delivery deletes the entry only when ownership.AlarmEntryDone says so,
// once its event's answer came through the output gate.
//
// Ground truth checked here:
//   - no alarm is lost: a state object never lands holding a set whose
//     entry is not in the bucket, and no entry is deleted while the
//     state holds its set (so every set that landed stays findable until
//     a landed commit ends it);
//   - at most one firing per set: no two landed commits fire one nonce;
//   - every alarm fires: at the end, no room's state holds a set that
//     came due long enough after the heal settled (AlarmBound).

// alarmIndexPrefix is the prefix of the alarm index, as the runtime's.
const alarmIndexPrefix = "alarms/"

// alarmName is the name of a room's one alarm.
const alarmName = "a"

// The handler's failures are retried alarmRetries times, the n-th retry
// alarmRetry << (n-1) after the failure before it, then given up.
const (
	alarmRetries = 3
	alarmRetry   = time.Second
)

// alarmIO bounds a delivery, as the runtime's poller bounds its own.
const alarmIO = 30 * time.Second

// alarmRec is a room's alarm as its state keeps it.
type alarmRec struct {
	present bool
	nonce   string
	at      time.Time // whole milliseconds, as the index names it
	retry   int
}

func (a alarmRec) set() ownership.AlarmSet { return ownership.AlarmSet{Nonce: a.nonce, At: a.at} }

// alarmDelivery is a poller's delivery of one index entry: a clientEvent
// with no client, which ends with the entry deleted or left.
type alarmDelivery struct {
	key        string
	entry      ownership.AlarmSet
	node, life int
	// verdict: what the event judged, once it did.
	verdict ownership.AlarmVerdict
}

// change is what a commit writes: the count, the alarm it leaves, and the
// set it fires, if any.
type change struct {
	next  uint64
	alarm alarmRec
	fires string
}

// encodePayload appends the alarm record, if any, to a head's payload.
func encodePayload(base []byte, a alarmRec) []byte {
	if !a.present {
		return base
	}
	return fmt.Appendf(bytes.Clone(base), "|%s,%d,%d", a.nonce, a.at.UnixMilli(), a.retry)
}

// basePayload is a head's payload without its alarm record.
func basePayload(payload []byte) []byte {
	base, _, _ := bytes.Cut(payload, []byte{'|'})
	return base
}

// alarmOf reads the alarm record of a head's payload.
func alarmOf(payload []byte) alarmRec {
	_, rec, ok := bytes.Cut(payload, []byte{'|'})
	if !ok {
		return alarmRec{}
	}
	f := strings.Split(string(rec), ",")
	if len(f) != 3 {
		panic(fmt.Sprintf("sim: unreadable alarm record %q", rec))
	}
	ms, err1 := strconv.ParseInt(f[1], 10, 64)
	retry, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		panic(fmt.Sprintf("sim: unreadable alarm record %q", rec))
	}
	return alarmRec{present: true, nonce: f[0], at: time.UnixMilli(ms).UTC(), retry: retry}
}

// alarmKey is the index entry of a room's alarm set.
func alarmKey(room ownership.Actor, a alarmRec) string {
	return fmt.Sprintf("%s%015d/%s/%s/%s/%s", alarmIndexPrefix, a.at.UnixMilli(), room.Class, room.Name, alarmName, a.nonce)
}

// parseAlarmKey reads an index entry's key.
func parseAlarmKey(key string) (ownership.Actor, ownership.AlarmSet, bool) {
	f := strings.Split(strings.TrimPrefix(key, alarmIndexPrefix), "/")
	if !strings.HasPrefix(key, alarmIndexPrefix) || len(f) != 5 {
		return ownership.Actor{}, ownership.AlarmSet{}, false
	}
	ms, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return ownership.Actor{}, ownership.AlarmSet{}, false
	}
	return ownership.Actor{Class: f[1], Name: f[2]}, ownership.AlarmSet{Nonce: f[4], At: time.UnixMilli(ms).UTC()}, true
}

// newAlarm is a new set of the alarm, due at (by some node's clock).
func (w *World) newAlarm(at time.Time, retry int) alarmRec {
	return alarmRec{present: true, nonce: fmt.Sprintf("%016x", w.rng.Uint64()), at: time.UnixMilli(at.UnixMilli()).UTC(), retry: retry}
}

// clientAlarm is what a client's event does to its room's alarm: now and
// then it sets it, or deletes it.
func (w *World) clientAlarm(n *node, c *change) {
	switch x := w.rng.Float64(); {
	case x < w.P.AlarmSet:
		c.alarm = w.newAlarm(n.clock(w.now).Add(w.uniform(0, w.P.AlarmMaxDelay)), 0)
	case x < w.P.AlarmSet+w.P.AlarmDelete:
		c.alarm = alarmRec{}
	}
}

// judgeAlarm runs an alarm delivery's event on the room's resident, whose
// state is loaded: it reports whether the event writes (c, then
// committed as any event's writes); one that does not is answered here.
func (w *World) judgeAlarm(n *node, r *resident, ev evOutput, ce *clientEvent, c *change) bool {
	d := ce.alarm
	now := n.clock(w.now)
	d.verdict = ownership.JudgeAlarm(d.entry, r.alarm.set(), r.alarm.present, now)
	w.noteEv("alarm-"+strings.ReplaceAll(d.verdict.String(), " ", "-"), n, ce.id, ev.actor, d.entry.Nonce)
	if d.verdict != ownership.AlarmFire {
		// Nothing written: what it read is durable (a resident's state
		// here always is), and the gate releases it while its hold may
		// act.
		may := n.core.MayAct(ev.actor, ev.gen, now)
		released := ownership.Gate(ownership.EventEnd{Commit: ownership.Landed, MayAct: func() bool { return may }}) == ownership.GateRelease
		if released {
			w.truth.act(w, ev.actor, n.inst, ev.gen)
		}
		w.alarmAnswered(n, ce, ev, released)
		w.eventDone(n, r)
		return false
	}
	fired := r.alarm
	if w.chaos() && w.chance(w.P.AlarmFail) {
		// The handler failed: its writes are discarded, and the alarm is
		// set again for its retry, or given up after the last.
		c.next = r.value
		if fired.retry >= alarmRetries {
			c.alarm = alarmRec{}
		} else {
			c.alarm = w.newAlarm(now.Add(alarmRetry<<fired.retry), fired.retry+1)
		}
		return true
	}
	// The handler's writes (the count) and, now and then, a new set of
	// the alarm.
	c.fires = fired.nonce
	cur := fired
	if w.chance(w.P.AlarmAgain) {
		cur = w.newAlarm(now.Add(w.uniform(0, w.P.AlarmMaxDelay)), 0)
	}
	c.alarm = cur
	if ownership.AlarmEnds(fired.nonce, cur.set(), cur.present) {
		c.alarm = alarmRec{}
	}
	return true
}

// indexAlarm writes the index entry of the alarm set the commit carries,
// if it sets one, before the commit (then); an entry that did not land
// fails the event.
func (w *World) indexAlarm(n *node, r *resident, ev evOutput, c *change, then func()) {
	if !c.alarm.present || (r.alarm.present && c.alarm.nonce == r.alarm.nonce) {
		then()
		return
	}
	key := alarmKey(ev.actor, c.alarm)
	w.stateIO(n, r, ev, ownership.Request{Op: ownership.OpPut, Key: key, Cond: ownership.Always()}, func(op *stateOp, reply ownership.Reply) {
		if reply.Outcome != ownership.Landed {
			w.eventFailed(n, r, ev)
			return
		}
		then()
	})
}

// ---- the pollers ----

// pollIO sends a bucket call of a node's alarm poller; then runs with its
// answer, if the node is still that life.
func (w *World) pollIO(n *node, req ownership.Request, then func(ownership.Reply)) {
	op := &stateOp{node: n.id, life: n.life, req: req, gc: true, then: func(_ *stateOp, reply ownership.Reply) {
		if then != nil {
			then(reply)
		}
	}}
	w.sendIO(n, op, 0)
}

// poll is one pass of a node's alarm poller: it lists the start of the
// index, delivers each due entry not being delivered here already, and
// comes again after the period, or when the first entry not due comes
// due if that is sooner (a quarter of the period apart at least).
func (w *World) poll(n *node) {
	start := w.now
	w.pollIO(n, ownership.Request{Op: ownership.OpList, Key: alarmIndexPrefix, Limit: 256}, func(reply ownership.Reply) {
		wait := w.P.AlarmPoll
		if reply.Outcome == ownership.Landed {
			now := n.clock(w.now)
			for _, e := range reply.Page.Entries {
				room, set, ok := parseAlarmKey(e.Key)
				if !ok {
					panic("sim: an index entry that is not one: " + e.Key)
				}
				if set.At.After(now) {
					wait = min(wait, set.At.Sub(now))
					break
				}
				if id, busy := n.alarmBusy[e.Key]; busy {
					ce := w.events[id]
					if ce == nil || w.now-ce.born < alarmIO {
						continue
					}
					w.endDelivery(ce) // too slow: the runtime's delivery gives up too
				}
				w.deliverAlarm(n, e.Key, room, set)
			}
		}
		w.at(max(w.now+wait, start+w.P.AlarmPoll/4), evPoll{node: n.id, life: n.life})
	})
}

// deliverAlarm hands a due entry to its room's event, through the core.
func (w *World) deliverAlarm(n *node, key string, room ownership.Actor, set ownership.AlarmSet) {
	w.nextEvent++
	ce := &clientEvent{id: w.nextEvent, room: room, born: w.now, alarm: &alarmDelivery{key: key, entry: set, node: n.id, life: n.life}}
	w.events[ce.id] = ce
	n.alarmBusy[key] = ce.id
	w.Stats.AlarmDeliveries++
	w.noteEv("alarm", n, ce.id, room, set.Nonce)
	w.step(n, ownership.Acquire{Actor: room, Ref: ce.id})
}

// endDelivery forgets a delivery that came to no end here (held
// elsewhere, refused, failed, too slow): its entry stays for a later pass.
func (w *World) endDelivery(ce *clientEvent) {
	delete(w.events, ce.id)
	d := ce.alarm
	if n := w.live(d.node, d.life); n != nil && n.alarmBusy[d.key] == ce.id {
		delete(n.alarmBusy, d.key)
	}
}

// alarmAnswered takes the answer of a delivery's event: released through
// the output gate (durable) or not. The entry goes only when
// ownership.AlarmEntryDone says so; it is no longer being delivered once
// its delete is answered.
func (w *World) alarmAnswered(n *node, ce *clientEvent, ev evOutput, durable bool) {
	d := ce.alarm
	if r := n.resident[ev.actor]; r != nil && r.gen == ev.gen {
		r.active = w.now
		w.after(w.idleTimeout(), evIdle{node: n.id, life: n.life, actor: ev.actor, gen: ev.gen, active: w.now})
	}
	if !ownership.AlarmEntryDone(d.verdict, durable) {
		w.endDelivery(ce)
		return
	}
	w.Stats.AlarmEnded++
	w.pollIO(n, ownership.Request{Op: ownership.OpDelete, Key: d.key, Cond: ownership.Always()}, func(ownership.Reply) {
		w.endDelivery(ce)
	})
}

// ---- ground truth ----

// alarmStateLanded checks a state object that landed (a commit, a seal, a
// fence): the alarm set it holds has its index entry.
func (w *World) alarmStateLanded(a ownership.Actor, payload []byte) {
	rec := alarmOf(payload)
	if !rec.present {
		return
	}
	if _, err := w.bucket.Get(alarmKey(a, rec)); err != nil {
		w.fail("alarm lost: %s's state landed holding alarm set %s (due %v) without its index entry", a, rec.nonce, rec.at.Sub(epoch))
	}
}

// alarmEntryDeleted checks an index entry's delete that landed: the
// room's state no longer holds its set.
func (w *World) alarmEntryDeleted(key string) {
	room, set, ok := parseAlarmKey(key)
	if !ok {
		return
	}
	obj, err := w.bucket.Get(ownership.StateKey(room))
	if err != nil {
		return
	}
	_, payload, err := ownership.DecodeState(obj.Body)
	if err != nil {
		return
	}
	if rec := alarmOf(payload); rec.present && rec.nonce == set.Nonce {
		w.fail("alarm lost: the index entry of %s's alarm set %s (due %v) was deleted while the room's state still holds that set", room, set.Nonce, set.At.Sub(epoch))
	}
}

// alarmFired records a landed commit that fired a set.
func (w *World) alarmFired(a ownership.Actor, nonce string) {
	w.Stats.AlarmsFired++
	if w.truth.fired[nonce] {
		w.fail("alarm fired twice: %s's alarm set %s fired by two landed commits", a, nonce)
		return
	}
	w.truth.fired[nonce] = true
}

// checkAlarms runs at the end: no room's state holds an alarm set that
// came due AlarmBound before, or AlarmBound after the heal settled,
// whichever is later (its due time is by some node's clock, so within
// MaxSkew of the simulation's).
func (w *World) checkAlarms() {
	if !w.healed {
		return
	}
	for _, a := range w.rooms {
		obj, err := w.bucket.Get(ownership.StateKey(a))
		if err != nil {
			continue
		}
		_, payload, err := ownership.DecodeState(obj.Body)
		if err != nil {
			continue
		}
		rec := alarmOf(payload)
		if !rec.present {
			continue
		}
		due := max(rec.at.Sub(epoch)+w.P.MaxSkew, w.healAt+w.settle())
		if w.now-due > w.P.AlarmBound {
			w.fail("liveness: %s's alarm set %s, due at %v, never fired", a, rec.nonce, rec.at.Sub(epoch))
			return
		}
	}
}
