package node

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Classes that only some nodes serve. Each node writes the classes it
// serves at ownership.ClassesKey as it starts, naming its instance; a
// node that gets an event of a class it does not serve reads what its
// peers serve (once per instance of each, so once per start of a peer)
// and sends the event to a live peer that serves it, which acquires the
// actor as for any event. A client therefore reaches every class through
// every node. What it costs: one write per start, and one read per peer
// per start of that peer, made only when an event of a class this node
// does not serve arrives. RATIONALE.md, "Why a node sends an event of a
// class it does not serve to one that does".

// peersFresh is how long the directory trusts its view of the peers
// (who is live, at which instance and address) before asking the keeper
// again: a lease period or so, and a flood of events for classes nobody
// serves asks the keeper once per period, not once per event.
const peersFresh = time.Second

// peersRecheck is how old a view may be when it finds no live node for a
// class before it is asked for again.
const peersRecheck = 100 * time.Millisecond

// classesRetry is how long a read of a peer's classes that failed is
// trusted as "not known" before it is read again.
const classesRetry = 5 * time.Second

// classDirectory is the node's actorhost.ClassDirectory.
type classDirectory struct {
	bucket    ownership.Bucket
	status    func() ownership.Status
	ioTimeout time.Duration
	log       *slog.Logger

	mu      sync.Mutex
	peers   []ownership.PeerStatus
	peersAt time.Time
	of      map[ownership.NodeID]*peerClasses
}

// peerClasses is what the directory knows a peer serves.
type peerClasses struct {
	// instance is the peer's instance these are of.
	instance ownership.InstanceID
	// classes is nil when the peer published none for that instance (a
	// node of an earlier version) or the read failed (readAt says when).
	classes map[string]bool
	failed  bool
	readAt  time.Time
}

func newClassDirectory(b ownership.Bucket, status func() ownership.Status, ioTimeout time.Duration, log *slog.Logger) *classDirectory {
	if ioTimeout <= 0 {
		ioTimeout = 10 * time.Second
	}
	return &classDirectory{bucket: b, status: status, ioTimeout: ioTimeout, log: log, of: map[ownership.NodeID]*peerClasses{}}
}

// publishClasses writes what this instance serves. It is tried a few
// times: the lease was just written, so the bucket answers.
func publishClasses(ctx context.Context, b ownership.Bucket, node ownership.NodeID, inst ownership.InstanceID, classes []string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	body := ownership.EncodeNodeClasses(ownership.NodeClasses{Node: node, Instance: inst, Classes: classes})
	var err error
	for try := range 3 {
		if try > 0 {
			time.Sleep(100 * time.Millisecond << try)
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		_, err = b.Put(cctx, ownership.ClassesKey(node), body, ownership.Always())
		cancel()
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("publish the classes this node serves at %s: %w", ownership.ClassesKey(node), err)
}

// Serving picks the live peer that takes an event of a (see
// actorhost.ClassDirectory).
func (d *classDirectory) Serving(ctx context.Context, a ownership.Actor) (actorhost.Elsewhere, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	live, notLive := d.servers(ctx, a.Class, d.currentPeers())
	if len(live) == 0 && time.Since(d.peersAt) > peersRecheck {
		// Nobody live serves it by a view a moment old: a peer may have
		// just come, so look again (at most so often).
		d.peers = nil
		live, notLive = d.servers(ctx, a.Class, d.currentPeers())
	}
	switch {
	case len(live) > 0:
		// The same actor goes to the same peer while the peers stay the
		// same: its events meet there instead of moving it about.
		h := fnv.New32a()
		h.Write([]byte(a.Class + "/" + a.Name))
		p := live[int(h.Sum32()%uint32(len(live)))]
		return actorhost.Elsewhere{Node: p.Node, Addr: p.Addr, Instance: p.Instance}, nil
	case len(notLive) > 0:
		return actorhost.Elsewhere{}, &actorhost.UnavailableError{Actor: a, NotRun: true, RetryAfter: time.Second,
			Reason: fmt.Sprintf("class %q is served by node %s, which takes no actors now (not live, or draining)", a.Class, strings.Join(notLive, ", "))}
	}
	return actorhost.Elsewhere{}, fmt.Errorf("%w %q: no node of the cluster serves it", actors.ErrUnknownClass, a.Class)
}

// servers are the peers that serve class: live ones, and the names of
// those that are not live now.
func (d *classDirectory) servers(ctx context.Context, class string, peers []ownership.PeerStatus) (live []ownership.PeerStatus, notLive []string) {
	for _, p := range peers {
		if !d.serves(ctx, p, class) {
			continue
		}
		if p.Live && p.Addr != "" {
			live = append(live, p)
		} else {
			notLive = append(notLive, string(p.Node))
		}
	}
	return live, notLive
}

// Serves says whether node serves class, true when it cannot tell (a
// peer of an earlier version publishes nothing).
func (d *classDirectory) Serves(ctx context.Context, node ownership.NodeID, class string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.currentPeers() {
		if p.Node == node {
			pc := d.classesOf(ctx, p)
			return pc.classes == nil || pc.classes[class]
		}
	}
	return true
}

// serves says whether peer p is known to serve class.
func (d *classDirectory) serves(ctx context.Context, p ownership.PeerStatus, class string) bool {
	return d.classesOf(ctx, p).classes[class]
}

// currentPeers is the keeper's view of the peers, at most peersFresh old.
// Called with mu held.
func (d *classDirectory) currentPeers() []ownership.PeerStatus {
	if now := time.Now(); d.peers == nil || now.Sub(d.peersAt) > peersFresh {
		d.peers, d.peersAt = d.status().Peers, now
		if d.peers == nil {
			d.peers = []ownership.PeerStatus{}
		}
	}
	return d.peers
}

// classesOf is what peer p serves, read from the bucket when p's instance
// is not the one last read (or a read failed a while ago). Called with mu
// held: a read is once per start of a peer, and what waits on it would
// read the same.
func (d *classDirectory) classesOf(ctx context.Context, p ownership.PeerStatus) *peerClasses {
	pc := d.of[p.Node]
	if pc != nil && pc.instance == p.Instance && (!pc.failed || time.Since(pc.readAt) < classesRetry) {
		return pc
	}
	pc = &peerClasses{instance: p.Instance, readAt: time.Now()}
	d.of[p.Node] = pc
	cctx, cancel := context.WithTimeout(ctx, d.ioTimeout)
	defer cancel()
	obj, err := d.bucket.Get(cctx, ownership.ClassesKey(p.Node))
	switch {
	case errors.Is(err, ownership.ErrNotFound):
		return pc // publishes nothing: a node of an earlier version
	case err != nil:
		pc.failed = true
		d.log.Warn("cannot read the classes a peer serves", slog.String("peer", string(p.Node)), slog.Any("err", err))
		return pc
	}
	nc, err := ownership.DecodeNodeClasses(obj.Body)
	if err != nil {
		pc.failed = true
		d.log.Warn("cannot read the classes a peer serves", slog.String("peer", string(p.Node)), slog.Any("err", err))
		return pc
	}
	if nc.Instance != p.Instance {
		// Another start's: the peer's current start has not published
		// yet (or this view of it is old). Read again after a while.
		pc.failed = true
		return pc
	}
	pc.classes = make(map[string]bool, len(nc.Classes))
	for _, c := range nc.Classes {
		pc.classes[c] = true
	}
	return pc
}

// peerClassList is what the directory knows each peer serves, for the
// status page: nil for a peer whose classes are not known.
func (d *classDirectory) peerClassList(ctx context.Context) map[ownership.NodeID][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[ownership.NodeID][]string{}
	for _, p := range d.currentPeers() {
		var names []string
		for c := range d.classesOf(ctx, p).classes {
			names = append(names, c)
		}
		slices.Sort(names)
		out[p.Node] = names
	}
	return out
}
