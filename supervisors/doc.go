// Package supervisors assembles a node (StartNode) and supervises it: the
// supervision tree of resident actors and its metrics.
//
// # The node
//
// StartNode assembles a whole node from its parts: the ownership keeper
// (package ownership/keeper), the socket owner (package sockets) and the
// sink that turns its sockets' events into actor events (sockets.go), the
// resident actors (package actors), and the HTTP entry (package ingress)
// with its server. It wires the keeper's hooks to the resident actors and
// the sockets, and gives the node a clean Stop: stop accepting and finish
// in-flight requests, close the sockets with 1012, hibernate every resident
// actor, then stop the keeper (every hold released, the lease written
// released). Node is safe for concurrent use.
//
// The director of package actors is the parent of every resident actor
// and so their supervisor: when a panic escapes a resident actor's Receive
// (it recovers a class's own panics per event and answers 500; what
// reaches the supervisor is a panic of the host code around it), proto.actor
// hands the failure to the director, which asks the class's Strategy what
// to do. A Supervisor gives, per class, that strategy and the proto.actor
// options resident actors of the class are spawned with (Props): a receive
// middleware timing each message and counting panics, and a mailbox whose
// statistics keep the class's queued-message gauge.
//
// # Restart policy
//
// The strategy restarts the failed resident actor, one for one, at most
// Policy.MaxRestarts times within Policy.Within; one more failure inside the
// window stops it. A restart rebuilds the actor empty: it keeps no
// resident state, so its next event fences and reloads the state from the
// bucket. The event that panicked is lost to the actor (proto.actor does
// not redeliver it); the director answers its caller with ErrUnavailable. A
// stop terminates the resident actor and the director drops it from its
// resident set, as if it had hibernated; its next event spawns it anew.
//
// # Metrics
//
// One Metrics per prometheus.Registerer, labelled by class:
// wasmkeep_actor_restarts_total, wasmkeep_actor_failures_total,
// wasmkeep_actor_mailbox_depth (messages queued in the class's mailboxes,
// system messages included) and wasmkeep_actor_event_seconds (time in
// Receive per user message). They are plain client_golang collectors:
// proto.actor's own OpenTelemetry metrics are not used.
//
// Supervisor and Metrics are safe for concurrent use: the middleware and
// the mailbox statistics run on the resident actors' goroutines, the
// strategy on the director's.
package supervisors
