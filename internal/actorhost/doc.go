// Package actorhost is the runtime behind package actors: Host, which
// keeps the actors resident on this node (one proto.actor actor each,
// under a director), delivers their events, and commits their storage,
// their SQL databases and the keys of their events through the storage
// engine of package actorstore. Class authors do not import it; the node builds a Host from a
// Config (package node) and its entries hand events to it (package
// ingress).
//
// # An event's way
//
// The node's entries (package ingress: HTTP requests, calls and socket
// events) hand each event to Dispatch (or DispatchSocket), methods of the
// Entry a Host is made from (NewEntry names the director before the Host
// exists, so that the socket events' entry, which the socket owner needs,
// is made first), which asks the keeper for the hold (Keeper.Acquire),
// delivers the event to the resident actor under the grant, and acquires
// and delivers again while the event was refused before it ran (its grant
// ended first: UnavailableError.NotRun), at most ten times. The entry
// learns only the answer, or that another live node holds the actor
// (Elsewhere: it forwards or relays). A socket's event is also tried again,
// for a while, after a refusal that may pass (the bucket did not answer),
// since its client cannot be told to retry; an HTTP client gets 503 with
// Retry-After. Dispatch waits for the keeper's answer and the actor's: it
// is for goroutines, never for a Receive.
//
// # The seal
//
// Before an acquisition writes the ownership record at generation g, the
// ownership core seals the state object: it rewrites it stamped with g,
// conditioned on the version it read (ownership/seal.go). Invariant: once the
// seal has landed, every write of an older hold is conditioned on a version
// that is gone, so it is refused and never becomes visible, even if it lands
// late (docs/PROTOCOL.md §6, property 2). The first event of a hold reads the
// object: stamped with the hold's generation, it is used as is; stamped
// later, the hold was superseded and ends (Keeper.HoldEnded); stamped earlier
// (a hold granted without the core, as in tests), it is sealed here first.
// Runs need nothing more (package actorstore, "Storage").
//
// # Group commit and the output gate
//
// Events run one at a time on the working state: the durable state plus the
// writes of events whose commit has not landed yet. At most one commit per
// actor is in flight; the writes of every event that ran meanwhile go out
// together in the next one. A response is released only once every write
// its event could have seen is durable, by the rule of ownership.Gate: an
// event that took effect (its writes landed, or it sent a call) is
// answered whatever became of the hold since, since its commit landing
// proves no later hold had sealed the state first; an event that only read
// is answered if Keeper.MayAct says, at that moment, that the hold is live
// and the lease valid, and refused otherwise (ErrUnavailable, NotRun). A
// commit that is refused fails every event that ran since the last durable
// version with ErrUnavailable (503: they took no effect). One without an
// answer is read back (residentActor.resolve): found landed, it is; found
// not, the state is sealed again by this hold so that it never can, and
// refused; otherwise the events
// whose writes it carried are answered ErrOutcomeUnknown (504). Either way
// the working state is discarded; the next event reloads from the bucket.
//
// The events at the front of the gate that a commit's landing alone
// releases (they took effect, and carry no socket output and no WebSocket
// to accept), in a residency that has sent no socket output yet (see
// Socket output), are answered by the commit's goroutine as soon as it lands,
// before it sends the landing to the actor's mailbox: a write's answer
// does not wait for the actor to take the landing (commitJob.early). The
// actor answers them itself only if the commit does not land; every answer
// of an event goes through one claim, so the first is the one kept
// (answerEvent, eventMsg.tryAnswer).
//
// # Socket output
//
// An event's sends, broadcasts and closes wait with its answer at the gate.
// Once a residency releases an event with socket output, that event and
// every one it releases after are carried (claimed, so that no one else
// answers them) to the residency's room actor (rooms.go), which sends each
// event's output to the sockets and then answers it, in release order,
// while the resident actor goes on. So an event's output goes out before
// its answer, and before the answer of any event released after it: a
// WebSocket an event accepts (after its answer) never gets that event's
// broadcast or an earlier one. The room actors are children of the rooms'
// actor, which spawns one when a residency first asks and ends it once
// its resident actor has terminated, by a message that comes after
// everything the resident actor carried; the director leaves a carried
// event to the room actor even when its resident actor stopped, and
// HibernateAll returns once every room actor has ended.
//
// # Event keys
//
// An event may carry a key (WithEventKey: a client's Idempotency-Key, or
// a node's for what it forwards and for calls): the actor keeps it, with
// the event's answer, in its storage under the node's prefix, in the same
// commit as the event's writes, and answers a later event with the key
// from it, on whatever node holds the actor by then (keys.go; the ledger
// that keeps them is package actorstore's).
//
// # Damage
//
// A state object or run that fails the store's checksum or its own, whose
// bytes do not decode, or a run the head lists that is gone, fails the
// event with a *DamagedError naming the state object's key (it matches
// ownership.ErrDamaged; the ingress answers 500): no retry serves the
// actor until a person restores the object, so it is not an
// UnavailableError. The keeper is told (Keeper.DamageFound) and logs it once
// per key; nothing that needs its content is written over the object
// (a hold already live may still commit over it), the hold stays, and every
// later event reads it again. Other actors are served as before.
//
// A run or manifest found gone or failing its checksum by a hold that has
// ended (Keeper.MayAct asked after the read) is not damage: a later
// holder's merge deletes what its own head no longer lists, and a node
// that lost the actor without knowing it yet (stopped, then fenced) may
// still read by the head it loaded. The event is refused as unavailable,
// and the holder after it, reading the current head, finds real damage.
//
// # Calls
//
// During an event an actor may call another with Call (call.go), wherever
// it lives: the node's Caller delivers the call here or forwards it to the
// holder. The call is a commit point for the caller: the working state,
// with the event's writes so far, is committed (and the hold must be
// allowed to act) before the request leaves, so a callee never acts on a
// write that could be lost. The caller waits for the call on its own
// goroutine; a call to an actor of the same chain is refused
// (ErrCallCycle), and every call is bounded by Config.CallTimeout.
//
// # Blocking
//
// A resident actor waits for nothing inside its Receive but its own class's
// code. What it waits for comes back through its mailbox, and the actor goes
// on meanwhile:
//
//   - its commit: one at a time on a goroutine of its own (group commit);
//     an answer lost on the way is resolved there too (resolve);
//   - the read of its state at the first event of a hold, and its seal when
//     it must write one (startLoad): the events that come meanwhile wait in
//     order, and a stop cuts the read short;
//   - the input gate of a hold (advanceSwitch): an event of a later grant
//     waits, with those behind it, until the earlier hold's events are
//     committed and released, then until the keeper says the new hold may
//     act;
//   - the output gate (release): answers whose writes are durable go out;
//     a read's, and socket output, once the keeper says the hold is live
//     under a valid lease. The keeper's table of live holds answers at once
//     when the hold is in it; otherwise the question goes by message
//     (Keeper.RequestMayAct) and its answer releases them;
//   - its end (advanceFinish): the director lets it go with a finishMsg; it
//     commits and releases what ran, each step by message, and stops
//     itself, so a drain, an idle stop or a lost hold finishes its events;
//   - its socket output: sent, and its events answered, by its room actor
//     (see Socket output); the resident actor only hands it over.
//
// Four waits stay inside Receive, each holding back that one actor alone:
//
//   - the class's code itself, which is synchronous (a Go Handle, a wasm
//     guest up to --wasm-event-timeout), with what it asks of the node: its
//     storage reads of runs not in the block cache (ranged reads of the
//     bucket, each within the I/O timeout; when one finds damage,
//     Keeper.MayAct is asked whether the hold still lives, see Damage),
//     and the calls it makes: the working state is committed and
//     Keeper.MayAct asked before the request leaves, and the event waits
//     for the callee's answer, as an awaited call does (up to
//     --call-timeout). The actor's next events
//     could not run meanwhile anyway (one event at a time); running the
//     class on a goroutine of its own, measured, made a warm event 1.3
//     times as long and a busy actor's events up to twice (RATIONALE.md),
//     to free the actor only for messages that must wait for the event
//     all the same;
//   - the first events of a wasm class that this node compiles in the
//     background (a module known from an earlier start): once per class
//     per start, bounded by one compile;
//   - a restart after a panic (settleEnding): the commit in flight is
//     waited for, so that the next load cannot race it;
//   - a stop the director did not ask for (a supervisor that gave up on
//     the actor): proto.actor delivers nothing after Stopped, so what is in
//     flight is waited for there.
//
// None can deadlock: MayAct answers from the keeper's table of live holds
// without its mailbox, and from the mailbox otherwise; the keeper's
// Receive never waits on a resident actor, nor on the bucket (its calls run
// on goroutines of their own), and a call cycle is refused. The director
// that routes events and keeps the resident set never waits.
//
// # Storage and SQL
//
// An actor handles one event at a time: its proto.actor mailbox serialises
// them. Its storage, the event's write set (actors.Storage) and its SQL
// database are package actorstore's: a resident actor holds its State,
// runs each event on a Txn over it, commits the head the State encodes
// (one conditional put, after the runs it lists), and merges its runs in
// the background (compacting.go), one merge at a time, through its
// mailbox. Its SQL connection (actorstore.SQL) is opened at its first SQL
// call and closed as it leaves memory.
//
// # Hibernation
//
// An actor without events for Config.IdleTimeout hibernates: its state is
// dropped (every commit is already durable) and Keeper.Idle is called so
// that the ownership keeper releases or parks the hold. Past
// Config.MaxResident actors, the least recently used idle one hibernates.
// StopActing drops an actor at once: events still queued in its mailbox
// fail with ErrUnavailable without touching the bucket, and once its
// proto.actor actor has terminated (its last commit answered) the keeper is
// told with Idle at the stopped generation, which is when it releases the
// hold.
//
// Host's methods are safe for concurrent use.
package actorhost
