package ownership

import "time"

// The seal (docs/PROTOCOL.md §6, property 2: a superseded hold's write never
// becomes visible to a later hold). Before an acquisition writes the record
// at generation g, it rewrites the actor's state object stamped with g,
// conditioned on the version it read, keeping the payload as it was. Every
// commit of an older hold is conditioned on a version from before the seal,
// so none can land after it, however late it arrives; and the seal lands
// before the record, so no commit of an older hold lands once hold g exists.
// A resident actor that finds the object stamped above its own generation
// was superseded, and ends its hold.
// Fencing at the first event of the new hold instead would leave a window
// between the record write and that fence in which an old commit with a
// lost answer could still land.
//
// An actor with no record yet is not sealed: records are never deleted, so
// no hold of it ever existed and no commit can be in flight.
//
// A seal only restamps what it read, under a condition: one that lands late,
// or one whose acquisition then failed, never loses or changes a write. An
// object already stamped with a later generation means a later acquisition
// sealed it, and this one takes that generation (see onSealRead).

// Sealed is an actor's state object as an acquisition's seal wrote it: its
// body and the version it landed at, for the hold at Gen. The Grant of that
// hold carries it, and the hold's first load takes it instead of reading
// the object again (a wake then costs the seal's read and write and the
// record's write): no hold but that one can have written the object
// since, as every older hold's write is conditioned on a version from
// before the seal. A later acquisition's seal may have rewritten it (this
// hold was superseded meanwhile): the hold's first commit, conditioned on
// ETag, is then refused, and its output is withheld as for any hold that
// is no longer live.
type Sealed struct {
	Gen  Generation
	Body []byte
	ETag ETag
}

// seal starts the seal of an acquisition that will write the record at gen
// over the version prior ("" to create it).
func (c *Core) seal(e *entry, gen Generation, prior ETag, wake bool) {
	e.acq.sealed = nil
	e.busy = c.send(fSealRead, OpGet, StateKey(e.actor), nil, Always(), &flight{
		actor: e.actor, gen: gen, prior: prior, wake: wake,
	})
}

func (c *Core) onSealRead(e *entry, f *flight, r Reply) {
	if e.acq == nil {
		return // nobody waits any more
	}
	var body []byte
	var cond Condition
	switch r.Outcome {
	case Landed:
		h, payload, err := DecodeState(r.Body)
		if err != nil {
			// Never overwritten: restamping would need its payload as it
			// was, and only a person can tell what that was.
			c.reportUnreadable(StateKey(e.actor), err)
			c.refuseDamaged(e, StateKey(e.actor))
			return
		}
		if h.Gen > f.gen {
			// An acquisition that sealed at a later generation and then wrote
			// no record (it lost the race, or its node died between the two
			// writes): take that generation, so the stamp never stays above
			// every record. If it did write its record, that record changed
			// the version ours is conditioned on, and ours is refused.
			f.gen = h.Gen
		}
		body, cond = EncodeState(StateHeader{Gen: f.gen, Seq: h.Seq + 1}, payload), IfMatch(r.ETag)
	case NotFound:
		body, cond = EncodeState(StateHeader{Gen: f.gen, Seq: 1}, nil), IfAbsent()
	case Damaged:
		// The store has the object but will not hand it out: it cannot be
		// restamped without losing what it holds, and no hold may be granted
		// unsealed (an older hold's commit could still land on it).
		c.reportDamaged(StateKey(e.actor), r.Err)
		c.refuseDamaged(e, StateKey(e.actor))
		return
	default:
		c.refuseWaiters(e, "bucket did not answer the actor state read", false)
		return
	}
	e.busy = c.send(fSealWrite, OpPut, StateKey(e.actor), body, cond, &flight{
		actor: e.actor, gen: f.gen, prior: f.prior, wake: f.wake, body: body,
	})
}

func (c *Core) onSealWrite(e *entry, f *flight, r Reply) {
	if e.acq == nil {
		return
	}
	switch r.Outcome {
	case Landed:
		if !c.LeaseValid(c.now) || c.mode != modeServing {
			c.refuseWaiters(e, "node lease not valid", c.mode == modeDraining)
			return
		}
		e.acq.sealed = &Sealed{Gen: f.gen, Body: f.body, ETag: r.ETag}
		c.writeRecord(e, f.gen, f.prior, f.wake)
	case Refused, NotFound:
		// A commit landed between the read and the seal, or another
		// acquisition sealed: read the record again.
		c.sealRound(e, "actor state changed under the seal")
	case Unknown:
		// Harmless if it lands later (see above); this round is lost.
		c.sealRound(e, "actor state seal without answer")
	default:
		c.refuseWaiters(e, "actor state seal failed: "+errText(r.Err), false)
	}
}

// sealRound ends an acquisition round that could not seal: the record is
// read again, at once, up to the bound on rounds.
func (c *Core) sealRound(e *entry, why string) {
	e.acq.attempts++
	if e.acq.attempts > maxAcquireRounds {
		c.refuseWaiters(e, why, false)
		return
	}
	e.acq.retryAt = time.Time{}
}

// writeRecord writes the record at gen naming this instance, over the
// version prior ("" to create it); the seal at gen has landed.
func (c *Core) writeRecord(e *entry, gen Generation, prior ETag, wake bool) {
	cond := IfAbsent()
	if prior != "" {
		cond = IfMatch(prior)
	}
	written, body := c.ownRecord(e.actor, gen, true)
	e.busy = c.send(fAcqWrite, OpPut, e.key, body, cond, &flight{
		actor: e.actor, gen: gen, nonce: written.Nonce, prior: prior, wake: wake,
	})
}
