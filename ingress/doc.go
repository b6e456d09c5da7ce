// Package ingress is a node's HTTP entry: /actor/<class>/<name>[/rest],
// routed through the ownership keeper to the resident actor here or
// forwarded to the node that holds it, WebSocket upgrades handed to the
// socket owner (or relayed to the node that holds the room), plus
// /healthz, /readyz and /metrics. It is entry only: the node is assembled
// by package supervisors, which serves a Handler with the server Server
// gives.
//
// Invariants: every name a client sends is validated before it reaches the
// keeper or a bucket key; every body is bounded, in size, in total and in
// time (body.go), and so are connections (conns.go); a request that was
// already forwarded once is never forwarded again (no loops); a panic while
// serving one request answers 500 and is logged, and never ends the node.
//
// Requests between nodes are authenticated with a cluster key, when the
// nodes have one (peer.go): the forwarding node signs every header, the
// body, the node the request is for and a nonce; the receiving node takes
// only what was signed, once.
//
// Handler is safe for concurrent use.
package ingress
