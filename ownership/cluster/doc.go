// Package cluster reads and changes a cluster's state in its bucket on an
// operator's behalf: ReadStatus lists the nodes and counts the ownership
// records, Fence marks a node's lease fenced, ListActors lists the actors
// of a class and ReadHolder says who holds one. `wasmkeep cluster ...` and
// `wasmkeep actors ...` are thin shells over it.
//
// It works on the ownership.Bucket interface alone and takes the time and
// the nonce it needs as arguments, so it reads no clock, draws no random
// number and starts no goroutine beyond the bounded readers of ReadStatus
// and ListActors.
//
// # What it guarantees
//
//   - ReadStatus, ListActors and ReadHolder only read. A record they
//     cannot read (undecodable, or its read failed) is counted and named,
//     never fatal; only a listing that fails ends them, since then nothing
//     complete can be said. Their output does not depend on map order or
//     on the order reads complete.
//   - Fence writes one lease record, with If-Match on the version it read:
//     it never overwrites a renewal it has not seen. It refuses an unknown
//     node, an unreadable lease, and a lease already fenced or released.
//     Like the fence a node's watcher writes, it keeps node, instance and
//     the informational fields, and changes only state, sequence and nonce.
//
// A status is a picture taken over many reads, not one instant: records may
// change while they are read. Lease ages compare the reader's clock with
// the writer's clock at its last write (Lease.WrittenAt), which may
// disagree; nodes themselves never compare clocks across machines.
//
// Functions are safe to call from any goroutine; they share nothing.
package cluster
