// Package node assembles a node and runs it.
//
// Start assembles a whole node from its parts: the ownership keeper
// (package ownership/keeper), the way of events to the actors
// (actorhost.Entry), the entry of its sockets' events
// (ingress.SocketEvents), the socket owner (package sockets), the
// resident actors (package internal/actorhost), the drivers of the
// keeper's passes (drivers.go), the peer client (package peer) and the
// HTTP entry (package ingress) with its server, each made after what it
// uses, and none given a part later: the keeper is made first but begins
// (takes the lease, is given its hooks) only once the socket owner, the
// resident actors and the drivers its hooks reach are made, and the hooks
// are made of them, whole. The socket owner delivers to the actors, whose
// events write to its sockets: the loop is cut by the actors' director,
// named (actorhost.NewEntry) before the socket events' entry is made with
// it and spawned (Entry.Start) after the socket owner, which the entry
// needs no more (a message it cannot deliver is refused, and the socket
// owner closes its socket). No event reaches the director before it is
// spawned: no socket exists, and nothing is served, before that.
//
// It gives the node a clean Stop:
// stop accepting and finish in-flight requests, close the sockets with
// 1012, hibernate every resident actor, then stop the keeper (every hold
// released, the lease written released). Node is safe for concurrent use.
//
// Every long-lived actor of the node is a child of one root actor, in the
// supervision tree of package supervisors, which restarts each by its
// role's policy: the keeper, the director of the resident actors, and the
// three drivers this package holds (the sweeper, the drainer and the
// mover, each of which tells the keeper's Core when to act and carries out
// what it decides). The node also serves its own pages: the status page
// (/status, JSON or HTML), the tree (/debug/tree), and, while it waits
// for its lease at start, /healthz and /readyz on its port.
package node
