// Package keeper is the ownership actor: the shell that runs one node's
// ownership.Core inside a proto.actor actor and carries out its effects.
//
// The Core decides everything (when to renew the lease, what to read and
// write, who owns an actor); the keeper only executes: it runs the bucket
// calls the Core asks for and feeds their replies back, keeps the one timer
// the Core wants, turns answers to acquisitions into Decisions for whoever
// asked, exports the Core's counters and gauges to Prometheus, logs its
// reports, and hands the effects meant for the rest of the node to Hooks.
// No protocol decision lives here.
//
// # What it guarantees
//
//   - The Core is touched by one goroutine at a time: only the actor's
//     Receive steps or queries it.
//   - Receive never waits for I/O. Every bucket call runs in its own
//     goroutine under a context bounded by the Core's AttemptTimeout, and
//     its reply comes back to the actor as a message. Calls on different
//     keys therefore run concurrently; the Core never has two requests in
//     flight for one key, and the keeper answers a request only once its
//     bucket call has returned, so none overlap at the bucket either.
//   - Every request gets exactly one reply. A call that ends with its
//     context done and an error the store did not classify is an unknown
//     outcome, never a failure (it may have landed).
//   - Every Acquire gets exactly one Decision, even when the keeper stops
//     or breaks while it waits.
//   - Time never goes backwards for the Core: the keeper steps it with the
//     latest of the injected clock's readings.
//   - One timer delivers the Ticks the Core asks for (SetTimer replaces the
//     last request); a timer that fires early on the injected clock is
//     re-armed, and a Core that asked for nothing is ticked every half lease
//     period anyway (see RATIONALE.md, "Why the keeper re-arms its timer").
//   - A panic while handling a message (in the Core, a hook, or the keeper)
//     ends the keeper: the Core's state can no longer be trusted, and a
//     restarted actor would have lost the message that panicked. Nothing is
//     released or written after it; the lease stops being renewed, so peers
//     fence the node once its lease record has stood still for ttl + grace,
//     which frees every record it held. Err reports the panic with its stack.
//
// # Stopping
//
// Stop asks for a clean stop: the Core releases every hold and parked
// record, then writes the lease released, and the keeper ends with a nil
// Err. A second Stop, or the end of Stop's context, sends StopNow: the lease
// is written released without waiting further for releases (which frees
// what did not land). A lost lease, a twin, a bucket the store reports
// damaged as a whole (ownership.ErrBucketDamaged), or a panic ends the
// keeper with an *ExitError. Either way Done is closed once the actor has stopped and
// every bucket call it started has returned.
//
// After the end the keeper still answers: Acquire is refused, MayAct is
// false, Status is the last status the Core gave. Inputs are dropped.
//
// # Goroutines
//
// Every method of Keeper is safe to call from any goroutine. Acquire, MayAct
// and Status wait for the actor's answer; they take microseconds, but code
// running inside another actor's Receive must not wait at all, and uses
// RequestAcquire and RequestMayAct, whose answers arrive as messages.
//
// Hooks are called on the keeper actor's goroutine, one at a time, in the
// order the Core emitted the effects. They must not block: hand the work to
// another actor or goroutine.
//
// # proto.actor
//
// Only the actor package is used, and only here: spawning, sending,
// poisoning. The keeper does not use SetReceiveTimeout (racy), futures
// (a timed-out future does not cancel its work), stash or the library's
// metrics (OpenTelemetry, ten times the cost per message). NewSystem makes
// an actor system that logs through the node's slog logger.
package keeper
