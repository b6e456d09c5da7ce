package ownership

import (
	"hash/fnv"
	"time"
)

// Read-only views of a core, for its shell, `cluster status` and the
// simulation's checks. Like Step, they are called from the core's goroutine.

// Hold is one hold as seen from outside.
type Hold struct {
	Gen  Generation
	ETag ETag
}

// Live returns the live hold on an actor, if any.
func (c *Core) Live(a Actor) (Hold, bool) {
	if e := c.entries[a]; e != nil && e.live != nil {
		return Hold{Gen: e.live.gen, ETag: e.live.etag}, true
	}
	return Hold{}, false
}

// Parked returns the parked record of an actor, if any.
func (c *Core) Parked(a Actor) (Hold, bool) {
	if e := c.entries[a]; e != nil && e.parked != nil {
		return Hold{Gen: e.parked.gen, ETag: e.parked.etag}, true
	}
	return Hold{}, false
}

// Tracks reports whether the core holds, parks, or has anything pending for
// the actor's record: a release, an unresolved acquisition, a request.
func (c *Core) Tracks(a Actor) bool {
	e := c.entries[a]
	return e != nil && (e.live != nil || e.parked != nil || len(e.ending) > 0 || len(e.pending) > 0 || len(e.unresolved) > 0 || e.busy != 0 || e.acq != nil)
}

// Moving reports whether the actor is being moved away from this node.
func (c *Core) Moving(a Actor) bool {
	e := c.entries[a]
	return e != nil && e.moving != nil
}

// Sockets returns the count of the actor's open sockets the core knows of.
func (c *Core) Sockets(a Actor) int {
	if e := c.entries[a]; e != nil {
		return e.sockets
	}
	return 0
}

// Status summarises a core.
type Status struct {
	Node       NodeID
	Instance   InstanceID
	Phase      string
	LeaseValid bool
	Draining   bool
	// DrainStuck: draining with no live peer to take the actors, so the
	// node serves them meanwhile.
	DrainStuck bool
	// Drained: the drain has nothing left (no hold, parked record or
	// request pending), as Drained reported.
	Drained    bool
	Live       int
	Parked     int
	Pending    int
	Unresolved int
	Peers      []PeerStatus
}

// PeerStatus is one peer as this node's membership view sees it.
type PeerStatus struct {
	Node     NodeID
	Instance InstanceID
	State    LeaseState
	Addr     string
	// Live: its lease is live (not draining) and has changed recently
	// enough that it is not taken for dead: it can take actors.
	Live bool
	// Held and Parked are the counts the peer published at its last
	// lease write (at most a lease period ago while it is live).
	Held, Parked uint64
	// DeadIn is how long until this node takes it for dead (its lease
	// unchanged for ttl + grace) and fences it; 0 once it is, or once its
	// lease was read fenced or released (it may not act).
	DeadIn    time.Duration
	Unchanged time.Duration // how long its record has been unchanged, on this node's clock
}

// Status returns a summary at the given time.
func (c *Core) Status(now time.Time) Status {
	s := Status{Node: c.cfg.Node, Instance: c.cfg.Instance, LeaseValid: c.LeaseValid(now), Draining: c.mode == modeDraining, DrainStuck: c.DrainStuck(),
		Drained: c.mode == modeDraining && c.drainedSet}
	switch c.phase {
	case phaseNew:
		s.Phase = "new"
	case phaseStarting:
		s.Phase = "starting"
	case phaseRunning:
		s.Phase = "running"
		if c.mode == modeStopping {
			s.Phase = "stopping"
		}
	case phaseExited:
		s.Phase = "exited"
	}
	for _, e := range c.entries {
		if e.live != nil {
			s.Live++
		}
		if e.parked != nil {
			s.Parked++
		}
		s.Pending += len(e.pending) + len(e.ending)
		s.Unresolved += len(e.unresolved)
	}
	for _, n := range c.sortedPeers() {
		p := c.peers[n]
		deadIn := max(0, c.cfg.deadAfter()-now.Sub(p.changedAt))
		if p.known && (p.lease.State == LeaseFenced || p.lease.State == LeaseReleased) {
			deadIn = 0
		}
		s.Peers = append(s.Peers, PeerStatus{Node: n, Instance: p.lease.Instance, State: p.lease.State, Addr: p.lease.Addr, Live: c.peerLive(p), DeadIn: deadIn,
			Held: p.lease.Held, Parked: p.lease.Parked, Unchanged: now.Sub(p.changedAt)})
	}
	return s
}

// PeerFor picks, among peers, the one a node that takes no actors (it
// drains, or has stopped) sends a's events to (docs/PROTOCOL.md §5): a live
// peer with an address, the same one for every event of a while the peers
// stay the same, and a's spread over them by a hash of its name. ok is
// false when there is none.
func PeerFor(peers []PeerStatus, a Actor) (p PeerStatus, ok bool) {
	n := 0
	for _, q := range peers {
		if q.Live && q.Addr != "" {
			n++
		}
	}
	if n == 0 {
		return PeerStatus{}, false
	}
	h := fnv.New32a()
	h.Write([]byte(a.Class))
	h.Write([]byte{'/'})
	h.Write([]byte(a.Name))
	pick := int(h.Sum32() % uint32(n))
	for _, q := range peers {
		if q.Live && q.Addr != "" {
			if pick == 0 {
				return q, true
			}
			pick--
		}
	}
	return PeerStatus{}, false
}

// drainPeer is PeerFor over this core's view of its peers.
func (c *Core) drainPeer(a Actor) (NodeID, string, InstanceID) {
	var peers []PeerStatus
	for _, n := range c.sortedPeers() {
		p := c.peers[n]
		peers = append(peers, PeerStatus{Node: n, Instance: p.lease.Instance, Addr: p.lease.Addr, Live: c.peerLive(p)})
	}
	p, _ := PeerFor(peers, a)
	return p.Node, p.Addr, p.Instance
}
