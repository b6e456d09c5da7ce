package sim

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
)

// Rooms keep state, as the actors layer does: one state object per room
// (the head) whose payload here is a counter, or names the run object that
// holds it ("run:<key>"), as a head lists the runs it flushed. Each event of a resident room loads the
// object once per residency (fencing it if no seal stamped it with the
// hold's generation; a room without one yet is created by its first
// commit), then commits the counter plus one, conditioned on the
// version it knows, and releases its output only once the commit landed and
// the hold may act. The resident's bucket calls have their own faults: a
// commit can land seconds after its answer was given up, long after the
// resident stopped or its node crashed. A third of the commits first write
// the count into a run (If-None-Match, named by the hold's generation), and
// the head then names it; once such a head lands, the run the previous head
// named is deleted, and now and then a sweep lists the room's runs and
// deletes what ownership.RunGarbage says the hold may.
//
// Ground truth checked here (docs/PROTOCOL.md §6):
//   - property 1: a load never shows less than the last acknowledged count,
//     nor does the bucket at the end, and a run a head names is never gone;
//   - property 2: no write stamped with a generation lands once the room's
//     record has reached a later one.

// stateOp is one bucket call of a resident (or nothing but its answer).
type stateOp struct {
	node, life int
	r          *resident
	ev         evOutput
	actor      ownership.Actor
	req        ownership.Request
	fault      string
	result     ownership.Reply
	landed     bool
	then       func(*stateOp, ownership.Reply)
	// gc: a delete or listing of runs, which no client waits for.
	gc bool
	// acked: for a read of a head that names a run, the count acknowledged
	// when the read landed, which that run must hold at least.
	acked uint64
	// commit: the write of a head that commits the event ev; fires: the
	// alarm set that commit fires, if any.
	commit bool
	fires  string
}

type (
	evStateLand  struct{ op *stateOp }
	evStateReply struct {
		op               *stateOp
		unknown, refused bool
	}
)

// stateIO sends a resident's bucket call with the faults of the chaos
// phase; then runs with the reply, if the node is still that life. It
// returns the call.
func (w *World) stateIO(n *node, r *resident, ev evOutput, req ownership.Request, then func(*stateOp, ownership.Reply)) *stateOp {
	op := &stateOp{node: n.id, life: n.life, r: r, ev: ev, actor: ev.actor, req: req, then: then}
	w.sendIO(n, op, r.gen)
	return op
}

// sendIO sends a bucket call of a node's own (not its core's) with the
// faults of the chaos phase; gen is the hold it is made for, if any.
func (w *World) sendIO(n *node, op *stateOp, gen ownership.Generation) {
	w.Stats.Requests++
	a, req := op.actor, op.req
	timeout := n.core.Config().AttemptTimeout
	lat := w.uniform(time.Millisecond, 25*time.Millisecond)
	write := req.Op == ownership.OpPut || req.Op == ownership.OpDelete
	if w.chaos() {
		switch x := w.rng.Float64(); {
		case x < w.P.LoseRequest:
			op.fault = "lose-request"
		case x < w.P.LoseRequest+w.P.LoseReply:
			op.fault = "lose-reply"
		case write && x < w.P.LoseRequest+w.P.LoseReply+w.P.LandLate:
			op.fault = "late"
		case write && x < w.P.LoseRequest+w.P.LoseReply+w.P.LandLate+w.P.Conflict:
			op.fault = "409"
		}
	}
	w.note("io-send", n, "%s %s g%d %s", a, req.Op.String(), uint64(gen), op.fault)
	switch op.fault {
	case "lose-request":
		w.after(timeout, evStateReply{op: op, unknown: true})
	case "lose-reply":
		w.after(lat, evStateLand{op: op})
		w.after(timeout, evStateReply{op: op, unknown: true})
	case "late":
		w.after(timeout+w.uniform(0, w.P.MaxLate), evStateLand{op: op})
		w.after(timeout, evStateReply{op: op, unknown: true})
	case "409":
		w.after(lat, evStateReply{op: op, refused: true})
	default:
		w.after(lat, evStateLand{op: op})
		w.after(lat+w.uniform(time.Millisecond, 5*time.Millisecond), evStateReply{op: op})
	}
}

func (w *World) stateLand(op *stateOp) {
	op.result = keeper.Execute(context.Background(), w.bucket.Bucket(), op.req)
	op.landed = true
	w.note("io-land", nil, "%s %s %s", op.actor, op.req.Op.String(), op.result.Outcome.String())
	run := strings.HasPrefix(op.req.Key, ownership.RunsPrefix(op.actor))
	switch {
	case strings.HasPrefix(op.req.Key, alarmIndexPrefix):
		if op.req.Op == ownership.OpDelete && op.result.Outcome == ownership.Landed {
			w.alarmEntryDeleted(op.req.Key)
		}
	case run:
		if op.req.Op == ownership.OpPut && op.result.Outcome == ownership.Landed {
			w.Stats.Runs++
		}
	case op.req.Op == ownership.OpPut:
		switch op.result.Outcome {
		case ownership.Landed:
			w.Stats.Commits++
			if op.commit {
				w.truth.commitLanded(w, attemptKey{op.ev.id, op.ev.attempt})
			}
			if op.fires != "" {
				w.alarmFired(op.actor, op.fires)
			}
		case ownership.Refused, ownership.NotFound:
			w.Stats.StaleRefused++
		}
		w.stateWritten(op.actor, op.req, op.result)
	case op.req.Op == ownership.OpGet && op.result.Outcome == ownership.Landed:
		if _, payload, err := ownership.DecodeState(op.result.Body); err == nil {
			if _, named := runNamed(payload); named {
				op.acked = w.acked[op.actor]
			} else if v := counterOf(payload); v < w.acked[op.actor] {
				w.fail("acknowledged write lost: %s loaded count %d, but %d was acknowledged", op.actor, v, w.acked[op.actor])
			}
		}
	}
}

// runNamed returns the run key a head's payload names, if it names one.
func runNamed(payload []byte) (string, bool) {
	return strings.CutPrefix(string(basePayload(payload)), "run:")
}

func (w *World) stateReply(op *stateOp, unknown, refused bool) {
	n := w.nodes[op.node]
	if op.gc && (!n.up || n.life != op.life) {
		return
	}
	if !n.up || n.life != op.life {
		// The resident died with its node: its clients retry.
		for _, ev := range append([]evOutput{op.ev}, op.r.queue...) {
			if ce := w.events[ev.id]; ce != nil {
				w.retry(ce)
			}
		}
		op.r.queue = nil
		return
	}
	reply := op.result
	reply.ID = op.req.ID
	switch {
	case unknown:
		reply = ownership.Reply{Outcome: ownership.Unknown}
	case refused:
		reply = ownership.Reply{Outcome: ownership.Refused}
	case !op.landed:
		panic("sim: state reply before landing")
	}
	op.then(op, reply)
}

// stateWritten checks property 2 whenever a write to a state object lands,
// the cores' seals included.
func (w *World) stateWritten(a ownership.Actor, req ownership.Request, res ownership.Reply) {
	if res.Outcome != ownership.Landed {
		return
	}
	h, payload, err := ownership.DecodeState(req.Body)
	if err != nil {
		panic("sim: an unreadable state object was written: " + err.Error())
	}
	if key, named := runNamed(payload); named {
		if _, err := w.bucket.Bucket().Get(context.Background(), key); err != nil {
			w.fail("a head names run %s, which is not in the bucket: %v", key, err)
		}
	}
	if rec, ok := w.records[a]; ok && rec.Generation > h.Gen {
		w.fail("superseded write visible: %s state stamped with generation %d landed after the record reached generation %d", a, h.Gen, rec.Generation)
	}
	w.alarmStateLanded(a, payload)
}

// counterOf is the count a head's payload, or a run, holds.
func counterOf(payload []byte) uint64 {
	v, _ := strconv.ParseUint(string(basePayload(payload)), 10, 64)
	return v
}

func (w *World) actorOfStateKey(key string) (ownership.Actor, bool) {
	if !strings.HasPrefix(key, ownership.ActorsPrefix) {
		return ownership.Actor{}, false
	}
	for _, a := range w.rooms {
		if ownership.StateKey(a) == key {
			return a, true
		}
	}
	return ownership.Actor{}, false
}

// runEvent runs a granted event on the room's resident, one event at a
// time.
func (w *World) runEvent(n *node, ev evOutput) {
	ce := w.events[ev.id]
	if ce == nil {
		return
	}
	r := n.resident[ev.actor]
	if r == nil || r.gen != ev.gen {
		w.noteEv("no-resident", n, ce.id, ev.actor, "")
		w.retry(ce)
		return
	}
	if r.busy {
		r.queue = append(r.queue, ev)
		return
	}
	r.busy = true
	if r.loaded {
		w.commit(n, r, ev)
		return
	}
	if s := r.sealed; s != nil && s.Gen == r.gen {
		// The seal's copy, as the actors layer takes it: once.
		r.sealed = nil
		w.loaded(n, r, ev, ownership.Reply{Outcome: ownership.Landed, Body: s.Body, ETag: s.ETag}, w.acked[ev.actor])
		return
	}
	w.stateIO(n, r, ev, ownership.Request{Op: ownership.OpGet, Key: ownership.StateKey(ev.actor)}, func(op *stateOp, reply ownership.Reply) {
		w.loaded(n, r, ev, reply, op.acked)
	})
}

// loaded takes the state read at the start of a residency.
func (w *World) loaded(n *node, r *resident, ev evOutput, reply ownership.Reply, acked uint64) {
	key := ownership.StateKey(ev.actor)
	var h ownership.StateHeader
	var payload []byte
	cond := ownership.IfAbsent()
	switch reply.Outcome {
	case ownership.Landed:
		var err error
		if h, payload, err = ownership.DecodeState(reply.Body); err != nil {
			panic("sim: unreadable state: " + err.Error())
		}
		verdict, fenced := ownership.JudgeReload(true, h, r.gen, r.pending)
		if verdict == ownership.StateSuperseded {
			// Superseded: the resident ends its hold.
			w.note("superseded", n, "%s g%d by g%d", ev.actor, uint64(r.gen), uint64(h.Gen))
			if n.resident[ev.actor] == r {
				delete(n.resident, ev.actor)
				w.truth.endHold(ev.actor, n.inst, r.gen)
				w.step(n, ownership.HoldEnded{Actor: ev.actor, Gen: r.gen, Reason: "superseded"})
			}
			w.eventFailed(n, r, ev)
			return
		}
		if verdict == ownership.StateUse {
			w.useLoaded(n, r, ev, reply.ETag, h.Seq, payload, acked)
			return
		}
		h, cond = fenced, ownership.IfMatch(reply.ETag) // StateFence
	case ownership.NotFound:
		// A new room (no record existed, so nothing was sealed): the first
		// commit creates the object, If-None-Match.
		verdict, created := ownership.JudgeReload(false, ownership.StateHeader{}, r.gen, r.pending)
		if verdict == ownership.StateNew {
			r.loaded, r.etag, r.seq, r.value, r.alarm = true, "", created.Seq, 0, alarmRec{}
			w.commit(n, r, ev)
			return
		}
		h, payload = created, []byte("0") // a first commit may still land: created empty
	default:
		w.eventFailed(n, r, ev)
		return
	}
	// Not sealed for this hold, or a commit of the hold may still land:
	// fence it now, by the rule the actors layer uses (ownership.
	// JudgeReload).
	body := ownership.EncodeState(h, payload)
	w.stateIO(n, r, ev, ownership.Request{Op: ownership.OpPut, Key: key, Body: body, Cond: cond}, func(op *stateOp, reply ownership.Reply) {
		if reply.Outcome != ownership.Landed {
			w.eventFailed(n, r, ev)
			return
		}
		r.pending = false // nothing of the hold's can land after the fence
		w.useLoaded(n, r, ev, reply.ETag, h.Seq, payload, acked)
	})
}

// useLoaded takes a head that is the hold's: its count, from the run it
// names if it names one (acked: what was acknowledged when the head was
// read, which the run must hold at least).
func (w *World) useLoaded(n *node, r *resident, ev evOutput, etag ownership.ETag, seq uint64, payload []byte, acked uint64) {
	key, named := runNamed(payload)
	if !named {
		r.loaded, r.etag, r.seq, r.value, r.run, r.alarm = true, etag, seq, counterOf(payload), "", alarmOf(payload)
		w.commit(n, r, ev)
		return
	}
	w.stateIO(n, r, ev, ownership.Request{Op: ownership.OpGet, Key: key}, func(op *stateOp, reply ownership.Reply) {
		switch reply.Outcome {
		case ownership.Landed:
		case ownership.NotFound:
			w.fail("acknowledged write lost: %s's head names run %s, which is gone", ev.actor, key)
			w.eventFailed(n, r, ev)
			return
		default:
			w.eventFailed(n, r, ev)
			return
		}
		v := counterOf(reply.Body)
		if v < acked {
			w.fail("acknowledged write lost: %s loaded count %d from run %s, but %d was acknowledged", ev.actor, v, key, acked)
		}
		r.loaded, r.etag, r.seq, r.value, r.run, r.alarm = true, etag, seq, v, key, alarmOf(payload)
		w.commit(n, r, ev)
	})
}

// commit runs the event on the loaded state and commits what it writes,
// then releases its output: a client's event writes the count plus one,
// and now and then sets or deletes the room's alarm; an alarm's event
// judges its entry (judgeAlarm). The entry of an alarm set comes first
// (indexAlarm), as the actors layer writes it; then, for a third of the
// commits, the count goes into a run, which the head names.
func (w *World) commit(n *node, r *resident, ev evOutput) {
	c := &change{next: r.value + 1, alarm: r.alarm}
	switch ce := w.events[ev.id]; {
	case ce != nil && ce.alarm != nil:
		if !w.judgeAlarm(n, r, ev, ce, c) {
			return
		}
	case ce != nil:
		w.clientAlarm(n, c)
	}
	w.indexAlarm(n, r, ev, c, func() { w.commitWrites(n, r, ev, c) })
}

func (w *World) commitWrites(n *node, r *resident, ev evOutput, c *change) {
	count := []byte(strconv.FormatUint(c.next, 10))
	if w.rng.IntN(3) != 0 {
		w.writeHead(n, r, ev, c, count, "")
		return
	}
	key := ownership.RunKey(ev.actor, r.gen, w.rng.Uint64())
	w.stateIO(n, r, ev, ownership.Request{Op: ownership.OpPut, Key: key, Body: count, Cond: ownership.IfAbsent()}, func(op *stateOp, reply ownership.Reply) {
		if reply.Outcome != ownership.Landed {
			w.eventFailed(n, r, ev)
			return
		}
		w.writeHead(n, r, ev, c, []byte("run:"+key), key)
	})
}

// writeHead writes the head with payload (naming run, if not "") and the
// change's alarm, then releases the event's output, deletes the run the
// previous head named, and now and then sweeps the room's runs.
func (w *World) writeHead(n *node, r *resident, ev evOutput, c *change, payload []byte, run string) {
	next := c.next
	body := ownership.EncodeState(ownership.StateHeader{Gen: r.gen, Seq: r.seq + 1}, encodePayload(payload, c.alarm))
	cond := ownership.IfMatch(r.etag)
	if r.etag == "" {
		cond = ownership.IfAbsent()
	}
	seq := r.seq + 1
	landed := func(etag ownership.ETag) {
		prev := r.run
		r.etag, r.seq, r.value, r.run, r.alarm = etag, seq, next, run, c.alarm
		w.output(n, ev, next)
		w.eventDone(n, r)
		if prev != "" && prev != run {
			w.gcIO(n, r, ev, ownership.Request{Op: ownership.OpDelete, Key: prev, Cond: ownership.Always()}, nil)
		}
		if w.rng.IntN(4) == 0 {
			w.sweep(n, r, ev)
		}
	}
	op := w.stateIO(n, r, ev, ownership.Request{Op: ownership.OpPut, Key: ownership.StateKey(ev.actor), Body: body, Cond: cond}, func(op *stateOp, reply ownership.Reply) {
		switch reply.Outcome {
		case ownership.Landed:
			landed(reply.ETag)
		case ownership.Unknown:
			w.resolveCommit(n, r, ev, seq, body, landed)
		default:
			w.commitFailed(n, r, ev, reply.Outcome)
		}
	})
	op.commit, op.fires = true, c.fires
}

// resolveCommit finds out, as the actors layer does (ownership.
// JudgeLostCommit), what became of a commit stamped seq that had no
// answer: it reads the head again; the commit's own means it landed
// (landed runs, with the version read); the version the commit was
// conditioned on is fenced, written again as it was, so that the commit
// can never land, and the event is refused once the fence landed.
// Anything else leaves the outcome unknown.
func (w *World) resolveCommit(n *node, r *resident, ev evOutput, seq uint64, sent []byte, landed func(ownership.ETag)) {
	key := ownership.StateKey(ev.actor)
	w.stateIO(n, r, ev, ownership.Request{Op: ownership.OpGet, Key: key}, func(op *stateOp, reply ownership.Reply) {
		var payload []byte
		switch reply.Outcome {
		case ownership.Landed:
			var err error
			if _, payload, err = ownership.DecodeState(reply.Body); err != nil {
				panic("sim: unreadable state: " + err.Error())
			}
		case ownership.NotFound:
		default:
			w.commitFailed(n, r, ev, ownership.Unknown)
			return
		}
		switch ownership.JudgeLostCommit(reply.Outcome == ownership.Landed, reply.Body, reply.ETag, sent, r.etag) {
		case ownership.LostLanded:
			w.Stats.Resolved++
			landed(reply.ETag)
			return
		case ownership.LostUnknown:
			w.commitFailed(n, r, ev, ownership.Unknown)
			return
		}
		cond := ownership.IfMatch(reply.ETag)
		if r.etag == "" {
			payload, cond = []byte("0"), ownership.IfAbsent()
		}
		body := ownership.EncodeState(ownership.StateHeader{Gen: r.gen, Seq: seq + 1}, payload)
		w.stateIO(n, r, ev, ownership.Request{Op: ownership.OpPut, Key: key, Body: body, Cond: cond}, func(op *stateOp, reply ownership.Reply) {
			if reply.Outcome == ownership.Landed {
				w.Stats.Fenced++
				w.commitFailed(n, r, ev, ownership.Refused) // the commit can no longer land
				return
			}
			w.commitFailed(n, r, ev, ownership.Unknown)
		})
	})
}

// gcIO sends a bucket call of the runs' collection.
func (w *World) gcIO(n *node, r *resident, ev evOutput, req ownership.Request, then func(ownership.Reply)) {
	op := w.stateIO(n, r, ev, req, func(op *stateOp, reply ownership.Reply) {
		if then != nil {
			then(reply)
		}
	})
	op.gc = true // (its events are due later: nothing has seen it yet)
}

// sweep lists the room's runs and deletes those RunGarbage says the hold
// may: the listing's moment decides what its state lists.
func (w *World) sweep(n *node, r *resident, ev evOutput) {
	prefix := ownership.RunsPrefix(ev.actor)
	w.gcIO(n, r, ev, ownership.Request{Op: ownership.OpList, Key: prefix}, func(reply ownership.Reply) {
		if reply.Outcome != ownership.Landed || n.resident[ev.actor] != r || !r.loaded {
			return
		}
		for _, e := range reply.Page.Entries {
			g, _, ok := ownership.ParseRunName(strings.TrimPrefix(e.Key, prefix))
			if ok && ownership.RunGarbage(r.gen, e.Key == r.run, g) {
				w.gcIO(n, r, ev, ownership.Request{Op: ownership.OpDelete, Key: e.Key, Cond: ownership.Always()}, nil)
			}
		}
	})
}

// eventFailed forgets the resident state (the next event loads again) and
// refuses the event: nothing it wrote was sent, or what was sent was
// refused. The client retries.
func (w *World) eventFailed(n *node, r *resident, ev evOutput) {
	w.commitFailed(n, r, ev, ownership.Failed)
}

// commitFailed is eventFailed for an event whose commit ended with
// outcome: by the gate's rule, one that may still land answers "outcome
// unknown" (the client retries all the same, with no refusal to check),
// any other is refused.
func (w *World) commitFailed(n *node, r *resident, ev evOutput, outcome ownership.Outcome) {
	r.loaded = false
	if outcome == ownership.Unknown || outcome == ownership.BucketDamaged {
		r.pending = true // the next load seals the state again (ownership.JudgeReload)
	}
	if ce := w.events[ev.id]; ce != nil && ce.alarm != nil {
		// An alarm's event: its answer is not durable, whatever it judged.
		never := func() bool { return false }
		if ownership.Gate(ownership.EventEnd{Wrote: true, Commit: outcome, MayAct: never}) == ownership.GateRefuse {
			w.truth.refused(w, attemptKey{ev.id, ev.attempt})
		}
		w.alarmAnswered(n, ce, ev, false)
	} else if ce != nil {
		never := func() bool { return false }
		switch ownership.Gate(ownership.EventEnd{Wrote: true, Commit: outcome, MayAct: never}) {
		case ownership.GateUnknown:
			w.noteEv("io-unknown", n, ce.id, ev.actor, "")
			w.Stats.Unknowns++
			w.retry(ce)
		default:
			w.noteEv("io-failed", n, ce.id, ev.actor, "")
			w.refuse(ce, ev)
		}
	}
	w.eventDone(n, r)
}

// eventDone starts the next queued event of the resident.
func (w *World) eventDone(n *node, r *resident) {
	r.busy = false
	if len(r.queue) == 0 {
		return
	}
	next := r.queue[0]
	r.queue = r.queue[1:]
	w.runEvent(n, next)
}
