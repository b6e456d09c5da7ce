package sim

import (
	"sort"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// truth is what the simulator knows that no node does: which holds were
// granted to which instance, who acted at which generation, which instances
// stopped cleanly.
type truth struct {
	holds      map[ownership.Actor]map[ownership.Generation]*holdTruth
	acted      map[ownership.Actor]map[ownership.Generation]ownership.InstanceID
	maxActed   map[ownership.Actor]ownership.Generation
	ended      map[ownership.InstanceID]bool
	clean      map[ownership.InstanceID]bool
	drains     map[ownership.InstanceID]time.Duration // instance → drain start, until drained
	moves      map[ownership.InstanceID]map[ownership.Actor]bool
	lateServed []string
	// landed and refusedAt: the client attempts whose commit landed, and
	// those refused after they ran (a refusal says the event took no
	// effect, so these two must never meet).
	landed, refusedAt map[attemptKey]bool
	// fired: the alarm sets (nonces) a landed commit fired.
	fired map[string]bool
}

// attemptKey names one attempt of a client's event.
type attemptKey struct {
	id      uint64
	attempt int
}

// refused: a refused attempt's writes are never visible. Checked at the
// refusal and, for a write that would land later, at its landing.
func (t *truth) refused(w *World, k attemptKey) {
	if t.landed[k] {
		w.fail("refused event's writes visible: e%d attempt %d was refused after its commit landed", k.id, k.attempt)
		return
	}
	t.refusedAt[k] = true
}

// commitLanded records that an attempt's commit landed.
func (t *truth) commitLanded(w *World, k attemptKey) {
	if t.refusedAt[k] {
		w.fail("refused event's writes visible: the commit of e%d attempt %d landed after the attempt was refused", k.id, k.attempt)
		return
	}
	t.landed[k] = true
}

type holdTruth struct {
	instance ownership.InstanceID
	ended    bool
}

func (t *truth) init() {
	t.holds = map[ownership.Actor]map[ownership.Generation]*holdTruth{}
	t.acted = map[ownership.Actor]map[ownership.Generation]ownership.InstanceID{}
	t.maxActed = map[ownership.Actor]ownership.Generation{}
	t.ended = map[ownership.InstanceID]bool{}
	t.clean = map[ownership.InstanceID]bool{}
	t.drains = map[ownership.InstanceID]time.Duration{}
	t.moves = map[ownership.InstanceID]map[ownership.Actor]bool{}
	t.landed, t.refusedAt = map[attemptKey]bool{}, map[attemptKey]bool{}
	t.fired = map[string]bool{}
}

// grant: never one generation for two holds. A grant at a generation that
// another instance held, or that this instance held and ended (parked,
// released, stopped), is a second hold with the same generation.
func (t *truth) grant(w *World, a ownership.Actor, inst ownership.InstanceID, gen ownership.Generation) {
	byGen := t.holds[a]
	if byGen == nil {
		byGen = map[ownership.Generation]*holdTruth{}
		t.holds[a] = byGen
	}
	h := byGen[gen]
	switch {
	case h == nil:
		byGen[gen] = &holdTruth{instance: inst}
	case h.instance != inst:
		w.fail("one generation for two holds: %s generation %d granted to %s and to %s", a, gen, h.instance, inst)
	case h.ended:
		w.fail("one generation for two holds: %s generation %d granted again to %s after that hold ended (re-adoption)", a, gen, inst)
	}
}

func (t *truth) endHold(a ownership.Actor, inst ownership.InstanceID, gen ownership.Generation) {
	if h := t.holds[a][gen]; h != nil && h.instance == inst {
		h.ended = true
	}
}

func (t *truth) endInstance(inst ownership.InstanceID) {
	t.ended[inst] = true
	for _, byGen := range t.holds {
		for _, h := range byGen {
			if h.instance == inst {
				h.ended = true
			}
		}
	}
}

// act: never two owners acting. One generation is acted by one instance,
// and the generations acting for an actor never go back.
func (t *truth) act(w *World, a ownership.Actor, inst ownership.InstanceID, gen ownership.Generation) {
	byGen := t.acted[a]
	if byGen == nil {
		byGen = map[ownership.Generation]ownership.InstanceID{}
		t.acted[a] = byGen
	}
	if other, ok := byGen[gen]; ok && other != inst {
		w.fail("two owners acting: %s generation %d acted by %s and by %s", a, gen, other, inst)
		return
	}
	if gen < t.maxActed[a] {
		w.fail("acting generation went back: %s acted at %d by %s after %d", a, gen, inst, t.maxActed[a])
		return
	}
	byGen[gen] = inst
	t.maxActed[a] = gen
}

func (t *truth) stoppedCleanly(inst ownership.InstanceID) { t.clean[inst] = true }

func (t *truth) drainStarted(inst ownership.InstanceID, at time.Duration) { t.drains[inst] = at }

func (t *truth) drained(inst ownership.InstanceID) {
	delete(t.drains, inst)
	t.clean[inst] = true
}

func (t *truth) moved(inst ownership.InstanceID, a ownership.Actor) {
	if t.moves[inst] == nil {
		t.moves[inst] = map[ownership.Actor]bool{}
	}
	t.moves[inst][a] = true
}

// served checks liveness: an event born once the heal has settled is served
// within the bound.
func (t *truth) served(w *World, ce *clientEvent) {
	if w.healed && ce.born >= w.healAt+w.settle() && w.now-ce.born > w.P.LivenessBound {
		w.fail("liveness: event e%d for %s born at %v served only after %v", ce.id, ce.room, ce.born, w.now-ce.born)
	}
}

// settle is how long after the heal the cluster may take to recover: a dead
// node's records are free ttl + grace after its last write, plus a period.
func (w *World) settle() time.Duration {
	c := coreConfig("n", "i")
	return c.LeaseTTL + c.Grace + 2*c.LeasePeriod + c.AttemptTimeout
}

// taken runs when an acquisition lands: no other node may still be running
// a stopped resident of the room (it could still commit), keep the room
// parked with a valid lease, nor hold its sockets while live, valid and not
// draining, unless its own wake had an unknown outcome or found another
// holder (counted apart as exposed), or the room is being moved away.
func (w *World) taken(rec ownership.Record) {
	a := ownership.Actor{Class: rec.Class, Name: rec.Name}
	for _, n := range w.nodes {
		if !n.up || n.name == rec.Node {
			continue
		}
		if w.now < n.finishing[a] {
			w.fail("room taken while its resident may still commit: %s taken by %s at generation %d while %s's stopped resident is still finishing its event", a, rec.Node, rec.Generation, n.inst)
			return
		}
		valid := n.core.LeaseValid(n.clock(w.now))
		if _, parked := n.core.Parked(a); parked && valid {
			w.fail("room taken while parked: %s taken by %s at generation %d while %s parks it with a valid lease", a, rec.Node, rec.Generation, n.inst)
			return
		}
		if len(n.sockets[a]) > 0 && valid && !n.draining && !n.stopping && !w.truth.moves[n.inst][a] {
			if n.exposed[a] {
				w.Stats.Exposed++
				w.note("exposed", n, "%s", a)
				continue
			}
			w.fail("room taken from its sockets: %s taken by %s at generation %d while %s holds %d socket(s) with a valid lease", a, rec.Node, rec.Generation, n.inst, len(n.sockets[a]))
			return
		}
	}
}

// checkStep runs after every event: no leaked record. A record held by an
// instance whose lease is valid must be held, parked or pending there.
// Only an event that fed a core or landed one of its writes can break it
// (a record and what a core tracks change only then, and without a
// renewal a lease only ever stops being valid): the others skip it.
func (w *World) checkStep() {
	if !w.coresChanged {
		return
	}
	w.coresChanged = false
	for _, rec := range w.heldRecords() {
		n := w.nodeByName(rec.Node)
		if n == nil || !n.up || n.inst != rec.Instance {
			continue
		}
		a := ownership.Actor{Class: rec.Class, Name: rec.Name}
		if n.core.LeaseValid(n.clock(w.now)) && !n.core.Tracks(a) {
			w.fail("leaked record: %s names %s at generation %d, which neither holds, parks, nor has anything pending for it", a, rec.Instance, rec.Generation)
			return
		}
	}
}

// checkFinal runs after the quiet window.
func (w *World) checkFinal() {
	for _, rec := range w.heldRecords() {
		if w.truth.clean[rec.Instance] {
			w.fail("leaked record: %s names %s at generation %d, an instance that stopped cleanly or drained", ownership.Actor{Class: rec.Class, Name: rec.Name}, rec.Instance, rec.Generation)
			return
		}
	}
	insts := make([]string, 0, len(w.truth.drains))
	for inst := range w.truth.drains {
		insts = append(insts, string(inst))
	}
	sort.Strings(insts)
	for _, inst := range insts {
		if !w.truth.ended[ownership.InstanceID(inst)] {
			w.fail("liveness: the drain of %s, begun at %v, never finished", inst, w.truth.drains[ownership.InstanceID(inst)])
			return
		}
	}
	for _, id := range w.sortedEventIDs() {
		ce := w.events[id]
		if !ce.take && ce.alarm == nil && w.healed && ce.born >= w.healAt+w.settle() {
			w.fail("liveness: event e%d for %s born at %v never served", ce.id, ce.room, ce.born)
			return
		}
	}
	for _, a := range w.rooms {
		if obj, err := w.bucket.Get(ownership.StateKey(a)); err == nil {
			_, payload, derr := ownership.DecodeState(obj.Body)
			if key, named := runNamed(payload); derr == nil && named {
				run, err := w.bucket.Get(key)
				if err != nil {
					w.fail("acknowledged write lost: %s's head names run %s: %v", a, key, err)
					return
				}
				payload = run.Body
			}
			if derr == nil && counterOf(payload) < w.acked[a] {
				w.fail("acknowledged write lost: %s ends with count %d, but %d was acknowledged", a, counterOf(payload), w.acked[a])
				return
			}
		} else if w.acked[a] > 0 {
			w.fail("acknowledged write lost: %s has no state object: %v", a, err)
			return
		}
	}
	if w.checkAlarms(); w.Failure != "" {
		return
	}
	for _, n := range w.nodes {
		if !n.up {
			w.fail("liveness: node %s is not back up after the heal", n.name)
			return
		}
		if s := n.core.Status(n.clock(w.now)); s.Pending > 0 || s.Unresolved > 0 {
			w.fail("liveness: %s still has %d pending releases and %d unresolved acquisitions after the quiet window", n.inst, s.Pending, s.Unresolved)
			return
		}
	}
}

func (w *World) sortedEventIDs() []uint64 {
	ids := make([]uint64, 0, len(w.events))
	for id := range w.events {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// heldRecords lists the ownership records that name a holder, in room
// order. The simulator is the bucket's only writer, so it keeps every
// record's latest landed version (see land).
func (w *World) heldRecords() []ownership.Record {
	out := w.heldBuf[:0]
	for _, a := range w.rooms {
		if rec, ok := w.records[a]; ok && rec.Held {
			out = append(out, rec)
		}
	}
	w.heldBuf = out
	return out
}
