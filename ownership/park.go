package ownership

import (
	"fmt"
	"time"
)

// Parking and waking (docs/PROTOCOL.md §4): an idle drop with open
// sockets parks the hold; the next event acquires at a new generation.
// This file is small on purpose: the simulation's broken variants replace
// it whole.

func (c *Core) acquire(in Acquire) {
	refuse := func(reason string, draining bool) {
		r := Refuse{Actor: in.Actor, Ref: in.Ref, Reason: reason, RetryAfter: c.cfg.LeasePeriod, Draining: draining}
		if draining {
			r.Peer, r.PeerAddr, r.PeerInstance = c.drainPeer(in.Actor)
		}
		c.emit(r)
	}
	switch {
	case c.phase != phaseRunning:
		refuse("node starting", false)
		return
	case c.mode == modeStopping:
		refuse("node stopping", false)
		return
	}
	e := c.entry(in.Actor)
	if e.moving != nil {
		c.route(e, in.Ref, e.moving.target)
		c.gc(e)
		return
	}
	if c.handsOver() {
		// A draining node takes no actor; a parked record is released first,
		// so the peer the event goes to finds it free. (A drain with no live
		// peer is stuck, and serves as before.)
		c.releaseParked(e, "drain")
		c.advance(e)
		refuse("node draining", true)
		c.gc(e)
		return
	}
	if !c.LeaseValid(c.now) {
		refuse("node lease not valid", false)
		c.gc(e)
		return
	}
	if e.live != nil {
		c.emit(Grant{Actor: in.Actor, Ref: in.Ref, Gen: e.live.gen})
		return
	}
	if e.acq == nil && e.parked == nil && len(e.pending) == 0 && len(e.unresolved) == 0 && len(e.ending) == 0 {
		if n, ok := c.routeFor(in.Actor); ok {
			c.route(e, in.Ref, n) // see routes.go
			c.gc(e)
			return
		}
	}
	if e.acq == nil {
		e.acq = &acquireJob{}
	}
	e.acq.waiters = append(e.acq.waiters, waiter{ref: in.Ref, since: c.now})
	c.advance(e)
}

// idle parks the hold when the rules of parking allow, and releases it
// otherwise. Parking moves the hold from live to parked in this one step.
func (c *Core) idle(in Idle) {
	e := c.entries[in.Actor]
	if e != nil && c.confirmEnded(e, in.Gen) {
		// The resident actor of a hold that stopped acting has ended.
		c.advance(e)
		return
	}
	if e == nil || e.live == nil || e.live.gen != in.Gen {
		return
	}
	if e.sockets > 0 && c.LeaseValid(c.now) && c.serving() && e.moving == nil {
		e.parked, e.live = e.live, nil
		c.setParked(c.parked + 1)
		c.count("wasmkeep_parks_total", "")
		c.advance(e)
		return
	}
	h := *e.live
	e.live = nil
	c.queueRelease(e, h, "idle", false, false)
	c.advance(e)
}

func (c *Core) onAcquireWrite(e *entry, f *flight, r Reply) {
	switch r.Outcome {
	case Landed:
		c.granted(e, hold{gen: f.gen, etag: r.ETag})
	case Refused, NotFound:
		// The record moved under us: re-read and decide again. The write is
		// also watched as unresolved: a store that answers 409 having applied
		// the write must not leave a record naming us with nothing here.
		e.unresolved = append(e.unresolved, &unresolved{
			gen: f.gen, nonce: f.nonce, prior: f.prior, created: f.prior == "", since: f.sentAt, due: c.now.Add(c.cfg.AttemptTimeout),
		})
		if e.acq == nil {
			return
		}
		e.acq.attempts++
		if e.acq.attempts > maxAcquireRounds {
			c.refuseWaiters(e, "record contended", false)
			return
		}
		e.acq.retryAt = time.Time{}
	case Unknown:
		// It may have landed, or may land later: the resolver watches it, and
		// this acquisition re-reads at once to learn which.
		e.unresolved = append(e.unresolved, &unresolved{
			gen: f.gen, nonce: f.nonce, prior: f.prior, created: f.prior == "", since: f.sentAt, due: c.now.Add(c.cfg.AttemptTimeout),
		})
		// A wake's parked entry stays: if the write did not land, the record
		// still names the parked hold, which only that entry can release.
		if e.acq != nil {
			e.acq.attempts++
			if e.acq.attempts > maxAcquireRounds {
				c.refuseWaiters(e, "record write without answer", false)
			}
		}
	default:
		c.refuseWaiters(e, "record write failed: "+errText(r.Err), false)
	}
}

// granted makes a landed acquisition the live hold, if the node may still act.
func (c *Core) granted(e *entry, h hold) {
	if e.parked != nil && e.parked.gen < h.gen {
		// A wake: the record moved from the parked hold to this one.
		c.dropParked(e)
		c.count(MetricParkedWakes, "")
	}
	if !c.LeaseValid(c.now) || !c.serving() || e.moving != nil {
		reason := "lapse"
		if c.mode == modeDraining {
			reason = "drain"
		} else if c.mode == modeStopping {
			reason = "stop"
		}
		c.queueRelease(e, h, reason, false, false)
		c.refuseWaiters(e, "node cannot act", c.mode == modeDraining)
		return
	}
	if e.live != nil && e.live.gen >= h.gen {
		panic(fmt.Sprintf("ownership: %s granted generation %d over live generation %d", e.actor, h.gen, e.live.gen))
	}
	e.live = &h
	label := "taken"
	if h.gen == 1 {
		label = "created"
	}
	c.count(MetricAcquisitions, label)
	if e.acq != nil {
		state := e.acq.sealed
		if state != nil && state.Gen != h.gen {
			state = nil // sealed for another round's generation
		}
		for _, w := range e.acq.waiters {
			c.emit(Grant{Actor: e.actor, Ref: w.ref, Gen: h.gen, State: state})
		}
		e.acq = nil
	}
}

// wakeUnread starts the wake of a parked hold without reading its record:
// the record names this node at the parked generation, at the version the
// parked hold knows (no node writes a record whose holder's lease is live,
// and a release of ours, or a write of ours whose outcome is unknown,
// rules this path out), so the wake seals the state and writes the next
// generation over that version. The write's condition keeps it safe: a
// record that moved after all refuses it, and the acquisition reads the
// record as any other does. A wake so costs three requests, the seal's read
// and write and the record's write, and its state is not read again.
func (c *Core) wakeUnread(e *entry) bool {
	if e.parked == nil || e.acq.unread || e.acq.attempts > 0 || len(e.unresolved) > 0 || len(e.pending) > 0 {
		return false
	}
	e.acq.unread = true
	if !c.LeaseValid(c.now) || !c.serving() {
		return false // the record's read refuses it, as any
	}
	c.takeAt(e, e.parked.gen+1, e.parked.etag)
	return true
}
