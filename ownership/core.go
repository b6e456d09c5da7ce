package ownership

import (
	"container/heap"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Core is one node's ownership protocol as a deterministic state machine:
// inputs in through Step, effects out as data. It reads no clock (every step
// carries the node's current time), starts no goroutine, does no I/O and
// draws no random number. A Core is not safe for concurrent use: one
// goroutine (the ownership actor, or a simulator) owns it.
//
// Invariant: for every bucket key, at most one Request the core emitted is
// without its Reply at any time.
type Core struct {
	cfg Config
	now time.Time
	out []Effect

	nextID   RequestID
	nonceSeq uint64
	flights  map[RequestID]*flight

	phase phase
	mode  mode
	lease leaseState
	twin  *twinWatch

	peers   map[NodeID]*peer
	listing listing

	entries map[Actor]*entry
	routes  map[Actor]cachedRoute // see routes.go
	timers  timerHeap
	parked  int

	sweep      sweepState
	drainPass  time.Time
	drainedSet bool
	// drainStuck: the last drain pass found no live peer, so the node
	// serves; drainClosed: a pass with a peer closed the node's sockets;
	// drainByRequest: the drain is the operator's request in the bucket,
	// taken back when the request is deleted.
	drainStuck, drainClosed, drainByRequest bool
	drainKey                                string
	// movePrefix begins this node's move requests; movesSeen are those the
	// last full listing saw (reported once each).
	movePrefix string
	movesSeen  map[string]bool
	stopUntil  time.Time

	damaged map[string]bool // keys reported damaged, each reported once
	// stopAfterStart: a stop came while our lease write was in flight; it
	// runs once the write's fate is known, so no live lease is left behind.
	stopAfterStart bool
	// absent: nodes that records name but that a complete listing of nodes/
	// did not show, since when (a node writes its lease before any record).
	absent map[NodeID]time.Time
	// waiting: actors whose acquisition waits on the membership view (a
	// fence, a peer's lease read); wakeWaiting re-reads just those.
	waiting map[Actor]struct{}
	// listedAt is the send time of the last complete listing of nodes/.
	listedAt   time.Time
	listStart  time.Time
	timerAt    time.Time // the last SetTimer emitted
	exitReason string
}

type phase uint8

const (
	phaseNew      phase = iota
	phaseStarting       // reading or writing our own lease record
	phaseRunning        // lease taken; serving (lapsed or not)
	phaseExited         // Exit emitted; every input is refused
)

type mode uint8

const (
	modeServing mode = iota
	modeDraining
	modeStopping
)

func (m mode) leaseState() LeaseState {
	if m == modeDraining {
		return LeaseDraining
	}
	return LeaseLive
}

type leaseState struct {
	etag       ETag
	seq        uint64
	validUntil time.Time // send time of the last acknowledged write + ttl - safety
	actFrom    time.Time // after a take-over: no acting before this
	lapsed     bool      // reported not valid (LeaseChanged{Valid:false})
	busy       RequestID
	nextRenew  time.Time
	retryRead  time.Time // a re-read of our own record is due (zero: none)
	releasing  bool      // the clean stop's final write is under way or done
}

type twinWatch struct {
	etag     ETag
	instance InstanceID
	since    time.Time
	changes  int
}

type peer struct {
	node          NodeID
	etag          ETag      // the version last seen (listing or read)
	changedAt     time.Time // when this node first saw that version
	lease         Lease
	known         bool // lease decoded at least once
	readETag      ETag // the version lease was decoded from
	instanceSince time.Time
	readSentAt    time.Time // send time of the latest answered read
	busy          RequestID
	// suspect: the version last seen replaced one that had stood
	// unchanged for a ttl or more: a watcher may have fenced the peer
	// (or it came back). Read at once rather than at the usual pace, so
	// that what waits on the peer learns that it is fenced within a
	// listing of the fence, not ttl + grace later.
	suspect bool
}

type listing struct {
	busy   RequestID
	nextAt time.Time
	// drainAsked: the listing under way saw this node's drain request;
	// moves, the move requests for it it saw.
	drainAsked bool
	moves      []string
}

type flightKind uint8

const (
	fLeaseRead flightKind = iota + 1
	fLeaseWrite
	fList
	fPeerRead
	fFence
	fAcqRead
	fSealRead
	fSealWrite
	fAcqWrite
	fRelease
	fReleaseRead
	fResolveRead
	fSweepRead
	fLookRead
)

type flight struct {
	kind     flightKind
	key      string
	actor    Actor
	node     NodeID
	sentAt   time.Time
	gen      Generation
	nonce    string
	prior    ETag   // the version an acquire's write was conditioned on ("" for a create)
	body     []byte // a seal's write: what it wrote
	seq      uint64
	rel      *pendingRelease
	wake     bool
	state    LeaseState
	takeover bool
}

// NewCore makes a core for a validated configuration.
func NewCore(cfg Config) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ownership config: %w", err)
	}
	return &Core{
		cfg:        cfg,
		flights:    map[RequestID]*flight{},
		peers:      map[NodeID]*peer{},
		entries:    map[Actor]*entry{},
		routes:     map[Actor]cachedRoute{},
		damaged:    map[string]bool{},
		absent:     map[NodeID]time.Time{},
		waiting:    map[Actor]struct{}{},
		drainKey:   DrainRequestKey(cfg.Node),
		movePrefix: MoveRequestPrefix(cfg.Node),
		movesSeen:  map[string]bool{},
	}, nil
}

// Config returns the core's configuration.
func (c *Core) Config() Config { return c.cfg }

// Step feeds one input at the node's current time and returns the effects to
// carry out, in order. Time must not go backwards between steps.
func (c *Core) Step(now time.Time, in Input) []Effect {
	if now.Before(c.now) {
		panic(fmt.Sprintf("ownership: time went backwards: %v after %v", now, c.now))
	}
	c.now = now
	c.out = nil
	if c.phase == phaseExited {
		c.refuseAfterExit(in)
		return c.flush()
	}
	c.checkLapse()
	switch in := in.(type) {
	case Start:
		c.start()
	case Tick:
	case Reply:
		c.reply(in)
	case Acquire:
		c.acquire(in)
	case Idle:
		c.idle(in)
	case HoldEnded:
		c.holdEnded(in)
	case SocketOpened:
		c.socketOpened(in.Actor)
	case SocketGone:
		c.socketGone(in.Actor)
	case Drain:
		c.drain("drain")
	case Undrain:
		c.undrain()
	case SecretsLost:
		c.drain("secrets")
	case Stop:
		c.stop()
	case StopNow:
		if c.mode == modeStopping {
			c.stopUntil = c.now
		}
	case Move:
		c.move(in)
	case RouteFailed:
		c.routeFailed(in)
	case PeerUnreachable:
		if p := c.peers[in.Node]; p != nil && c.phase == phaseRunning && c.now.Sub(p.readSentAt) >= c.cfg.LeasePeriod/4 {
			c.readPeer(p)
		}
	case Moved:
		if e := c.entries[in.Actor]; e != nil && e.moving != nil {
			e.moving = nil
			c.advance(e)
		}
	case Sweep:
		c.sweepPass()
	case DamageFound:
		c.reportDamaged(in.Key, in.Err)
	default:
		panic(fmt.Sprintf("ownership: unknown input %T", in))
	}
	if c.phase != phaseExited {
		c.checkLapse()
		c.runDue()
	}
	return c.flush()
}

// refuseAfterExit answers an acquisition after the exit: this node takes
// no actor any more, so the refusal says draining (a peer should be
// asked), as the keeper's own refusals after its end do.
func (c *Core) refuseAfterExit(in Input) {
	if a, ok := in.(Acquire); ok {
		peer, addr, inst := c.drainPeer(a.Actor)
		c.emit(Refuse{Actor: a.Actor, Ref: a.Ref, Reason: "node stopped: " + c.exitReason, RetryAfter: c.cfg.LeasePeriod, Draining: true,
			Peer: peer, PeerAddr: addr, PeerInstance: inst})
	}
}

func (c *Core) flush() []Effect {
	if c.phase != phaseExited {
		if at := c.nextDeadline(); !at.IsZero() && !at.Equal(c.timerAt) {
			c.timerAt = at
			c.emit(SetTimer{At: at})
		}
	}
	out := c.out
	c.out = nil
	return out
}

func (c *Core) emit(e Effect) { c.out = append(c.out, e) }

func (c *Core) count(name, label string) { c.emit(Count{Name: name, Label: label, Add: 1}) }

func (c *Core) send(kind flightKind, op Op, key string, body []byte, cond Condition, f *flight) RequestID {
	c.nextID++
	id := c.nextID
	if f == nil {
		f = &flight{}
	}
	f.kind, f.key, f.sentAt = kind, key, c.now
	c.flights[id] = f
	req := Request{ID: id, Op: op, Key: key, Body: body, Cond: cond}
	if op == OpList {
		req.StartAfter = string(body)
		req.Body = nil
		req.Limit = DefaultListLimit
	}
	c.emit(req)
	return id
}

func (c *Core) nonce() string {
	c.nonceSeq++
	return string(c.cfg.Instance) + "-" + strconv.FormatUint(c.nonceSeq, 36)
}

// LeaseValid says whether this node may act as owner now: its lease is
// valid (and, after a take-over, old enough).
func (c *Core) LeaseValid(now time.Time) bool {
	return !c.lease.lapsed && c.leaseInTime(now)
}

// leaseInTime: an acknowledged renewal covers now, and a take-over's wait
// is over. A lapse is reported (and everything ended) before the lease may
// count again, so LeaseValid also needs the lapse to have been lifted.
func (c *Core) leaseInTime(now time.Time) bool {
	return c.phase == phaseRunning && now.Before(c.lease.validUntil) && !now.Before(c.lease.actFrom)
}

// checkValidAgain lifts a lapse (or the take-over wait) once a renewal
// covers the present again.
func (c *Core) checkValidAgain() {
	if c.lease.lapsed && c.leaseInTime(c.now) {
		c.lease.lapsed = false
		c.emit(LeaseChanged{Valid: true, State: string(c.mode.leaseState())})
		c.emit(Report{Level: "info", Msg: "node lease valid"})
	}
}

// MayAct says whether the event granted at gen may release its output now:
// the hold is live and the lease is valid. Shells check it when a response
// or a storage commit is about to be released, not only when work starts.
//
// A hold a drain or a move ends may still act until its instance confirms
// it ended (or EndWait runs out): the events it runs already finish and
// answer, as a hand-over should, and nothing else may act meanwhile, since
// its record is released only after.
func (c *Core) MayAct(a Actor, gen Generation, now time.Time) bool {
	e := c.entries[a]
	if e == nil || !c.LeaseValid(now) || c.mode == modeStopping {
		return false
	}
	if e.live != nil && e.live.gen == gen {
		return true
	}
	for _, x := range e.ending {
		if x.h.gen == gen && (x.reason == "drain" || x.move) && now.Before(x.due) {
			return true
		}
	}
	return false
}

// Serving says whether an Acquire of a, at now, would be granted at once
// at the live hold's generation gen with nothing else to do (the node
// serves, its lease is valid, the actor is not moving), and until when
// that stays so if no input comes: the lease's end or the Core's next
// deadline, whichever is first. Only an input can change the answer
// before until. The keeper uses it to grant events of live holds without a
// step (keeper/fast.go).
func (c *Core) Serving(a Actor, now time.Time) (gen Generation, until time.Time, ok bool) {
	e := c.entries[a]
	if e == nil || e.live == nil || e.moving != nil || !c.serving() || !c.LeaseValid(now) {
		return 0, time.Time{}, false
	}
	until = c.lease.validUntil
	if at := c.nextDeadline(); !at.IsZero() && at.Before(until) {
		until = at
	}
	if !now.Before(until) {
		return 0, time.Time{}, false
	}
	return e.live.gen, until, true
}

// ---- the node lease ----

func (c *Core) start() {
	if c.phase != phaseNew {
		return
	}
	c.phase = phaseStarting
	c.readOwnLease()
}

func (c *Core) leaseRecord(state LeaseState, seq uint64) []byte {
	return EncodeLease(Lease{
		Node: c.cfg.Node, Instance: c.cfg.Instance, Addr: c.cfg.Addr,
		TTLMilli: c.cfg.LeaseTTL.Milliseconds(), State: state, Seq: seq, Nonce: c.nonce(),
		WrittenAt: c.now.UnixMilli(), Held: uint64(c.countGauges()), Parked: uint64(c.parked),
	})
}

func (c *Core) readOwnLease() {
	c.lease.retryRead = time.Time{}
	c.lease.busy = c.send(fLeaseRead, OpGet, NodeKey(c.cfg.Node), nil, Always(), nil)
}

func (c *Core) writeOwnLease(state LeaseState, cond Condition) {
	seq := c.lease.seq + 1
	c.lease.busy = c.send(fLeaseWrite, OpPut, NodeKey(c.cfg.Node), c.leaseRecord(state, seq), cond, &flight{seq: seq, state: state})
}

func (c *Core) onLeaseRead(f *flight, r Reply) {
	c.lease.busy = 0
	switch r.Outcome {
	case NotFound:
		if c.phase == phaseStarting {
			c.writeOwnLease(c.mode.leaseState(), IfAbsent())
			return
		}
		c.loseLease("the node lease record is gone")
		return
	case Landed:
	case Damaged:
		c.reportDamaged(f.key, r.Err)
		if c.phase == phaseStarting {
			c.exit(false, fmt.Sprintf("the lease record of node %s is damaged in the bucket (%s); restore it, or delete it to start afresh", c.cfg.Node, errText(r.Err)))
			return
		}
		c.loseLease("the node lease record is damaged")
		return
	default:
		c.lease.retryRead = c.now.Add(c.cfg.LeasePeriod / 5)
		return
	}
	l, err := DecodeLease(r.Body)
	if err != nil {
		c.reportUnreadable(f.key, err)
		if c.phase == phaseStarting && !c.cfg.TakeOver {
			c.exit(false, fmt.Sprintf("the lease record of node %s cannot be read (%v); start with take-over to replace it", c.cfg.Node, err))
			return
		}
		if c.phase == phaseStarting {
			c.writeOwnLease(LeaseLive, IfMatch(r.ETag))
			return
		}
		c.loseLease("the node lease record is unreadable")
		return
	}
	if l.Instance == c.cfg.Instance {
		switch {
		case l.State == LeaseFenced:
			c.loseLease("this node was fenced")
			return
		case l.State == LeaseReleased && c.mode == modeStopping:
			// The clean stop's final write landed unanswered.
			c.exit(true, "stopped")
			return
		case l.State == LeaseReleased:
			c.loseLease("the lease record says this instance released it")
			return
		}
		// Our own write landed unanswered: adopt its version and renew now.
		// (A stop asked for while starting runs once the lease is ours.)
		// Validity still counts only from an acknowledged write's send time.
		c.lease.etag, c.lease.seq = r.ETag, l.Seq
		c.lease.releasing = false // a stop's final write did not land: write it again
		if c.phase == phaseStarting {
			c.becomeRunning()
			if c.stopAfterStart {
				c.stopAfterStart = false
				c.stop()
				return
			}
		}
		c.lease.nextRenew = c.now
		return
	}
	if c.phase != phaseStarting {
		c.loseLease(fmt.Sprintf("node %s's lease now names instance %s (a twin, or a take-over)", c.cfg.Node, l.Instance))
		return
	}
	switch l.State {
	case LeaseReleased, LeaseFenced:
		c.writeOwnLease(c.mode.leaseState(), IfMatch(r.ETag))
		return
	}
	if c.cfg.PredecessorGone {
		c.emit(Report{Level: "info", Key: f.key, Msg: fmt.Sprintf(
			"node %s's lease names instance %s, which has ended (its claim on the node is free): taking the lease at once", c.cfg.Node, l.Instance)})
		c.twin = nil
		c.writeOwnLease(c.mode.leaseState(), IfMatch(r.ETag))
		return
	}
	if c.cfg.TakeOver {
		// The other instance may act until its own lease runs out: wait a
		// full TTL after our write before acting.
		c.twin = nil
		c.writeOwnLease(c.mode.leaseState(), IfMatch(r.ETag))
		c.flights[c.lease.busy].takeover = true
		return
	}
	switch {
	case c.twin == nil || c.twin.instance != l.Instance:
		c.twin = &twinWatch{etag: r.ETag, instance: l.Instance, since: c.now}
		c.emit(Report{Level: "warn", Key: f.key, Msg: fmt.Sprintf(
			"node %s's lease is held by instance %s; watching it for %v before taking over (a live instance would renew it)",
			c.cfg.Node, l.Instance, c.cfg.deadAfter())})
	case c.twin.etag != r.ETag && c.twin.changes == 0:
		// One change may be the last renewal of a dead instance landing late
		// (its lease writes are one at a time, so it has at most one such
		// write). Watch again from here; a second change proves it renews.
		c.twin.etag, c.twin.since, c.twin.changes = r.ETag, c.now, 1
	case c.twin.etag != r.ETag:
		c.exit(false, fmt.Sprintf("node %s is live under instance %s (its lease was renewed while this process watched); stop it, or start with take-over",
			c.cfg.Node, l.Instance))
		return
	case c.now.Sub(c.twin.since) >= c.cfg.deadAfter():
		// Unchanged for ttl + grace on our clock: that instance cannot act.
		c.twin = nil
		c.writeOwnLease(c.mode.leaseState(), IfMatch(r.ETag))
		return
	}
	c.lease.retryRead = c.now.Add(c.cfg.LeasePeriod)
}

func (c *Core) onLeaseWrite(f *flight, r Reply) {
	c.lease.busy = 0
	switch r.Outcome {
	case Landed:
		c.lease.etag, c.lease.seq = r.ETag, f.seq
		if until := f.sentAt.Add(c.cfg.validFor()); until.After(c.lease.validUntil) {
			c.lease.validUntil = until
		}
		c.emit(Observe{Name: MetricLeaseRenewSeconds, Value: c.now.Sub(f.sentAt).Seconds()})
		if f.state == LeaseReleased {
			c.exit(true, "stopped")
			return
		}
		if f.takeover {
			// The instance we replaced may act until its own lease runs out,
			// at most ttl - safety after its last renewal, which landed before
			// ours: a full ttl after our acknowledgement is past it.
			c.lease.actFrom = c.now.Add(c.cfg.LeaseTTL)
		}
		if c.phase == phaseStarting {
			c.becomeRunning()
		}
		c.lease.nextRenew = f.sentAt.Add(c.cfg.LeasePeriod)
		c.checkValidAgain()
		if c.stopAfterStart {
			c.stopAfterStart = false
			c.stop()
		}
	case Refused, NotFound:
		// Maybe our own earlier write landed late; maybe a fence or a twin.
		// Only a fresh read tells.
		c.readOwnLease()
	default:
		if f.state == LeaseReleased {
			c.lease.releasing = false // try the final write again
		}
		if c.phase == phaseStarting {
			c.readOwnLease()
			return
		}
		// Unknown: keep the version we know. If the write landed, the next
		// renewal is refused and the re-read adopts it.
		c.lease.nextRenew = f.sentAt.Add(c.cfg.LeasePeriod)
	}
}

func (c *Core) becomeRunning() {
	c.phase = phaseRunning
	c.lease.nextRenew = c.now
	c.listing.nextAt = c.now
	c.lease.lapsed = !c.leaseInTime(c.now)
	c.emit(LeaseChanged{Valid: c.LeaseValid(c.now), State: string(c.mode.leaseState())})
	if c.mode == modeDraining {
		c.drainPass = c.now
	}
	c.emit(Report{Level: "info", Msg: fmt.Sprintf("node %s instance %s took its lease", c.cfg.Node, c.cfg.Instance)})
}

func (c *Core) renewDue() {
	if c.phase != phaseRunning || c.lease.busy != 0 {
		return
	}
	if !c.lease.retryRead.IsZero() && !c.now.Before(c.lease.retryRead) {
		// Before anything else, even a stop's final write: that write's fate
		// is what the read tells.
		c.readOwnLease()
		return
	}
	if c.lease.releasing {
		return
	}
	if c.mode == modeStopping && c.stopReady() {
		c.lease.releasing = true
		c.writeOwnLease(LeaseReleased, IfMatch(c.lease.etag))
		return
	}
	if !c.now.Before(c.lease.nextRenew) {
		c.writeOwnLease(c.mode.leaseState(), IfMatch(c.lease.etag))
	}
}

func (c *Core) exit(clean bool, reason string) {
	c.phase = phaseExited
	c.exitReason = reason
	c.emit(Exit{Clean: clean, Reason: reason})
}

// ---- membership ----

// reportMoves reports the move requests the listing found that the one
// before did not, and forgets those it no longer lists.
func (c *Core) reportMoves() {
	seen := make(map[string]bool, len(c.listing.moves))
	var fresh []string
	for _, k := range c.listing.moves {
		seen[k] = true
		if !c.movesSeen[k] {
			fresh = append(fresh, k)
		}
	}
	c.movesSeen = seen
	if len(fresh) > 0 {
		c.emit(MoveRequests{Keys: fresh})
	}
}

func (c *Core) listDue() {
	if c.phase != phaseRunning || c.listing.busy != 0 || c.now.Before(c.listing.nextAt) {
		return
	}
	c.listStart = c.now
	c.listing.drainAsked, c.listing.moves = false, nil
	c.listing.busy = c.send(fList, OpList, NodesPrefix, nil, Always(), nil)
}

func (c *Core) onList(f *flight, r Reply) {
	c.listing.busy = 0
	if r.Outcome != Landed {
		c.listing.nextAt = c.now.Add(c.cfg.LeasePeriod)
		return
	}
	for _, en := range r.Page.Entries {
		if en.Key == c.drainKey {
			c.listing.drainAsked = true
			continue
		}
		if strings.HasPrefix(en.Key, c.movePrefix) {
			c.listing.moves = append(c.listing.moves, en.Key)
			continue
		}
		seg, err := UnescapeSegment(en.Key[len(NodesPrefix):])
		if err != nil {
			continue
		}
		n := NodeID(seg)
		delete(c.absent, n)
		if n == c.cfg.Node {
			continue
		}
		p := c.peers[n]
		if p == nil {
			p = &peer{node: n, etag: en.ETag, changedAt: c.now}
			c.peers[n] = p
		} else if p.etag != en.ETag {
			p.suspect = c.now.Sub(p.changedAt) >= c.cfg.LeaseTTL
			p.etag, p.changedAt = en.ETag, c.now
		}
	}
	if r.Page.Truncated && len(r.Page.Entries) > 0 {
		last := r.Page.Entries[len(r.Page.Entries)-1].Key
		c.listing.busy = c.send(fList, OpList, NodesPrefix, []byte(last), Always(), nil)
		return
	}
	c.listing.nextAt = c.now.Add(c.cfg.LeasePeriod)
	c.listedAt = c.listStart
	// An operator's drain request (DrainRequestKey), seen or gone.
	switch asked := c.listing.drainAsked; {
	case asked && !c.drainByRequest && c.mode == modeServing:
		c.drainByRequest = true
		c.drain("requested in the bucket")
	case !asked && c.drainByRequest:
		c.drainByRequest = false
		c.undrain()
	}
	c.reportMoves()
	for _, n := range c.sortedPeers() {
		p := c.peers[n]
		if p.busy != 0 {
			continue
		}
		dead := p.known && (p.lease.State == LeaseLive || p.lease.State == LeaseDraining) && c.now.Sub(p.changedAt) >= c.cfg.deadAfter()
		switch {
		case !p.known:
			c.readPeer(p)
		case dead && p.readETag != p.etag:
			c.readPeer(p) // fence what is there, not what was
		case dead:
			c.fence(p)
		case p.suspect && p.readETag != p.etag:
			c.readPeer(p)
		case p.readETag != p.etag && c.now.Sub(p.readSentAt) >= c.cfg.LeaseTTL/2:
			// Renewals change the version every period; the contents (instance,
			// state) rarely. Reading them at most every ttl/2 keeps the view
			// fresh enough for routing; questions of safety force a read.
			c.readPeer(p)
		}
	}
}

func (c *Core) readPeer(p *peer) {
	if p.busy == 0 {
		p.busy = c.send(fPeerRead, OpGet, NodeKey(p.node), nil, Always(), &flight{node: p.node})
	}
}

func (c *Core) fence(p *peer) {
	l := p.lease
	l.State, l.Seq, l.Nonce = LeaseFenced, l.Seq+1, c.nonce()
	c.emit(Report{Level: "warn", Key: NodeKey(p.node), Msg: fmt.Sprintf(
		"fencing node %s instance %s: its lease has not changed for %v", p.node, p.lease.Instance, c.now.Sub(p.changedAt))})
	p.busy = c.send(fFence, OpPut, NodeKey(p.node), EncodeLease(l), IfMatch(p.etag), &flight{node: p.node})
}

func (c *Core) onPeerRead(f *flight, r Reply) {
	p := c.peers[f.node]
	if p == nil {
		return
	}
	p.busy = 0
	if r.Outcome == Damaged {
		c.reportDamaged(f.key, r.Err)
	}
	if r.Outcome != Landed {
		return
	}
	l, err := DecodeLease(r.Body)
	if err != nil {
		c.reportUnreadable(f.key, err)
		return
	}
	if r.ETag != p.etag {
		p.etag, p.changedAt = r.ETag, c.now
	}
	if !p.known || p.lease.Instance != l.Instance {
		p.instanceSince = c.now
	}
	p.lease, p.known, p.readETag = l, true, r.ETag
	if r.ETag == p.etag {
		p.suspect = false
	}
	if f.sentAt.After(p.readSentAt) {
		p.readSentAt = f.sentAt
	}
	c.wakeWaiting()
}

func (c *Core) onFence(f *flight, r Reply) {
	p := c.peers[f.node]
	if p == nil {
		return
	}
	p.busy = 0
	switch r.Outcome {
	case Landed:
		p.lease.State = LeaseFenced
		p.etag, p.readETag, p.changedAt = r.ETag, r.ETag, c.now
		c.count(MetricFences, "landed")
		c.wakeWaiting()
	case Refused, NotFound:
		// It changed: alive after all, or fenced by another watcher. Re-read.
		c.count(MetricFences, "refused")
		p.readETag = ""
		c.listing.nextAt = c.now
	default:
		c.count(MetricFences, "unknown")
		p.readETag = ""
	}
}

// ---- replies and timers ----

func (c *Core) reply(r Reply) {
	f, ok := c.flights[r.ID]
	if !ok {
		return // a reply for a request of an earlier life, or a duplicate
	}
	delete(c.flights, r.ID)
	if r.Outcome == BucketDamaged {
		c.bucketDamaged(f.key, r.Err)
		return
	}
	switch f.kind {
	case fLeaseRead:
		c.onLeaseRead(f, r)
	case fLeaseWrite:
		c.onLeaseWrite(f, r)
	case fList:
		c.onList(f, r)
	case fPeerRead:
		c.onPeerRead(f, r)
	case fFence:
		c.onFence(f, r)
	default:
		c.onEntryReply(f, r)
	}
}

func (c *Core) runDue() {
	if c.phase == phaseStarting && c.lease.busy == 0 && !c.lease.retryRead.IsZero() && !c.now.Before(c.lease.retryRead) {
		c.readOwnLease()
	}
	c.renewDue()
	if c.phase != phaseRunning {
		return
	}
	c.checkValidAgain()
	c.listDue()
	if c.mode == modeDraining && !c.now.Before(c.drainPass) {
		c.runDrainPass()
	}
	for c.timers.Len() > 0 && !c.timers[0].at.After(c.now) {
		t := heap.Pop(&c.timers).(timerItem)
		if e := c.entries[t.actor]; e != nil {
			e.scheduled = time.Time{}
			c.advance(e)
		}
	}
	c.checkDrained()
	c.renewDue() // a stop may have become ready
}

func (c *Core) nextDeadline() time.Time {
	var at time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	switch c.phase {
	case phaseStarting:
		consider(c.lease.retryRead)
	case phaseRunning:
		if c.lease.busy == 0 {
			if !c.lease.releasing {
				consider(c.lease.nextRenew)
			}
			consider(c.lease.retryRead)
		}
		if !c.lease.lapsed {
			consider(c.lease.validUntil)
		}
		if c.lease.lapsed && c.now.Before(c.lease.actFrom) {
			consider(c.lease.actFrom)
		}
		if c.listing.busy == 0 {
			consider(c.listing.nextAt)
		}
		if c.mode == modeDraining {
			consider(c.drainPass)
		}
		if c.mode == modeStopping && c.now.Before(c.stopUntil) {
			consider(c.stopUntil)
		}
		if c.timers.Len() > 0 {
			consider(c.timers[0].at)
		}
	}
	if !at.IsZero() && at.Before(c.now) {
		// Everything due was done by this step, or waits for a reply.
		panic(fmt.Sprintf("ownership: next deadline %v is before now %v", at, c.now))
	}
	return at
}

type timerItem struct {
	at    time.Time
	seq   uint64
	actor Actor
}

type timerHeap []timerItem

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timerItem)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (c *Core) schedule(e *entry, at time.Time) {
	if !e.scheduled.IsZero() && !at.Before(e.scheduled) {
		return
	}
	e.scheduled = at
	c.nonceSeq++ // doubles as a tie-breaker sequence
	heap.Push(&c.timers, timerItem{at: at, seq: c.nonceSeq, actor: e.actor})
}

func (c *Core) sortedEntries() []*entry {
	keys := make([]string, 0, len(c.entries))
	byKey := make(map[string]*entry, len(c.entries))
	for _, e := range c.entries {
		keys = append(keys, e.key)
		byKey[e.key] = e
	}
	sort.Strings(keys)
	out := make([]*entry, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

func (c *Core) sortedPeers() []NodeID {
	out := make([]NodeID, 0, len(c.peers))
	for n := range c.peers {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// reportUnreadable counts an object this core read but could not decode,
// and reports it as damaged.
func (c *Core) reportUnreadable(key string, err error) {
	c.count(MetricUnreadable, "")
	c.reportDamaged(key, err)
}

// reportDamaged counts a damaged object met at key (a Damaged reply, an
// object that cannot be decoded, or a reader's DamageFound), and reports
// it once per key: every read of it counts, but a request that meets it
// again does not log again.
func (c *Core) reportDamaged(key string, err error) {
	c.count(MetricDamaged, damageWhat(key))
	if c.damaged[key] {
		return
	}
	c.damaged[key] = true
	c.emit(Report{Level: "error", Key: key, Msg: "damaged " + describeObject(key) + " in the bucket: it fails its checksum or cannot be decoded; " +
		"it stays so until restored", Err: err})
}

// damageWhat is the label under which MetricDamaged counts the object at
// key: what it is, by its prefix.
func damageWhat(key string) string {
	switch {
	case strings.HasPrefix(key, NodesPrefix):
		return "lease"
	case strings.HasPrefix(key, OwnersPrefix):
		return "record"
	case strings.HasPrefix(key, MovesPrefix):
		return "move"
	case strings.HasPrefix(key, ActorsPrefix):
		return "state"
	}
	return "other"
}

// describeObject names the object at key for people.
func describeObject(key string) string {
	switch damageWhat(key) {
	case "lease":
		return "node lease"
	case "record":
		return "ownership record"
	case "move":
		return "move request"
	case "state":
		return "actor state"
	}
	return "object"
}

// bucketDamaged ends the node on a store that cannot be trusted any more
// (a BucketDamaged reply): no answer it gives can be acted on, and writes
// to it cannot be trusted either, so as after a lost lease every hold and
// parked record is dropped without writing, sockets close, and the core
// exits. Peers fence the node once its lease stands still, which frees
// its records.
func (c *Core) bucketDamaged(key string, err error) {
	c.count(MetricDamaged, "bucket")
	c.emit(Report{Level: "error", Key: key, Msg: "the bucket is damaged: this node stops acting and exits", Err: err})
	c.dropAll("bucket damaged", "bucket damaged")
	c.exit(false, "the bucket is damaged: "+errText(err))
}
