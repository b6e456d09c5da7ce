// Package actors runs resident actors: the Go-native actor API (Class,
// Request, Response, Storage), the registry of classes a node serves, and
// Host, which keeps the actors resident on this node, one proto.actor actor
// each.
//
// # Events and storage
//
// An actor handles one event at a time: its proto.actor mailbox serialises
// them. Its whole durable state is one object in the bucket, at
// actors/<class>/<name>/state (segments escaped with ownership.KeySegment),
// stamped with the generation of the hold that wrote it. The writes of one
// event commit together at its end as one conditional put: If-Match on the
// version this hold last saw, If-None-Match for a state that does not exist
// yet.
//
// Within an event, Storage reads see the event's own writes: Get one key,
// List a window of keys in byte order (a prefix, a start and an end, a
// limit, ascending or descending). Batch applies several puts and deletes
// all or nothing, checking all of them against the storage limits (Put's,
// and MaxBatchOps) before applying any; a refused batch leaves the event's
// earlier writes as they were.
//
// # The owner fence
//
// The first event of a hold (a grant at a generation this instance has not
// served yet) reads the object and rewrites it, stamped with the new
// generation, before the event runs. Invariant: once that rewrite has
// landed, every write of an older hold is conditioned on a version that is
// gone, so it is refused and never becomes visible, even if it lands late
// (DESIGN.md section 6, property 2). A commit that is refused, or whose
// outcome is unknown, discards the resident state and fails the event with
// 503; the next event reloads from the bucket.
//
// # The output gate
//
// A response is released only after its commit landed and Owner.MayAct
// says, at that moment, that the hold is live and the lease valid;
// otherwise the event fails with ErrUnavailable (503 with Retry-After).
//
// # Blocking
//
// In this first version a resident actor does its own event's bucket I/O,
// and asks MayAct, inside its own Receive. Its mailbox would serialise its
// events anyway, so this blocks nothing but that actor; the director that
// routes events and keeps the resident set never blocks.
//
// # Hibernation
//
// An actor without events for Config.IdleTimeout hibernates: its state is
// dropped (every commit is already durable) and Owner.Idle is called so
// that the ownership keeper releases or parks the hold. Past
// Config.MaxResident actors, the least recently used idle one hibernates.
// StopActing drops an actor at once: events still queued in its mailbox
// fail with ErrUnavailable without touching the bucket, and once its
// instance has terminated (its last commit answered) the keeper is told with
// Idle at the stopped generation, which is when it releases the hold.
//
// Host's methods are safe for concurrent use.
package actors
