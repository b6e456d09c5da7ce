// Package dirstore is the embedded default bucket: an ownership.Bucket kept
// in one directory on local disk, so that a single machine runs wasmkeep
// without an S3 server. Several node processes on that machine may share the
// directory; it plays the part S3 plays for a cluster.
//
// Guarantees:
//   - Conditional writes are atomic across goroutines and across processes:
//     of any number of racing create-only or if-match writes, exactly one
//     lands and the others get ErrPrecondition.
//   - A write that returned nil survives a crash of the process or the
//     machine. A write that returned any other error except
//     ErrUnknownOutcome left the store as it was.
//   - Readers never see a partly written object.
//   - Readers (Get, List) may see an object whose Put has not returned yet,
//     and never will if the machine crashes first (see Visibility below).
//     Writers never act on one: a condition is checked only against
//     objects whose sync has completed, or against earlier writes of the
//     same batch, which are answered together with it.
//   - Every write gets a new ETag (128 random bits), even for identical
//     bytes, so a stale ETag never matches a later version.
//   - Every key ValidateKey accepts maps to its own file inside the
//     directory: no key reaches outside it, no two keys collide (not even
//     on case-insensitive file systems), and no file name exceeds 255 bytes.
//     On Linux every such key can be stored: Open refuses a directory whose
//     path is too long for the longest keys (over 980 bytes). Where PATH_MAX
//     is 1,024 bytes (macOS, the BSDs), keys whose escaped path does not fit
//     are refused by the system (ENAMETOOLONG, a Failed outcome).
//   - List pages are in byte order of keys, as S3's, and hold at most
//     ownership.DefaultListLimit keys.
//
// How a write works: the object (a small header with its ETag and a
// checksum, then the body) is written to a temp file in the Store's own
// session directory under tmp/ and fdatasynced, by the writing goroutine, so
// writers overlap their slowest step. Then it joins a group commit
// (commit.go): a committer goroutine takes every write queued so far and,
// under the store's lock (a one-slot semaphore for goroutines of this Store
// plus flock on dir/lock for other Stores and processes), checks each
// write's condition against the current object and renames its temp file
// over it, in queue order; then fsyncs every directory the batch changed,
// in parallel (a journaling file system commits them together); releases
// the lock; and only then answers every write of the batch. Writes that
// arrive meanwhile form the next batch: nothing waits for a batch to fill,
// so a lone write is a batch of one and costs what it did before group
// commit, while under load one round of syncs serves many writes. If the
// sync fails, every write the batch renamed is answered ErrUnknownOutcome
// (wrapping the error): its object is visible but may not survive a crash.
// Deletes check, unlink, fsync and prune directories left empty, under the
// same lock, one at a time. Reads take no lock: an object file is never
// modified in place, so opening it gives one whole version.
//
// Visibility: a renamed object is visible to readers before the directory
// sync that makes it durable, and before its Put returns. This is
// acceptable, and no reader is kept from it, because:
//   - Only a machine crash (power loss, kernel crash) can undo a rename
//     whose sync had not completed; a process crash cannot, since the
//     rename is done in the kernel. A machine crash also ends every process
//     that could have read the object, as the directory is local.
//   - The lock is held from a batch's renames until its sync completes, and
//     every write (Put or Delete, of any Store or process) commits under
//     the lock. So a write made after reading such an object commits after
//     that object is durable: no write survives a crash that undoes a write
//     it could have seen, and no Put returns (landed or refused) having
//     checked its condition against a version a crash could still undo.
//   - S3 behaves alike: a concurrent GET may return a PUT's object before
//     the PUT's response reaches its client. Only the writer's answer says
//     that a write landed; a reader that acts outside the store (answers a
//     client, say) on what it read must not take it as acknowledged.
//
// The exception is a batch whose sync failed: its writers were told
// ErrUnknownOutcome, and its objects, visible, may or may not survive a
// machine crash; later writes may build on them.
//
// A context that is already done makes a write return ErrUnknownOutcome
// (wrapping the context's error) without touching the store; so does one
// that ends while the write waits in the queue or for the lock. Once the
// committer has taken the write under the lock it runs to completion: it
// is a rename and an fsync.
//
// Temp files of a Store that crashed are removed by the next Open of the
// directory. Each Store locks its session directory for its life; Open
// removes session directories nobody holds a lock on. Temp files never lie
// among objects, so listings never see them.
//
// Layout of the directory:
//
//	format    marker naming the layout version
//	lock      flocked around every write
//	objects/  the objects, one file per key (see keypath.go)
//	tmp/      one session directory per open Store
//
// The directory must be on a local file system: flock over network file
// systems may degrade to locks that do not exclude other Stores of the same
// process. Platforms without flock (Windows, Plan 9, …) cannot open a store.
// The Store trusts its directory: it does not defend against another user
// who can write there (planting symbolic links, say), since such a user
// can rewrite the objects anyway.
//
// Goroutines: a Store is safe for concurrent use by any number of
// goroutines, and several Stores (in one process or several) may use one
// directory at once. Close must not race with other calls on the same
// Store; calls after Close return ErrClosed.
package dirstore
