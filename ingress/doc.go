// Package ingress is a node's entries: HTTP requests and socket events.
//
// The HTTP entry (Handler) serves /actor/<class>/<name>[/rest],
// handed to the actors side (Host.Dispatch: it acquires the hold, delivers
// the event and retries behind it) and answered, or forwarded to the node
// that holds the actor when Dispatch says where it is held; WebSocket
// upgrades handed to the socket owner (or relayed to the node that holds
// the room); a move's take call (take.go); plus /healthz, /readyz, /metrics
// and /debug/ (the node's tree). The entry of socket events
// (SocketEvents, the socket owner's Sink) hands each message, close and
// error of a socket to its actor (Host.DispatchSocket), waking it where
// it hibernated. The package is entry only: the node is assembled by
// package node, which serves a Handler with the server Server gives. An
// event's way is one direction: the ingress never asks the keeper for a
// hold itself.
//
// Invariants: every name a client sends is validated before it reaches the
// keeper or a bucket key; every body is bounded, in size, in total and in
// time (body.go), and so are connections (conns.go); a request that was
// already forwarded once is never forwarded again (no loops); a panic while
// serving one request answers 500 and is logged, and never ends the node.
//
// Every answer means one thing: a success ran once and is durable; 503
// with Retry-After took no effect anywhere; 504 with Wasmkeep-Outcome:
// unknown may have. A request and an actor's call take one way to their
// actor (way.go): run here, or sent by the peer client (package peer) to
// the node that holds it, with an event key (actorhost.EventKey), and sent
// again within the failover wait while its holder does not answer, so that
// it runs at most once. A WebSocket for an actor held elsewhere is relayed
// frame by frame, and the node's stop closes it with 1012.
//
// Requests between nodes are authenticated with a cluster key, when the
// nodes have one: the ingress takes a peer's headers only from a request
// whose signature checks (peer.Verifier), for this node and this start,
// once.
//
// Handler is safe for concurrent use.
package ingress
