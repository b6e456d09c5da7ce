// Package ingress is a node's HTTP entry: /actor/<class>/<name>[/rest],
// routed through the ownership keeper to the resident actor here or
// forwarded to the node that holds it, plus /healthz, /readyz and /metrics.
//
// Invariants: every name a client sends is validated before it reaches the
// keeper or a bucket key; every body is bounded; a request that was already
// forwarded once is never forwarded again (no loops); a panic while serving
// one request answers 500 and is logged, and never ends the node.
//
// Forwarded requests are not yet authenticated (DESIGN.md section 8): the
// forward mark only prevents loops.
//
// StartNode assembles a whole node from its parts (the ownership keeper,
// the resident actors of package actors, this handler and an HTTP server),
// wires the keeper's hooks to the resident actors, and gives it a clean
// Stop: stop accepting and finish in-flight requests, hibernate every
// resident actor, then stop the keeper (every hold released, the lease
// written released).
//
// Handler and Node are safe for concurrent use.
package ingress
