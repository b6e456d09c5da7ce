// Package actors is what a Go class is written against: Class (or a
// ResidentClass, with an object per resident actor), Request and Response,
// the actor's Storage and SQL database, its WebSockets, calls to other
// actors, Rollback, and the Registry of the classes a node serves. A
// program registers its classes and runs the node (package node;
// examples/custom-node); the runtime behind this package is
// internal/actorhost, and the storage engine internal/actorstore, which
// class authors never see.
//
// # Events and storage
//
// An actor handles one event at a time, wherever in the cluster it is
// held. Handle (or HandleSocket) gets the event and the actor's Storage;
// its writes commit together when it returns without error, and are
// durable before its response leaves the node, or the event fails and
// none of them is kept. The event's context names its actor (ActorOf).
//
// Within an event, Storage reads see the event's own writes: Get one key,
// GetMany several, List a window of keys in byte order (a prefix, a start
// and an end, a limit, ascending or descending). Batch applies several
// puts and deletes all or nothing, checking all of them against the
// storage limits (Put's, and MaxBatchOps) before applying any; a refused
// batch leaves the event's earlier writes as they were. DeleteAll removes
// every key, the event's own writes so far included. GetMany and DeleteAll
// are functions over Storage, built on its methods, so that the interface
// stays what a test's fake implements. The event's context names its actor
// (ActorOf).
//
// # Failed and rolled-back events
//
// An event is all or nothing. One whose handler returns an error or panics
// has its writes discarded and its socket output (sends, broadcasts,
// closes) dropped; it answers 500 and is logged, or 413 when the error
// wraps ErrLimit. One whose handler returns Rollback(resp), perhaps
// wrapped, is a failure the class chose: the same, except that it answers
// resp and is not logged (from HandleSocket there is nothing to answer).
// The socket output goes too because it could tell of the discarded
// writes: a class that must answer a socket still writes nothing before it
// knows it will keep its writes. (Durable Objects sends what an event sent
// before it threw, and keeps its writes; here the event is the unit of
// both.) What was already out stays: writes committed before a Call the
// event made, and attachments and auto-responses, which are set at once. A
// rolled-back response still waits at the output gate, like any other, for
// the earlier writes it could have read.
//
// # SQL
//
// SQL(ctx) is the actor's SQL database (sql.go): SQLite, kept in the
// actor's storage, so SQL writes are the event's writes, committed or
// discarded with its others and counted in its bound.
//
// # WebSockets
//
// A class takes WebSockets by answering a request for which
// Request.IsUpgrade is true with AcceptSocket(tags...): the node opens the
// socket and owns it, across the actor's hibernation. What arrives on it
// (a message, a close, an error) is a SocketEvent for the class's
// HandleSocket (SocketHandler). During any event SocketsOf(ctx) sends,
// broadcasts by tag, closes and lists the actor's sockets; List gives a
// SocketInfo for each: its ID, its tags and its attachment (up to
// 16 KiB, kept while the actor sleeps). examples/chat is a whole room.
//
// # Calls
//
// During an event an actor may call another with Call (call.go), wherever
// it lives. The call is a commit point for the caller: its writes so far
// are durable before the request leaves, so a callee never acts on a write
// that could be lost. A call to an actor of the same chain is refused
// (ErrCallCycle), and every call is bounded by the node's call timeout
// (--call-timeout).
//
// # Errors
//
// An event or a call refused before it ran matches ErrUnavailable (it took
// no effect: retrying is safe); one whose outcome is unknown matches
// ErrOutcomeUnknown (retry it only with the same Idempotency-Key). A write
// past a storage limit wraps ErrLimit.
package actors
