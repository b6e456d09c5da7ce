package ownership

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// sweepState is where the sweep (docs/PROTOCOL.md §5) stands between
// passes. The sweeper, outside the core, owns the pass's timer: each Sweep
// input runs one pass.
type sweepState struct {
	pass int
	// cursor is the key of the first parked record the next re-read reads
	// (the one after the last re-read; "" to start over).
	cursor string
}

// sweepPass runs one pass of the sweep. A pass skips
// parked rooms except on every RereadEvery-th pass, which re-reads up to
// SweepBatch parked records, going on where the last re-read stopped; it
// releases parked records with no open socket left; and it reads the record
// of every room with sockets here and no hold, closing their sockets when
// another live node holds the room.
func (c *Core) sweepPass() {
	if c.phase != phaseRunning || c.mode == modeStopping {
		return
	}
	c.sweep.pass++
	reread := c.sweep.pass%c.cfg.RereadEvery == 0
	var parkedKeys []string
	budget := c.cfg.SweepBatch
	for _, e := range c.sortedEntries() {
		switch {
		case e.parked != nil && e.sockets == 0 && e.live == nil:
			c.releaseParked(e, "last_socket")
		case e.parked != nil:
			if reread {
				parkedKeys = append(parkedKeys, e.key)
			}
		case e.live == nil && e.sockets > 0 && e.look == nil && budget > 0 && e.sweepRead == sweepNone:
			e.sweepRead = sweepOwner
			budget--
		}
		c.advance(e)
	}
	if !reread || len(parkedKeys) == 0 {
		return
	}
	// Resume after the cursor, wrapping around once.
	start := sort.SearchStrings(parkedKeys, c.sweep.cursor)
	order := append(parkedKeys[start:len(parkedKeys):len(parkedKeys)], parkedKeys[:start]...)
	if len(order) > budget {
		order = order[:budget]
	}
	byKey := map[string]*entry{}
	for _, e := range c.entries {
		byKey[e.key] = e
	}
	for i, k := range order {
		e := byKey[k]
		if e.sweepRead == sweepNone {
			e.sweepRead = sweepReread
		}
		if i == len(order)-1 {
			c.sweep.cursor = k + "\x00" // the next re-read starts after it
		}
		c.advance(e)
	}
}

func (c *Core) onSweepRead(e *entry, r Reply) {
	kind := e.sweepRead
	e.sweepRead = sweepNone
	switch r.Outcome {
	case Landed, NotFound:
	case Damaged:
		// Proves nothing, like an unreadable record: reported once, passed
		// over.
		c.reportDamaged(e.key, r.Err)
		return
	default:
		// A bucket that does not answer cuts the pass short; the next re-read
		// starts at the first record this one did not read.
		if kind == sweepReread && (c.sweep.cursor == "" || e.key < c.sweep.cursor) {
			c.sweep.cursor = e.key
		}
		for _, o := range c.entries {
			if o.sweepRead != sweepNone && o.busy == 0 {
				if o.sweepRead == sweepReread && o.key < c.sweep.cursor {
					c.sweep.cursor = o.key
				}
				o.sweepRead = sweepNone
			}
		}
		return
	}
	var rec *Record
	if r.Outcome == Landed {
		got, err := DecodeRecord(r.Body)
		if err != nil {
			// Proves nothing: kept, counted, reported once, passed over.
			c.count(MetricSweepUnreadable, "")
			c.reportUnreadable(e.key, err)
			return
		}
		rec = &got
	}
	if kind == sweepReread && e.parked != nil {
		if rec != nil && rec.Names(c.cfg.Node, c.cfg.Instance) && rec.Generation == e.parked.gen {
			return
		}
		// The parked entry no longer matches the record: forget it; its
		// sockets are treated as those of any room not held here.
		c.emit(Report{Level: "warn", Key: e.key, Msg: "parked entry no longer matches its record; dropped"})
		c.dropParked(e)
	}
	if e.live == nil && e.parked == nil && e.sockets > 0 && rec != nil && c.heldElsewhere(*rec) {
		c.closeRoom(e, "sweep")
	}
}

// heldElsewhere says whether a record is held by another live process.
func (c *Core) heldElsewhere(rec Record) bool {
	if !rec.Held || rec.Node == c.cfg.Node {
		return false
	}
	p := c.peers[rec.Node]
	return p != nil && p.known && p.lease.Instance == rec.Instance &&
		(p.lease.State == LeaseLive || p.lease.State == LeaseDraining)
}

func (c *Core) closeRoom(e *entry, reason string) {
	c.count(MetricOwnerCloses, reason)
	c.emit(CloseSockets{Actor: e.actor, Code: CloseServiceRestart, Reason: reason})
}

// ---- drain ----

func (c *Core) drain(why string) {
	if c.mode != modeServing {
		return
	}
	c.mode = modeDraining
	c.drainClosed, c.drainStuck = false, false
	c.emit(DrainChanged{Draining: true, Why: why})
	if c.phase != phaseRunning {
		// Still taking the lease: it is written draining, and the first pass
		// runs once it is taken.
		c.emit(Report{Level: "info", Msg: "draining (" + why + ") once the lease is taken"})
		return
	}
	c.drainedSet = false
	c.emit(Report{Level: "info", Msg: "draining (" + why + ")"})
	c.lease.nextRenew = c.now // say draining in the lease at once
	c.runDrainPass()
}

// undrain takes a drain back: the node serves again, and says so in its
// lease at once.
func (c *Core) undrain() {
	if c.mode != modeDraining {
		return
	}
	c.mode = modeServing
	c.drainedSet, c.drainClosed, c.drainStuck, c.drainByRequest = false, false, false, false
	c.emit(DrainChanged{Draining: false})
	c.emit(Report{Level: "info", Msg: "drain taken back: serving"})
	if c.phase == phaseRunning {
		c.lease.nextRenew = c.now
	}
}

// livePeer says whether a peer can take this node's actors: its lease is
// live (not draining) and has changed within the time that would make it
// dead.
func (c *Core) livePeer() bool {
	for _, p := range c.peers {
		if c.peerLive(p) {
			return true
		}
	}
	return false
}

// peerLive says whether p can take actors now.
func (c *Core) peerLive(p *peer) bool {
	return p.known && p.lease.State == LeaseLive && c.now.Sub(p.changedAt) < c.cfg.deadAfter()
}

// runDrainPass releases every parked record and live hold, on every pass: a
// park that checked "not draining" just before the drain began may land
// after the first pass. With no live peer to take them the drain is stuck
// (docs/PROTOCOL.md §5): the node keeps serving its actors and their sockets,
// and each pass looks again. The first pass with a peer closes the node's
// sockets (1012): their clients reconnect, through a balancer, to a peer.
func (c *Core) runDrainPass() {
	c.drainPass = c.now.Add(c.cfg.LeasePeriod)
	if !c.livePeer() {
		if !c.drainStuck {
			c.drainStuck = true
			c.emit(Report{Level: "warn", Msg: "drain stuck: no live peer to take the actors; serving them until one is live"})
		}
		return
	}
	if c.drainStuck {
		c.drainStuck = false
		c.emit(Report{Level: "info", Msg: "drain goes on: a live peer takes the actors"})
	}
	if !c.drainClosed {
		c.drainClosed = true
		c.emit(CloseSockets{All: true, Code: CloseServiceRestart, Reason: "drain"})
	}
	for _, e := range c.sortedEntries() {
		c.refuseWaiters(e, "node draining", true)
		c.endLive(e, "drain")
		c.releaseParked(e, "drain")
		c.advance(e)
	}
}

// handsOver says whether the node hands its actors over now: it drains and
// a live peer can take them.
func (c *Core) handsOver() bool { return c.mode == modeDraining && !c.drainStuck }

// serving says whether the node takes actors: it serves, or its drain is
// stuck.
func (c *Core) serving() bool {
	return c.mode == modeServing || c.mode == modeDraining && c.drainStuck
}

// nothingLeft reports no live hold, parked record, pending release,
// unresolved acquisition or request on a record.
func (c *Core) nothingLeft() bool {
	for _, e := range c.entries {
		if e.live != nil || e.parked != nil || len(e.ending) > 0 || len(e.pending) > 0 || len(e.unresolved) > 0 || e.busy != 0 {
			return false
		}
	}
	return true
}

func (c *Core) checkDrained() {
	if c.mode == modeDraining && !c.drainedSet && c.nothingLeft() {
		c.drainedSet = true
		c.emit(Drained{})
		c.emit(Report{Level: "info", Msg: "drained: no hold, parked record or pending release left"})
	}
}

// Draining reports whether the node drains (or drained).
func (c *Core) Draining() bool { return c.mode == modeDraining }

// DrainStuck reports whether the node drains with no live peer to take its
// actors, and so serves them meanwhile.
func (c *Core) DrainStuck() bool { return c.mode == modeDraining && c.drainStuck }

// ---- clean stop ----

func (c *Core) stop() {
	switch {
	case c.phase == phaseStarting && c.lease.busy != 0 && c.flights[c.lease.busy].kind == fLeaseWrite:
		// Our lease write may land: stop once its fate is known.
		c.stopAfterStart = true
		return
	case c.phase == phaseStarting || c.phase == phaseNew:
		c.exit(true, "stopped before the lease was taken")
		return
	case c.phase != phaseRunning || c.mode == modeStopping:
		return
	}
	c.mode = modeStopping
	c.stopUntil = c.now.Add(c.cfg.ResolverWatch + c.cfg.AttemptTimeout)
	c.emit(CloseSockets{All: true, Code: CloseServiceRestart, Reason: "stop"})
	for _, e := range c.sortedEntries() {
		c.refuseWaiters(e, "node stopping", false)
		c.endLive(e, "stop")
		c.releaseParked(e, "stop")
		e.look, e.moving = nil, nil
		c.advance(e)
	}
}

// stopReady: every release landed or ended (or the wait is over), so the
// lease may be written released, which frees anything left.
func (c *Core) stopReady() bool {
	return c.nothingLeft() || !c.now.Before(c.stopUntil)
}

// ---- move ----

// move releases the actor's hold (live or parked) so that the target can
// take it. Events for the actor go to the target from now on. Only a release
// that landed closes the sockets and sends the take call.
func (c *Core) move(in Move) {
	if c.phase != phaseRunning || in.Target == c.cfg.Node {
		return
	}
	if why := MoveRefusal(c.Status(c.now), in.Target); why != "" {
		c.emit(Report{Level: "warn", Key: OwnerKey(in.Actor), Msg: "move refused: " + why})
		return
	}
	e := c.entries[in.Actor]
	if e == nil || (e.live == nil && e.parked == nil) {
		c.emit(Report{Level: "info", Key: OwnerKey(in.Actor), Msg: "move: the actor is neither held nor parked here"})
		return
	}
	e.moving = &moving{target: in.Target, until: c.now.Add(c.cfg.MoveLook)}
	c.refuseWaiters(e, "actor moving", false)
	if e.live != nil {
		c.endLiveFor(e, "move", true)
	} else {
		h := *e.parked
		c.dropParked(e)
		c.queueRelease(e, h, "move", true, true)
	}
	c.advance(e)
}

// moveReleased continues a move once its release has an answer.
func (c *Core) moveReleased(e *entry, landed bool) {
	if e.moving == nil {
		return
	}
	if landed {
		if e.sockets > 0 {
			c.closeRoom(e, "move")
		}
		t := Take{Actor: e.actor, Target: e.moving.target}
		if p := c.peers[t.Target]; p != nil && p.known {
			t.Addr, t.Instance = p.lease.Addr, p.lease.Instance
		}
		c.emit(t)
		return
	}
	// The record moved on: perhaps a wake of ours landed unanswered (the
	// resolver releases it), perhaps another node holds it. Keep the sockets
	// and look at the record until another live node holds the room.
	if e.sockets > 0 {
		e.look = &look{until: c.now.Add(c.cfg.MoveLook), due: c.now}
	}
}

func (c *Core) onLookRead(e *entry, r Reply) {
	if e.look == nil {
		return
	}
	e.look.due = c.now.Add(c.cfg.LeasePeriod)
	if e.sockets == 0 || e.live != nil || e.parked != nil {
		e.look = nil
		return
	}
	rec, ok, _ := c.readRecord(e, r)
	if !ok || rec == nil {
		return // an unread record counts as this node's: keep the sockets
	}
	if c.heldElsewhere(*rec) {
		c.closeRoom(e, "move")
		e.look = nil
	}
}

// MoveRefusal says why a node whose status is st refuses a move to target,
// or "" when it does not: the node must be serving, and the target a live
// peer (not this node, not unknown, draining, released, fenced or taken for
// dead). The mover checks a move with it before handing it to the core,
// and the core checks again as it takes the move.
func MoveRefusal(st Status, target NodeID) string {
	if st.Phase != "running" {
		return "this node is not serving"
	}
	if target == st.Node {
		return string(target) + " is this node"
	}
	i := slices.IndexFunc(st.Peers, func(p PeerStatus) bool { return p.Node == target })
	if i < 0 {
		return string(target) + " is not a node of this cluster"
	}
	switch p := st.Peers[i]; {
	case p.State == LeaseDraining:
		return string(target) + " is draining"
	case p.State != LeaseLive:
		return fmt.Sprintf("%s is not live (its lease is %s)", target, p.State)
	case !p.Live:
		return fmt.Sprintf("%s has not renewed its lease for %s: it is taken for dead", target, p.Unchanged.Truncate(time.Second))
	}
	return ""
}
