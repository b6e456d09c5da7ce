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
// session directory under tmp/ and fsynced; then the store's lock is taken
// (a one-slot semaphore for goroutines of this Store plus flock on
// dir/lock for other Stores and processes), the condition is checked
// against the current object, the temp file is renamed over it, the
// directory is fsynced, and the lock released. Deletes check, unlink,
// fsync and prune directories left empty, under the same lock. Reads take
// no lock: an object file is never modified in place, so opening it gives
// one whole version. The lock is held only for check, rename and directory
// fsync; a later group commit can rename many temp files under one lock and
// share one directory fsync among them.
//
// A context that is already done makes a write return ErrUnknownOutcome
// (wrapping the context's error) without touching the store; so does one
// that ends while the write waits for the lock. Once the lock is held the
// write runs to completion: it is a rename and an fsync.
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
