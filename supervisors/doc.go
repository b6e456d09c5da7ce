// Package supervisors is a node's supervision tree, its policies and its
// metrics. Package node assembles a node around it.
//
// # The tree
//
// Every long-lived actor of a node is a child of one root actor ("node"),
// which supervises each by its role (Tree, tree.go):
//
//	node
//	├── ownership-<node>   keeper    the ownership actor: runs the Core
//	├── director           director  the resident set; parent of every resident actor
//	│   └── <resident>...  resident  one per resident actor, by class (supervised by the director)
//	├── sweeper            sweeper   sends the keeper a Sweep every sweep period
//	├── drainer            drainer   starts and follows a drain (node.Node.Drain)
//	├── mover              mover     starts a move (node.Node.Move), sends the take call
//	├── rooms              sockets   the room actors' supervisor (package internal/actorhost)
//	│   └── <room actor>...          one per residency that sent socket output (always restarted)
//	└── sockets            sockets   the socket owner (package sockets): not an actor
//
// What a failure (a panic that leaves the actor's Receive) means, by role:
//
//   - keeper: never restarted. The keeper ends itself on a panic of its own
//     (package keeper: the Core's state can no longer be trusted); one that
//     reaches the root is stopped. Either way the node stops acting at once
//     and ends (node.Node.Done and Err name the keeper; `serve` exits non-zero):
//     nothing is released or written after it, so peers fence the node once
//     its lease has stood still for ttl + grace, and the fence frees its
//     records. Every acknowledged write is durable already.
//   - director: restarted after 10 ms (doubling to 1 s), at most 3 times a
//     minute. The restart stops every resident actor first: each finishes
//     the commit it has in flight and answers its waiting events by the
//     output gate's rule (ownership.Gate: what landed is answered, what did
//     not is refused, 503, or its outcome unknown, 504), and the director that failed tells the
//     keeper each hold is idle (parked or released as after a hibernation);
//     the event that failed in the director never reached an actor and is
//     answered 503 not run. The new director starts empty: the next event of
//     each actor wakes it and reloads its state. Past 3 restarts a minute
//     the node fails: its sockets close with 1011, and the keeper stops
//     cleanly (every record released, since nothing is resident) and the node
//     ends.
//   - resident: the class's Policy (below), decided by the director.
//   - sweeper, drainer, mover: restarted after 100 ms (doubling to 10 s), at
//     most 10 times a minute (then the node fails, as for the director).
//     Each resumes from the Core's state and its own counts, which outlive
//     its incarnations: the sweeper arms its timer again (a pass is only
//     late); the drainer asks the keeper's status and follows the drain
//     under way to its end; the mover sends the take call again for every
//     move whose release landed (a take is idempotent: the target takes a
//     free record, or answers that it holds it). A message lost with the
//     failure is never a protocol decision: those are the Core's.
//   - sockets: never restarted, and the node carries on. The socket owner
//     is a value, one locked room per actor, whose sockets run goroutines
//     of their own (a reader, a writer, the pinger), not an actor (see
//     RATIONALE.md), so it contains its failures itself, one actor's room
//     at a time: a panic in an operation for one actor, or on a goroutine
//     of one of its sockets, is recovered there, logged with the actor,
//     the operation and the stack, and closes that actor's sockets with
//     1011. Each socket is gone to the keeper as when its client leaves, so
//     a parked record is released by the last-socket rule, and the actor
//     gets each socket's error event (1011), as for any fault of a socket.
//     The operation returns sockets.ErrInternal. Other actors' sockets are
//     untouched. The rooms' actor, under the same role, contains its own
//     failures too: a panic in its Receive is recovered and logged, and the
//     events of the message it handled are answered without their socket
//     output (they took effect); restarted, it would stop every room actor
//     with the output in its mailbox. A room actor that panics answers the
//     events it holds first, and the rooms' actor restarts it at once, every
//     time: it keeps nothing but its mailbox, which a restart keeps.
//
// The keeper, the director and the drivers never wait in Receive on
// another actor or on the bucket: the keeper runs bucket calls on
// goroutines whose replies come back as messages; the drivers ask the
// keeper with RequestStatus and get a StatusAnswer, and close sockets and
// send take calls on goroutines of their own. A resident actor waits in
// its Receive only for its class's code (with its storage reads and the
// calls it makes), a
// background compile of its wasm class, and a restart's or a supervisor
// stop's commit in flight; its commits, state reads, gates and finish come
// back as messages (package internal/actorhost, "Blocking", says why none
// can deadlock), and its released events' socket output and answers go to
// its room actor as messages. The rooms' actor and the room actors never
// wait: a room actor's sends write to the kernel only what it takes at
// once (package sockets). Callers of HibernateAll and Resident wait too, and are
// not actors.
//
// The tree is visible at /debug/tree (text; JSON with ?format=json): one
// line per actor with its role, state (running, restarting, stopped,
// failed), restarts, mailbox depth and progress, one for the socket owner
// (its sockets and failures), and one per class of resident actors. Its
// metrics, by role: wasmkeep_supervisor_restarts_total,
// wasmkeep_supervisor_failures_total (for sockets, the failures it
// contained), wasmkeep_supervisor_mailbox_depth and
// wasmkeep_supervisor_message_seconds (one message in 8 timed); the
// resident actors' own, by class, are below.
//
// The director of package internal/actorhost is the parent of every resident actor
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
// resident state, so its next event loads the state again from the
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
