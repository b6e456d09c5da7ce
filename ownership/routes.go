package ownership

import "time"

// Routes. An event for an actor that a live peer holds is routed to it
// after a read of the actor's record (the routing read of docs/PROTOCOL.md §3). The core
// keeps what that read found for a lease period, so the events after it
// go to the holder without a read each: a node that forwards a hot actor's
// requests would otherwise read its record from the bucket for every one.
//
// A route decides only where an event goes, never who may act: the node it
// names acquires the actor itself, and serves the event only under a hold
// of its own. A stale route costs a hop: the node named serves the event
// if it can take the actor, and otherwise refuses it before it ran, which
// the shell reports (RouteFailed) before it dispatches the event again,
// so the next acquisition reads the record. A route is also dropped once
// its holder is no longer a live peer, or runs as another instance, in
// this core's view.

// RouteFailed says an event routed to Node for Actor was refused there
// before it ran, or could not be sent: the route is not taken again, and
// the next acquisition of Actor reads its record. An empty Node drops the
// route whatever node it names: a move's take call says the node that sent
// it gave the actor up for this one.
type RouteFailed struct {
	Actor Actor
	Node  NodeID
}

func (RouteFailed) isInput() {}

type cachedRoute struct {
	node     NodeID
	instance InstanceID
	until    time.Time
}

// maxRoutes bounds the routes kept: past it, the expired ones go, and if
// none has expired, every one (they are only a saving).
const maxRoutes = 1 << 16

// rememberRoute keeps the route a record read found.
func (c *Core) rememberRoute(a Actor, rec Record) {
	if len(c.routes) >= maxRoutes {
		for k, r := range c.routes {
			if !c.now.Before(r.until) {
				delete(c.routes, k)
			}
		}
		if len(c.routes) >= maxRoutes {
			clear(c.routes)
		}
	}
	c.routes[a] = cachedRoute{node: rec.Node, instance: rec.Instance, until: c.now.Add(c.cfg.LeasePeriod)}
}

// routeFor returns the node a kept route sends a's events to, if one is
// kept and still good: within its period, its holder a live peer at the
// instance the record named.
func (c *Core) routeFor(a Actor) (NodeID, bool) {
	r, ok := c.routes[a]
	if !ok {
		return "", false
	}
	if p := c.peers[r.node]; !c.now.Before(r.until) || p == nil || !c.peerLive(p) || p.lease.Instance != r.instance {
		delete(c.routes, a)
		return "", false
	}
	return r.node, true
}

func (c *Core) routeFailed(in RouteFailed) {
	if r, ok := c.routes[in.Actor]; ok && (in.Node == "" || r.node == in.Node) {
		delete(c.routes, in.Actor)
	}
}
