// Package ownership decides which node may act for an actor, and when.
//
// wasmkeep nodes share nothing but a bucket. This package holds the bucket
// interface (Bucket, with typed outcomes: landed, not found, refused,
// unknown), the records kept in it, and Core: one node's ownership protocol
// as a deterministic state machine. Stores live in the sub-packages
// dirstore, sqlitestore, s3store and memstore; the proto.actor shell that runs a Core
// against a real bucket and clock is keeper.
//
// # Glossary
//
// These words mean one thing each, everywhere in wasmkeep:
//
//   - node: one configured member of a cluster (NodeID), stable across
//     restarts.
//   - instance: one start of a node process (InstanceID, random per start).
//   - twin: another live process started with this node's NodeID, under
//     another instance. The core finds it in its own lease record
//     (onLeaseRead, core.go): a starting node watches a lease naming another
//     instance for ttl + grace and refuses to start if it changes twice
//     meanwhile (once may be a dead instance's late write), unless it takes
//     over; a running node whose lease names another instance has lost it,
//     and exits.
//   - lease: the node lease record at nodes/<node>, renewed every period
//     with If-Match. This node counts it valid until the send time of its
//     last acknowledged renewal plus ttl minus safety.
//   - lapse: this node's lease is no longer counted valid (lapse.go). The
//     node stops acting at once: sockets close with 1012, events waiting
//     for an acquisition are refused, live holds stop acting and are
//     released, and parked records are released. An acknowledged renewal makes the
//     lease valid again.
//   - record: the ownership record of an actor at owners/<class>/<name>:
//     node, instance, generation, held or free. Its version is its ETag.
//   - generation: a counter in the record, raised by every acquisition and
//     never by a release.
//   - hold: this instance's ownership of one actor at one generation. A live
//     hold with a valid lease may act.
//   - resident: an actor with its in-memory object on this node (package
//     actors: its proto.actor actor, its working state and, for a
//     ResidentClass, its Resident), serving events under a live hold.
//   - hibernate: a resident actor leaves memory (idle timeout, eviction,
//     StopActing, the node's stop). Its commits are durable already; the
//     keeper is told (Idle) and releases its hold, or parks it while
//     sockets to it are open on this node.
//   - park: keep the record of an actor that hibernated with sockets open
//     on this node, without writing; a parked hold may not act.
//   - wake: the next event for a parked actor: an acquisition at a new
//     generation, never a re-adoption of the parked hold.
//   - release: If-Match on the hold's version, generation kept, record free.
//   - pending release: a release without an answer (or refused without
//     proof that the record moved), retried with capped backoff.
//   - resolver: what decides an acquisition whose write had no answer, by
//     re-reading the record; a record counts as held here only when a live
//     or parked hold here has that exact generation.
//   - fence: a conditional write of a peer's lease as fenced, by a watcher
//     that saw it unchanged for ttl + grace on its own clock; the fenced
//     node's records are then free to acquire.
//   - state object: an actor's storage at actors/<class>/<name>/state, a
//     header line (StateHeader: generation, write count) and a payload the
//     actors layer owns.
//   - seal: an acquisition's conditional rewrite of the state object
//     stamped with the generation it is about to write, before it writes the
//     record; no older hold's write can land after it (seal.go).
//   - drain: a node hands its actors over: it releases every live hold and
//     parked record, on every pass, until nothing is left.
//   - move: one actor is released here so that a named node takes it.
//   - sweep: the once-a-minute pass over the rooms with sockets here; the
//     node's sweeper sends the Core a Sweep input each period, and the Core
//     decides what the pass reads, releases and closes.
//   - damaged: an object the store holds whose bytes fail the store's
//     checksum or cannot be decoded (ErrDamaged). It stays so until a
//     person restores it: the actor it belongs to is refused as damaged
//     (an error naming the key, not a refusal to retry), it is logged once
//     per key, and no write that would need its content (a seal, a
//     restamp) goes over it; a hold granted before the damage may still
//     commit or release over it, with content it knows. The bucket is damaged
//     (ErrBucketDamaged) when the store itself can no longer be trusted:
//     the node then stops acting and exits, as after a lost lease.
//
// # Guarantees
//
// Core reads no clock (every Step carries the node's time), starts no
// goroutine, does no I/O and draws no random number: the same inputs give
// the same effects, which is what lets tests/sim run three real cores over a
// faulty simulated bucket and check, after every event, that no two owners
// act, that no generation serves two holds, that no record leaks, and that
// the broken variants it knows are caught. Every write that protects an
// invariant is conditional, and an unknown outcome is never taken for
// success or failure.
//
// A Core is owned by one goroutine (the ownership actor, or a simulator).
// The package never imports protoactor, the AWS SDK, net/http or os;
// tests/deps enforces it.
package ownership
