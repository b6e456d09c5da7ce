package ownership

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// entry is everything this node knows of one actor. The hold sets of the
// design (live holds, parked holds, pending releases, unresolved acquires)
// are the fields of the entries; only the core's own steps change them.
//
// Invariant: at most one request on the actor's record is in flight (busy).
type entry struct {
	actor Actor
	key   string

	live       *hold
	parked     *hold
	ending     []*endingHold // stopped acting; released once the shell confirms
	pending    []*pendingRelease
	unresolved []*unresolved
	sockets    int

	busy      RequestID
	acq       *acquireJob
	sweepRead sweepRead
	moving    *moving
	look      *look
	scheduled time.Time
}

type hold struct {
	gen  Generation
	etag ETag
}

// endingHold is a hold that stopped acting (StopActing) whose instance may
// still be finishing its event, with a commit in flight. It is released once
// the shell confirms the instance ended (Idle at its generation), or after
// EndWait: releasing at once would let the next holder take the record while
// that commit can still land.
type endingHold struct {
	h      hold
	reason string
	parked bool
	move   bool
	due    time.Time
}

type pendingRelease struct {
	h        hold
	reason   string
	parked   bool
	move     bool
	reread   bool // the write was refused: read the record before anything else
	attempts int
	due      time.Time
}

// unresolved is an acquisition write with no answer: it may have landed, or
// may still land.
type unresolved struct {
	gen     Generation
	nonce   string
	prior   ETag // the version the write was conditioned on; "" for a create
	created bool
	since   time.Time
	due     time.Time
}

type acquireJob struct {
	waiters  []waiter
	attempts int
	retryAt  time.Time // zero: read now
	// seenETag is the record version last read, first read at seenAt.
	seenETag ETag
	seenAt   time.Time
	// unread: a wake of a parked hold that writes the record over the
	// version it holds without reading it first (see wakeUnread); set once
	// tried, so a refused write reads the record.
	unread bool
	// sealed is the state as this acquisition's last seal wrote it.
	sealed *Sealed
}

type waiter struct {
	ref   uint64
	since time.Time
}

type sweepRead uint8

const (
	sweepNone   sweepRead = iota
	sweepReread           // the one-pass-in-ten re-read of a parked record
	sweepOwner            // sockets here, no hold: does another node hold the room?
)

type moving struct {
	target NodeID
	until  time.Time
}

type look struct {
	until time.Time
	due   time.Time
}

func (c *Core) entry(a Actor) *entry {
	e := c.entries[a]
	if e == nil {
		e = &entry{actor: a, key: OwnerKey(a)}
		c.entries[a] = e
	}
	return e
}

// gc forgets an entry that holds nothing and waits for nothing.
func (c *Core) gc(e *entry) {
	if e.live == nil && e.parked == nil && len(e.ending) == 0 && len(e.pending) == 0 && len(e.unresolved) == 0 &&
		e.sockets == 0 && e.busy == 0 && e.acq == nil && e.moving == nil && e.look == nil && e.sweepRead == sweepNone {
		delete(c.entries, e.actor)
	}
}

func (c *Core) setParked(n int) {
	if n != c.parked {
		c.parked = n
		c.emit(SetGauge{Name: MetricParkedRecords, Value: float64(n)})
	}
}

func (c *Core) ownRecord(a Actor, gen Generation, held bool) (Record, []byte) {
	r := Record{Class: a.Class, Name: a.Name, Node: c.cfg.Node, Instance: c.cfg.Instance, Generation: gen, Held: held, Nonce: c.nonce()}
	return r, EncodeRecord(r)
}

// ---- events ----

func (c *Core) route(e *entry, ref uint64, n NodeID) {
	r := Route{Actor: e.actor, Ref: ref, Node: n}
	if p := c.peers[n]; p != nil {
		r.Addr, r.Instance = p.lease.Addr, p.lease.Instance
	}
	c.count(MetricRoutes, "")
	c.emit(r)
}

func (c *Core) holdEnded(in HoldEnded) {
	e := c.entries[in.Actor]
	if e != nil && c.confirmEnded(e, in.Gen) {
		c.advance(e)
		return
	}
	if e == nil || e.live == nil || e.live.gen != in.Gen {
		return
	}
	reason := in.Reason
	if reason == "" {
		reason = "ended"
	}
	h := *e.live
	e.live = nil
	c.queueRelease(e, h, reason, false, false)
	c.advance(e)
}

func (c *Core) socketOpened(a Actor) { c.entry(a).sockets++ }

func (c *Core) socketGone(a Actor) {
	e := c.entries[a]
	if e == nil || e.sockets == 0 {
		return
	}
	e.sockets--
	if e.sockets == 0 && e.live == nil {
		c.releaseParked(e, "last_socket")
	}
	if e.sockets == 0 {
		e.look = nil
	}
	c.advance(e)
	c.gc(e)
}

// countGauges counts live holds and pending releases (ending holds
// included) in one pass and reports both gauges; it returns the live count.
// It runs once per lease write, not per event: the gauges lag by at most a
// lease period, and no event pays for a walk over every entry.
func (c *Core) countGauges() int {
	live, pending := 0, 0
	for _, e := range c.entries {
		if e.live != nil {
			live++
		}
		pending += len(e.pending) + len(e.ending)
	}
	c.emit(SetGauge{Name: MetricLiveHolds, Value: float64(live)})
	c.emit(SetGauge{Name: MetricPendingReleases, Value: float64(pending)})
	return live
}

// ---- ending holds ----

// endLive stops the live hold; it is released once the shell confirms the
// instance ended (see endingHold).
func (c *Core) endLive(e *entry, reason string) { c.endLiveFor(e, reason, false) }

func (c *Core) endLiveFor(e *entry, reason string, move bool) {
	if e.live == nil {
		return
	}
	h := *e.live
	e.live = nil
	c.emit(StopActing{Actor: e.actor, Gen: h.gen, Reason: reason})
	e.ending = append(e.ending, &endingHold{h: h, reason: reason, move: move, due: c.now.Add(c.cfg.EndWait)})
}

// confirmEnded releases an ending hold at gen once its instance ended; it
// reports whether there was one.
func (c *Core) confirmEnded(e *entry, gen Generation) bool {
	for i, x := range e.ending {
		if x.h.gen == gen {
			e.ending = append(e.ending[:i], e.ending[i+1:]...)
			c.queueRelease(e, x.h, x.reason, x.parked, x.move)
			return true
		}
	}
	return false
}

// releaseParked moves the parked record to the pending releases.
func (c *Core) releaseParked(e *entry, reason string) {
	if e.parked == nil {
		return
	}
	h := *e.parked
	e.parked = nil
	c.setParked(c.parked - 1)
	c.queueRelease(e, h, reason, true, false)
}

// dropParked forgets a parked entry whose record is known to have moved.
func (c *Core) dropParked(e *entry) {
	if e.parked != nil {
		e.parked = nil
		c.setParked(c.parked - 1)
	}
}

func (c *Core) queueRelease(e *entry, h hold, reason string, parked, move bool) {
	for _, p := range e.pending {
		if p.h == h {
			p.parked = p.parked || parked
			p.move = p.move || move
			return
		}
	}
	e.pending = append(e.pending, &pendingRelease{h: h, reason: reason, parked: parked, move: move, due: c.now})
}

func (c *Core) refuseWaiters(e *entry, reason string, draining bool) {
	if e.acq == nil {
		return
	}
	for _, w := range e.acq.waiters {
		r := Refuse{Actor: e.actor, Ref: w.ref, Reason: reason, RetryAfter: c.cfg.LeasePeriod, Draining: draining}
		if draining {
			r.Peer, r.PeerAddr, r.PeerInstance = c.drainPeer(e.actor)
		}
		c.emit(r)
	}
	e.acq = nil
}

// refuseDamaged refuses every waiter of e because the actor's object at key
// (its record or its state) is damaged: no retry serves the actor until a
// person restores it. Nothing is written; the object is left as it is.
func (c *Core) refuseDamaged(e *entry, key string) {
	if e.acq == nil {
		return
	}
	for _, w := range e.acq.waiters {
		c.emit(Refuse{Actor: e.actor, Ref: w.ref, Reason: describeObject(key) + " damaged in the bucket: " + key, Damaged: key})
	}
	e.acq = nil
}

// ---- the per-actor request scheduler ----

// advance sends the actor's next request when none is in flight: due
// releases first, then the waiting acquisition, the resolver, the move's
// look and the sweep's read. Otherwise it schedules the next due time.
func (c *Core) advance(e *entry) {
	if e.busy != 0 || c.phase != phaseRunning {
		return
	}
	var next time.Time
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for i := 0; i < len(e.ending); i++ {
		if x := e.ending[i]; !c.now.Before(x.due) {
			// No confirmation within EndWait: release anyway, so a shell that
			// lost track of the instance cannot keep the record forever.
			c.confirmEnded(e, x.h.gen)
			i--
			continue
		}
		later(e.ending[i].due)
	}
	for _, p := range e.pending {
		if !c.now.Before(p.due) {
			if p.reread {
				e.busy = c.send(fReleaseRead, OpGet, e.key, nil, Always(), &flight{actor: e.actor, rel: p})
				return
			}
			_, body := c.ownRecord(e.actor, p.h.gen, false)
			e.busy = c.send(fRelease, OpPut, e.key, body, IfMatch(p.h.etag), &flight{actor: e.actor, rel: p, gen: p.h.gen})
			return
		}
		later(p.due)
	}
	if e.acq != nil {
		if c.expireWaiters(e) {
			if !c.now.Before(e.acq.retryAt) {
				if c.wakeUnread(e) {
					return
				}
				e.busy = c.send(fAcqRead, OpGet, e.key, nil, Always(), &flight{actor: e.actor})
				return
			}
			later(e.acq.retryAt)
		}
	}
	for _, u := range e.unresolved {
		if !c.now.Before(u.due) {
			e.busy = c.send(fResolveRead, OpGet, e.key, nil, Always(), &flight{actor: e.actor})
			return
		}
		later(u.due)
	}
	if e.look != nil {
		if !c.now.Before(e.look.until) {
			e.look = nil
			if e.moving != nil && !c.now.Before(e.moving.until) {
				e.moving = nil
			}
		} else if !c.now.Before(e.look.due) {
			e.busy = c.send(fLookRead, OpGet, e.key, nil, Always(), &flight{actor: e.actor})
			return
		} else {
			later(e.look.due)
		}
	}
	if e.moving != nil && e.look == nil {
		if !c.now.Before(e.moving.until) {
			e.moving = nil
		} else {
			later(e.moving.until)
		}
	}
	if e.sweepRead != sweepNone {
		e.busy = c.send(fSweepRead, OpGet, e.key, nil, Always(), &flight{actor: e.actor})
		return
	}
	if !next.IsZero() {
		c.schedule(e, next)
	}
	c.gc(e)
}

// expireWaiters refuses waiters that waited past the failover bound; it
// reports whether any remain.
func (c *Core) expireWaiters(e *entry) bool {
	kept := e.acq.waiters[:0]
	for _, w := range e.acq.waiters {
		if c.now.Sub(w.since) >= c.cfg.FailoverWait {
			c.emit(Refuse{Actor: e.actor, Ref: w.ref, Reason: "holder unreachable past the failover wait", RetryAfter: c.cfg.LeasePeriod})
			continue
		}
		kept = append(kept, w)
	}
	e.acq.waiters = kept
	if len(kept) == 0 {
		e.acq = nil
		return false
	}
	return true
}

// wakeWaiting re-reads, now, the records of acquisitions waiting on the
// membership view (a fence landed, a peer's lease was read).
func (c *Core) wakeWaiting() {
	if len(c.waiting) == 0 {
		return
	}
	actors := make([]Actor, 0, len(c.waiting))
	for a := range c.waiting {
		actors = append(actors, a)
	}
	clear(c.waiting)
	slices.SortFunc(actors, func(x, y Actor) int { return strings.Compare(x.String(), y.String()) })
	for _, a := range actors {
		if e := c.entries[a]; e != nil && e.acq != nil && !e.acq.retryAt.IsZero() {
			e.acq.retryAt = time.Time{}
			c.advance(e)
		}
	}
}

func (c *Core) onEntryReply(f *flight, r Reply) {
	e := c.entries[f.actor]
	if e == nil || e.busy != r.ID {
		return
	}
	e.busy = 0
	switch f.kind {
	case fAcqRead:
		c.onAcquireRead(e, r)
	case fSealRead:
		c.onSealRead(e, f, r)
	case fSealWrite:
		c.onSealWrite(e, f, r)
	case fAcqWrite:
		c.onAcquireWrite(e, f, r)
	case fRelease:
		c.onRelease(e, f, r)
	case fReleaseRead:
		c.onReleaseRead(e, f, r)
	case fResolveRead:
		c.onResolveRead(e, r)
	case fSweepRead:
		c.onSweepRead(e, r)
	case fLookRead:
		c.onLookRead(e, r)
	}
	c.advance(e)
	c.gc(e)
}

// readRecord decodes an owner record reply: ok is false when the reply says
// nothing usable (no answer, or a damaged record, which is reported and
// makes damaged true).
func (c *Core) readRecord(e *entry, r Reply) (rec *Record, ok, damaged bool) {
	switch r.Outcome {
	case NotFound:
		return nil, true, false
	case Landed:
		got, err := DecodeRecord(r.Body)
		if err != nil {
			c.reportUnreadable(e.key, err)
			return nil, false, true
		}
		return &got, true, false
	case Damaged:
		c.reportDamaged(e.key, r.Err)
		return nil, false, true
	}
	return nil, false, false
}

// ---- acquisition ----

type verdict uint8

const (
	verdictTake  verdict = iota + 1 // write generation + 1 (or create)
	verdictRoute                    // another live process holds it
	verdictWait                     // its holder may still act: wait for a fence, or for the view
)

// judge applies the acquire rule to a record read from the bucket.
func (c *Core) judge(rec Record, seenAt time.Time) (verdict, string) {
	if !rec.Held || rec.Node == c.cfg.Node {
		// Free; or this node's: a hold of this instance that ended, parked
		// or pending, or of an earlier instance, which can no longer act (it
		// released, was fenced, was watched dead, or was taken over a TTL ago).
		return verdictTake, ""
	}
	p := c.peers[rec.Node]
	if p == nil && !c.listedAt.Before(seenAt) {
		// A complete listing sent after this version was first seen has no
		// lease for the node. A node writes its lease before any record, so
		// its lease was deleted: it cannot renew, and is past acting a ttl
		// after we first noticed.
		since, ok := c.absent[rec.Node]
		if !ok {
			since = c.now
			c.absent[rec.Node] = since
		}
		if c.now.Sub(since) >= c.cfg.LeaseTTL {
			return verdictTake, ""
		}
		return verdictWait, fmt.Sprintf("node %s has no lease record; waiting a ttl before taking its records", rec.Node)
	}
	if p == nil || !p.known {
		c.listing.nextAt = c.now
		return verdictWait, fmt.Sprintf("node %s not yet in the membership view", rec.Node)
	}
	if p.lease.Instance != rec.Instance {
		// The record's instance is not the one our view shows: it may be an
		// older one (dead, or taken over) or a newer one our view has not seen
		// yet. Only a read of the node's lease sent after this version of the
		// record existed tells: the record's instance wrote its lease before
		// the record, so such a read shows it or a later instance.
		if p.readSentAt.Before(seenAt) {
			c.readPeer(p)
			return verdictWait, fmt.Sprintf("record names instance %s of node %s; re-reading that node's lease", rec.Instance, rec.Node)
		}
		// Older: it cannot act a ttl after we first saw its successor.
		if c.now.Sub(p.instanceSince) >= c.cfg.LeaseTTL {
			return verdictTake, ""
		}
		return verdictWait, fmt.Sprintf("instance %s of node %s was replaced less than a ttl ago", rec.Instance, rec.Node)
	}
	switch p.lease.State {
	case LeaseReleased, LeaseFenced:
		return verdictTake, ""
	}
	if c.now.Sub(p.changedAt) >= c.cfg.deadAfter() {
		if p.busy == 0 {
			c.fence(p)
		}
		return verdictWait, fmt.Sprintf("node %s looks dead; fencing it", rec.Node)
	}
	return verdictRoute, ""
}

func (c *Core) onAcquireRead(e *entry, r Reply) {
	if e.acq == nil {
		return
	}
	rec, ok, damaged := c.readRecord(e, r)
	// In either case below the wake wrote nothing: the parked entry stays.
	switch {
	case damaged:
		c.refuseDamaged(e, e.key)
		return
	case !ok:
		c.refuseWaiters(e, "bucket did not answer the record read", false)
		return
	}
	// A record naming this instance, even one of our unanswered writes that
	// landed, is never adopted as a hold: a release of that version may be on
	// its way (the resolver's, or a retry). The acquisition writes the next
	// generation over it, which also ends any such release. Every hold is a
	// write this core saw land.
	if !c.LeaseValid(c.now) || !c.serving() {
		c.refuseWaiters(e, "node lease not valid", c.mode == modeDraining)
		return
	}
	var gen Generation = 1
	prior := ETag("") // create
	if rec != nil {
		if r.ETag != e.acq.seenETag {
			e.acq.seenETag, e.acq.seenAt = r.ETag, c.now
		}
		v, why := c.judge(*rec, e.acq.seenAt)
		if v != verdictRoute {
			delete(c.routes, e.actor)
		}
		switch v {
		case verdictRoute:
			c.rememberRoute(e.actor, *rec)
			if e.parked != nil {
				// The parked record moved to another holder.
				c.dropParked(e)
			}
			for _, w := range e.acq.waiters {
				c.route(e, w.ref, rec.Node)
			}
			e.acq = nil
			return
		case verdictWait:
			e.acq.retryAt = c.now.Add(c.cfg.LeasePeriod)
			c.waiting[e.actor] = struct{}{}
			c.emit(Report{Level: "info", Key: e.key, Msg: "acquisition waits: " + why})
			return
		}
		gen, prior = rec.Generation+1, r.ETag
	}
	if rec == nil {
		// No record: no hold of this actor ever existed (records are never
		// deleted), so no commit can be in flight to seal against. The
		// first commit creates the state with If-None-Match.
		c.writeRecord(e, gen, prior, false)
		return
	}
	c.takeAt(e, gen, prior)
}

// takeAt seals the actor's state at gen, then writes the record at gen
// over the version prior.
func (c *Core) takeAt(e *entry, gen Generation, prior ETag) {
	c.seal(e, gen, prior, e.parked != nil)
}

const maxAcquireRounds = 6

func errText(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// ---- release ----

func (c *Core) endRelease(e *entry, idx int, how string) {
	p := e.pending[idx]
	e.pending = append(e.pending[:idx], e.pending[idx+1:]...)
	c.count(MetricReleases, p.reason+":"+how)
	if how == "landed" && p.parked {
		c.count(MetricParkedReleases, p.reason)
	}
	if p.move {
		c.moveReleased(e, how == "landed")
	}
}

// onReleaseRead decides a release whose write was refused: if the record
// still names this instance at the hold's generation, the release is tried
// again on the version read; otherwise the record moved on (an acquisition,
// or our own earlier attempt landing late) and the release has nothing left
// to do.
func (c *Core) onReleaseRead(e *entry, f *flight, r Reply) {
	p := f.rel
	idx := slices.Index(e.pending, p)
	if idx < 0 {
		return // ended meanwhile (a lapse, a lost lease)
	}
	rec, ok, _ := c.readRecord(e, r)
	switch {
	case !ok:
		p.attempts++
		p.due = c.now.Add(c.backoff(p.attempts))
	case rec != nil && rec.Names(c.cfg.Node, c.cfg.Instance) && rec.Generation == p.h.gen:
		p.reread = false
		p.h.etag, p.due = r.ETag, c.now
	default:
		c.endRelease(e, idx, "refused")
	}
}

func (c *Core) backoff(attempts int) time.Duration {
	d := c.cfg.ReleaseBackoff << min(max(attempts-1, 0), 16)
	if d > c.cfg.ReleaseBackoffMax || d <= 0 {
		d = c.cfg.ReleaseBackoffMax
	}
	return d
}

func (c *Core) onRelease(e *entry, f *flight, r Reply) {
	p := f.rel
	idx := slices.Index(e.pending, p)
	if idx < 0 {
		return // ended meanwhile (a lapse, a lost lease)
	}
	switch r.Outcome {
	case Landed:
		c.endRelease(e, idx, "landed")
	case Refused, NotFound:
		// Refused does not prove the record moved on: a 409 can refuse a
		// write whose condition still holds, and our own earlier attempt may
		// have landed late. Re-read, then decide.
		p.reread, p.due = true, c.now
	default:
		p.attempts++
		p.due = c.now.Add(c.backoff(p.attempts))
		c.count(MetricPendingRetries, "")
	}
}
