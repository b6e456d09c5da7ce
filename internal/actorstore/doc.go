// Package actorstore is the storage engine of one actor: its state in
// the bucket (a head over immutable runs, internal/kvrun) and the merges
// of its runs, the write set of an event (Txn, which implements
// actors.Storage), its SQL database (SQLite over its node keys), the
// ledger of its event keys, and its snapshots, export and import. It does
// no actor-system work: it does its I/O through the ownership.Bucket it
// is given, on the caller's goroutine, and keeps no goroutine of its own.
// Package actorhost, the runtime of resident actors, drives it: when an
// actor loads, commits, merges and leaves memory.
//
// # Storage
//
// An actor's durable state is a head in the bucket, at
// actors/<class>/<name>/state (segments escaped with ownership.KeySegment),
// stamped with the generation of the hold that wrote it, over immutable
// runs under actors/<class>/<name>/runs/ (layout.go; a merge of runs in
// the background, compact.go). The writes of one event commit together:
// the run that the commit flushes, if any, then one conditional put of
// the head (If-Match on the version this hold last saw). A read that a
// run cannot answer (the bucket did not) fails the event with
// an error (ReadFault, Txn.Fault; the runtime answers ErrUnavailable),
// never as a missing key. Runs need
// nothing more from the seal than the head's: a run is read only when a
// head lists it, so one that a superseded hold wrote, landing late, is
// never read; the sweep before a merge deletes it (ownership.RunGarbage).
//
// # SQL
//
// SQL(ctx) is the actor's SQL database (sql.go): SQLite, whose pages are
// node keys of the event's storage (sqlvfs.go), so SQL writes are the
// event's writes, committed or discarded with its others and counted in
// its bound. An actor has one connection while it is resident, opened at
// its first SQL call and closed as it leaves memory; a stamp in the
// storage tells the connection, before each call, whether the pages are
// still those it last left, and it is opened again when they are not
// (SQL). SQL calls run on the event's goroutine.
//
// # Event keys
//
// The keys of an actor's events (package actorhost, keys.go) are kept,
// with their answers, in the actor's own storage under the node's prefix,
// in the same commit as the event's writes: the ledger (ledger.go,
// Txn.LedgerLookup and Txn.LedgerRecord).
//
// # Damage
//
// A state object or run that fails the store's checksum or its own, whose
// bytes do not decode, or a run the head lists that is gone, is a
// *DamagedError naming the state object's key (it matches
// ownership.ErrDamaged).
//
// # Reading and replacing an actor's storage without a hold
//
// ReadActor (inspect.go) reads an actor's storage from the bucket as a
// Snapshot, through the same layout code a resident actor uses, for an
// operator's tools: its keys and values, its SQL database opened
// read-only, and its export (export.go), a file of its whole storage with
// a checksum. ImportActor writes an export back as a commit would, runs
// first and then the state object conditioned on the version it read,
// and only after its caller has found that no node holds the actor; the
// seal of any acquisition meanwhile makes it fail rather than be lost
// (see ImportActor).
package actorstore
