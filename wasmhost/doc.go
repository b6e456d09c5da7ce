// Package wasmhost runs actor classes written in WebAssembly next to the
// Go-native ones: it compiles a class's module once, serves its resident
// actors on guests (one each, or a few shared by the whole class: see
// Isolation), and serves the guest ABI (ABI.md) through which a guest reads
// its request, uses its actor's storage and SQL database, logs, and hands
// out its response; it may also accept a WebSocket upgrade, serve its
// actor's socket events (every Resident is an actors.SocketHandler) and use
// the actor's sockets in any event. The Go SDK for guests is
// wasmhost/guest, the C SDK wasmhost/sdk/c.
//
// # Use
//
//	rt, err := wasmhost.NewRuntime(ctx, wasmhost.Config{CacheDir: dir})
//	mod, err := rt.Compile(ctx, "counter", wasmBytes)
//	err = registry.Register("counter", mod) // mod is an actors.ResidentClass
//
// actorhost.Host then calls mod.NewResident when an actor of the class becomes
// resident, sends that actor's events to the returned Resident, and closes
// it when the actor hibernates, is evicted or stops.
//
// # Isolation
//
// A module declares (its export wasmkeep_isolation; ABI.md, Actors) how
// the resident actors of its class share guests, and Config.Isolation may
// override it per class:
//
//   - actor (the default): each resident actor has a guest of its own (a
//     Guest), started at its first event and closed when it leaves memory.
//     It costs about 1.3 MB of resident memory per actor for a Go guest.
//   - class: the resident actors of the class share a few guests per node
//     (Config.SharedGuests, as many as GOMAXPROCS by default), each serving
//     many of them (shared.go). An actor is placed on one at its first
//     event and stays there while resident; the guest keeps an object per
//     actor, made at its first event and dropped when the host calls
//     wasmkeep_on_leave as the actor leaves memory. A resident actor then
//     costs its object in the guest and a small one in the host.
//
// Every event names its actor, whatever the isolation: the guest learns
// it from the call, and the host functions act for that actor alone.
//
// # Guarantees
//
//   - Isolation: a guest reaches only the storage, the SQL database, the
//     sockets and the calls of the actor whose event it serves, which the
//     host binds to the call (the guest names no actor to a host
//     function), in both isolations. In isolation actor a guest serves one
//     actor, so one actor's guest memory is never seen by another (memory
//     reused from a closed guest is cleared first, and the pages of a
//     module's data image are shared copy-on-write). In isolation class
//     the actors of a shared guest share its memory: keeping each
//     actor's data apart there is the guest's (its SDK keeps an object per
//     actor), as the objects of one class share a heap in other runtimes.
//     Guests get real clocks and a cryptographic random source, and no
//     files, network, arguments or environment.
//   - Order: an actor's events never overlap (its mailbox serialises
//     them); the events of the actors of one shared guest run one at a
//     time, each waiting for the guest's token.
//   - Limits: a guest's linear memory is bounded by
//     Config.MemoryLimit, shared or not; an event's guest time by
//     Config.EventTimeout (unless Config.NoEventTimeout), past which the
//     guest is stopped; in isolation class the time runs from the moment
//     the event holds its shared guest.
//   - Failure: any error of a guest call (a trap, an exit, an unrecovered
//     panic, a limit, an ABI violation) fails the event with an error
//     (actors turns it into a 500, discarding the event's writes) and
//     discards the guest. In isolation actor the actor's next event starts
//     a fresh one. In isolation class the shared guest goes with the
//     in-memory objects of every actor placed on it: they stay resident
//     with their state in storage, and their next events run on a fresh
//     guest, which meets them as new (the guest makes their objects again,
//     from storage). Each failure is counted (Module.Stats;
//     wasmkeep_wasm_guest_failures_total, and
//     wasmkeep_wasm_shared_actors_dropped_total for the objects dropped).
//     A panic that the guest recovers is not an error and keeps the
//     guest.
//   - Rollback: a guest that calls event_rollback ends its event as
//     actors.Rollback does a Go class's: its writes and socket output are
//     discarded, and in a request the client gets the guest's response.
//     It is no failure: the guest is kept and nothing is counted.
//   - A module without the wasmkeep_on_request export is valid if it has
//     wasmkeep_on_socket: its requests are answered 501 Not Implemented;
//     without wasmkeep_on_socket, its socket events are dropped. A module
//     with neither serves nothing and is refused at Compile, naming them.
//   - The host never allocates in guest memory (a pull model), and copies
//     everything it reads out of it.
//
// # Goroutines
//
// Runtime and Module are safe for concurrent use. A Resident (a Guest,
// or a member of the shared guests) is not: it is called from one
// goroutine at a time, the owning actor's. A guest never runs two
// calls at once: a Guest's is its actor's alone, and a shared one is
// used by the goroutine holding its token.
//
// # Costs (2 cores, Go 1.26.8, wazero v1.12.0; see the benchmarks)
//
// Compiling a ~1.9 MB Go guest takes about a second, and under 0.1 s
// when Config.CacheDir holds it already. Starting a Go guest
// (instantiate, _initialize and a first event) takes 1.2 to 1.6 ms of CPU
// when a closed guest's memory is at hand to reuse, and 2.2 to 2.5 ms on
// fresh memory (BenchmarkStart; 3.1 ms in the same runs without populating
// the pages a start touches in one call per run, 5.4 ms without the host's
// own memories and data images, on this virtual machine where a page fault
// costs 10–20 µs and populating a page 0.5 µs). An idle guest holds about
// 1.3 MB of resident memory, 0.4 MB of it its own: the rest is its module's
// data image, shared by all its guests (BenchmarkResident; 3.4 MB before).
// With the default pool of started guests (Config.Prestart), an actor's
// first event after a wake takes about 0.25 ms instead of 1.2 ms
// (BenchmarkWake). How: see memory.go, segments.go and pool.go. A request
// round trip with a storage get and put costs about 10 µs without the time
// limit.
//
// # Memory given back
//
// For fast starts a runtime keeps memory that no actor uses: the
// memories of a few closed guests (up to 8, about 1 MB each for a Go guest)
// and each used class's pool of started guests. What goes unused for
// Config.TrimInterval (3 s by default) is returned to the system: a kept
// memory that no start took, and the pool of a class that started no guest.
// A runtime checks four times per interval, from one goroutine that Close
// stops, so memory goes back between one and 1.25 intervals after its last
// use; on a node whose actors wake more often than that, nothing changes.
// Once all of 100 counter actors have hibernated, a runtime keeps about
// 12 MB, and nothing one interval later (BenchmarkIdle). The price is on
// the first starts after a quiet interval: on fresh memory, and for a class
// whose pool was emptied, on the event's path (as with Prestart < 0), while
// the pool fills again.
//
// # The time limit
//
// wazero stops a running guest only from inside its compiled code. Its
// own way (RuntimeConfig.WithCloseOnContextDone) leaves the guest for Go
// at every loop head to look at a flag, and starts a goroutine per call:
// guest loops ran about 16× slower (BenchmarkSpin: 31 ms against 2.1 ms
// for 10^6 rounds), a socket event cost 10.6 µs against 7.1 µs. Instead,
// Compile instruments the module (internal/meter): a fuel counter in a
// global, taken from at every loop head and tail call, and when it runs
// out, a call of the host's meter_check, which traps if the event's
// context is done. That costs a few instructions per loop head
// (BenchmarkSpin: 1.8 ms with the limit; a socket event 6.0 µs). Being
// back in Go at each check is also where the Go runtime can preempt the
// guest's goroutine, for a garbage collection for example, which it
// cannot do inside compiled code. The deadline itself costs no timer per
// event: one goroutine per runtime (watch.go) cancels the contexts of the
// calls past their deadline, a few times per EventTimeout, so a guest is
// stopped between 1 and 1.1 EventTimeouts after its event began.
// Config.NoEventTimeout turns the deadline off; a guest whose caller's
// context is done is still stopped at its next check. The rewritten
// module has no DWARF sections (their code offsets no longer hold), so a
// guest's stack traces name functions but not source lines.
package wasmhost
