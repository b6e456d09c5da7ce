// Package dirstore is the embedded default bucket: an ownership.Bucket kept
// in one directory on local disk, so that a single machine runs wasmkeep
// without an S3 server. Several node processes on that machine may share
// the directory; it plays the part S3 plays for a cluster.
//
// It is laid out as a log: the writes of every key are appended to one
// segment file, and a batch of writes costs one pwrite and one fdatasync,
// where a file per object costs a file created, synced and renamed per
// write and a directory sync (on this project's test machines, creating a
// file alone costs ~250 µs of CPU; the benchmarks compare the two).
//
// Guarantees:
//   - Conditional writes are atomic across goroutines and across processes:
//     of any number of racing create-only or if-match writes, exactly one
//     lands and the others get ErrPrecondition.
//   - A write that returned nil survives a crash of the process or the
//     machine. A write that returned any other error except
//     ErrUnknownOutcome left the store as it was.
//   - Readers never see a partly written object.
//   - A read (Get, List) sees every write that returned before it started,
//     whichever Store or process made it. It may also see a write whose
//     call has not returned yet, and never will if the machine crashes
//     first (see Visibility below). Writers never act on such a write: a
//     condition is checked only against writes that are durable, or that
//     will be before the checked write is answered.
//   - Every write gets a new ETag (128 random bits), even for identical
//     bytes, so a stale ETag never matches a later version.
//   - Every key ValidateKey accepts can be stored, beside any other.
//   - List pages are in byte order of keys, as S3's, and hold at most
//     ownership.DefaultListLimit keys.
//   - A call whose context is done returns ErrUnknownOutcome (wrapping the
//     context's error), never a refusal.
//
// How a write works: Put and Delete queue their write for a group commit
// (commit.go). A committer takes the writes queued so far as a batch (up
// to 8 MiB of them: the oldest first, then every small one, up to 64 KiB,
// ahead of bigger ones, so that a lease renewal or an actor's head never
// waits behind a queue of runs) and, under the store's lock (a one-slot
// semaphore for goroutines of this Store, plus flock on dir/lock for
// other Stores and processes): catches up with what other Stores
// appended; checks each write's condition, in batch order, against the
// index and against earlier writes of the batch;
// appends the records of those that pass as one frame, with one pwrite;
// applies them to the index; fdatasyncs the segment; and only then
// answers every write of the batch and releases the lock. Writes that
// arrive meanwhile form the next batch: nothing waits for a batch to
// fill, so a lone write is a batch of one, while under load one sync
// serves every write that queued during the previous one. If the sync
// fails, every write of the batch is answered ErrUnknownOutcome, and the
// segment becomes suspect (see Failed syncs below).
//
// How a read works: each Store keeps an index in memory, from each key to
// where its current record lies in the segment (offset, length, ETag; not
// the body). Before it answers, a read fstats the segment. If the segment
// is no longer than the index knows, and still linked, the index is up to
// date: a Get is then one pread of the record, whose checksum it checks.
// Otherwise the read catches up first: it reads the frames appended since,
// or, if a compaction unlinked the segment, loads the one `current` now
// names. Since a write's frame is in the file before its writer is
// answered, a read that starts after that answer finds it.
//
// Range reads: a record's checksum covers the whole record, so one range
// of a body can be checked against it only by reading the rest of the
// body too. A range read (GetRange, ownership.RangeReader) does so once:
//   - A body of up to 16 KiB is read and checked whole by every range
//     read, exactly as by a Get.
//   - The first range read of a larger record in a Store reads the record
//     whole, a MiB at a time, checks its checksum, and keeps the CRC-32C
//     of each 4 KiB block of the body in memory. It costs about what a Get
//     of the object costs. Every later range read of that record in that
//     Store reads only the blocks that hold its range (a 4 KiB range: one
//     or two blocks, one pread) and checks each against its sum.
//
// So a range read never returns a byte that is not checked: damage found
// in the record at its first range read, or in a block a later one reads,
// is a damaged object (ownership.ErrDamaged), every time, as for a Get.
// Damage that comes after the first range read, in blocks a range read
// does not read, is not reported by that range read; a Get, or the next
// range read that reads those blocks, reports it. The sums are not on
// disk, so the record format is unchanged: each Store takes them at its
// first range read of a record, and again after another Store's
// compaction has moved the record to a new segment (its own compaction
// carries them over: it checked each record it copied). They cost 4
// bytes per 4 KiB of body plus about 100 bytes a record, up to 16 MiB a
// Store (16 GiB of large objects), past which the Store drops them all
// and checks each record whole again at its next range read. Block sums
// written in the record would spare the first whole read, at the price of
// a new record format and of a read of the sums beside each range.
//
// Frames count only whole: a frame's header carries the length and
// checksum of its records, and the segment's salt. A reader that meets a
// frame cut short (being written, or left by a process killed in the
// middle of its pwrite) stops before it and applies nothing of it; the
// next writer, holding the lock, cuts it off before appending.
//
// Visibility: a frame is visible to readers once it is written, before the
// fdatasync that makes it durable, and before its writers are answered.
// This is acceptable, and no reader is kept from it, because:
//   - Only a machine crash (power loss, kernel crash) can undo a pwrite
//     whose sync had not completed; a process crash cannot, since the
//     bytes are in the kernel's page cache. A machine crash also ends
//     every process that could have read the frame, as the directory is
//     local.
//   - Every write (Put or Delete, of any Store or process) checks its
//     condition under the lock, and a batch holds the lock from its
//     pwrite until its sync completes. So a write made after reading a
//     frame checks its condition after that frame is durable. The one
//     case where a writer finds, under the lock, frames of another Store
//     that may not be durable is when that Store died between its pwrite
//     and its sync, or its sync failed: a Store fdatasyncs every frame it
//     did not write itself before it answers a write checked against it
//     (a cheap call when they are durable already). Earlier writes of the
//     same batch are checked against unsynced, but share the batch's sync
//     and answer.
//   - S3 behaves alike: a concurrent GET may return a PUT's object before
//     the PUT's response reaches its client. Only the writer's answer says
//     that a write landed; a reader that acts outside the store (answers a
//     client, say) on what it read must not take it as acknowledged.
//
// The exception is a batch whose sync failed: its writers were told
// ErrUnknownOutcome, its frame is visible, and may or may not survive a
// machine crash.
//
// Failed syncs. Linux reports a failed fdatasync once, then counts the
// pages it could not write as clean: a later fdatasync of the segment
// returns success without writing them. A batch appended after a failed
// sync could then be acknowledged on top of a frame that never reaches
// the disk, and a machine crash would leave damage that Open refuses, or
// lose the acknowledged writes after it. So any failed fdatasync of the
// segment (a batch's, or the one after cutting a torn tail, or Open's)
// makes the segment suspect, and nothing is ever appended to a suspect
// segment:
//   - The writer records the suspicion, under the lock, in the file
//     `suspect`, which names the segment, so that every Store and process
//     learns of it; each writer reads that file under the lock before it
//     appends.
//   - A writer that finds its segment suspect first rewrites it: a
//     compaction, which reads the records back, writes them to a new
//     segment and syncs it whole. Only then does it append its batch, to
//     the new segment. The writer whose sync failed tries this at once,
//     before it releases the lock.
//   - Until a rewrite succeeds, every batch fails with nothing written
//     (a Failed outcome, not Unknown).
//   - The rewrite removes `suspect`; one left behind names a segment that
//     is no longer current, and the next writer removes it.
//
// The suspect file is replaced by rename but not synced: it matters only
// while the machine runs. After a machine crash the segment holds what
// the disk holds, the failed frame is its last one (nothing was appended
// after it), and Open checks it as it checks any torn tail. If the file
// cannot be written at all, only the Store whose sync failed knows; it
// refuses to append just the same, and a failed sync after a cut (or at
// Open) fails the call rather than let the suspicion go unrecorded.
//
// On darwin, every sync of a segment or the directory is fcntl
// F_FULLFSYNC (fsync where the file system does not support it), since
// fsync there does not make the drive write its cache.
//
// Crashes and damage. A machine crash can leave the last frame, whose sync
// had not completed, cut at any byte, or filled with zeros or stale
// bytes. Open (and any writer, under the lock) cuts the segment back to
// the end of the last whole frame and syncs it; what it cuts was never
// acknowledged. A frame that fails its checksum while whole frames follow
// it cannot come from a crash: a batch is written only after the one
// before it is durable. That is damage (a disk, or a person), and the
// store refuses it: Open returns ErrCorrupt naming the segment and the
// offset, and changes nothing, rather than drop acknowledged writes that
// follow the damage. Damage to the last frame alone looks exactly like a
// torn write and is cut off with it; every cut is logged (Options.Logger)
// with the segment, the offset and the bytes dropped, since a segment cut
// short while no Store had it open ends in a torn frame too.
//
// Damage while a Store runs. Damage to a record after Open read it is
// found by Get, which checks every record it returns, and by range reads
// as Range reads says: it is damage to that object alone
// (ownership.ErrDamaged, a Damaged outcome, wrapping ErrCorrupt), every
// Get of the key says so until the key is written again, and the other
// keys are read and written as before. Damage that
// concerns every key is another matter: the segment shorter than the
// index knows, the segment or `current` gone, a frame that is not whole
// where whole frames follow it (found by a writer), a record read that
// runs past the end of the file. No answer of the Store can be trusted
// after that, so it logs the damage once, with the segment's path, and
// from then on every call returns the same error, which wraps
// ownership.ErrBucketDamaged (a BucketDamaged outcome): the node stops
// acting and exits rather than retry forever (see ownership.Core).
//
// Compaction (compact.go) keeps the log to what the keys hold now: when a
// batch leaves the segment with more dead bytes (overwritten and deleted
// versions, delete records) than live ones, and at least 64 MiB of them,
// the writer starts a compaction. It copies the live records into a new
// file while writes go on, then, in rounds, what was written meanwhile;
// only the last round, of at most about 16 MiB, holds the lock, with the
// switch: the copy synced and renamed to the next segment, `current`
// replaced (rename, then a directory sync), the old segment unlinked. So
// writes never wait for a copy of the whole store, which at gigabytes
// would take longer than a lease can wait. The old segment is never
// unlinked before a directory sync succeeded: if the compactor's fails,
// it leaves the old segment linked and refuses writes (Failed, nothing
// written) until a sync succeeds, since a crash could otherwise bring back
// a `current` naming the old segment without the writes appended to the
// new one. A writer that loads a segment (at Open, or after another
// Store's compaction) likewise syncs the directory, and removes every
// other segment, before it appends; while a segment cannot be removed,
// writes are refused too, since a reader still on it finds it linked and
// would not look for them in the new one. So the segment stays
// under about twice the live data plus 64 MiB, and loading it (at Open,
// or after another Store compacted) reads a bounded number of bytes.
// Other Stores notice the switch at their next fstat (the old segment is
// unlinked) and load the new one; one that is reading the old segment
// meanwhile finishes, its open descriptor keeping the bytes alive.
//
// A context that ends while a write waits in the queue or for the lock
// makes it return ErrUnknownOutcome with nothing written. Once the
// committer has claimed the write under the lock it runs to completion:
// an append and a sync.
//
// Layout of the directory:
//
//	format          marker naming the layout: "wasmkeep dirstore 2"
//	lock            flocked around every write batch and segment switch
//	compacting      flocked while a compaction copies
//	current         the name of the segment in use, replaced by rename
//	seg-<16 hex>    segments, numbered in order; only the one current
//	                names is in use, and Open removes the others
//	suspect         the name of a segment whose fdatasync failed, while
//	                it is current and not yet rewritten (Failed syncs)
//	*.tmp-*         a file being written (format, current, suspect, and
//	                compact.tmp-* a compaction's copy), or left by a crash
//	                and removed by the next Open or writer (a copy only
//	                while no one holds `compacting`)
//
// A directory that holds a segment with frames but no `current` has lost
// it, and Open refuses it (ErrCorrupt) rather than start a new store over
// the segment; a segment no longer than its header holds nothing, and is
// what a crash while creating the store leaves.
//
// The record format is in format.go. Open refuses, with ErrFormat, a
// directory whose marker names another layout (among them "wasmkeep
// dirstore 1", the file per object of earlier builds, whose data this
// build does not read: start from an empty directory), and a directory
// without a marker that holds anything else.
//
// Costs: a batch is a flock, an fstat, a stat of `current`, a failed open
// of `suspect`, a pwrite and an fdatasync, whatever the number of writes
// or keys in it. A segment switch adds a directory sync for each Store
// that writes after it, and Open does one. A Get is an fstat and a pread;
// so is a range read, of the blocks that hold the range, once the record
// has been checked whole.
// The index takes about 80 bytes plus the key for each key; the bodies
// stay on disk.
//
// Every process that opens the directory takes the same lock around each
// write batch, so a process stopped while it holds it (SIGSTOP, a
// debugger, a machine that swaps it out for long) stops every other's
// writes until it runs again: on one machine, nodes share the machine's
// fate anyway, but a cluster whose nodes must survive one node hanging
// runs on S3, where they share no lock.
//
// The directory must be on a local file system: flock over network file
// systems may degrade to locks that do not exclude other Stores of the same
// process, and the store relies on an unlinked file's link count. Platforms
// without flock (Windows, Plan 9, …) cannot open a store. The Store trusts
// its directory: it does not defend against another user who can write
// there, since such a user can rewrite the segment anyway.
//
// Options.Logger (OpenWith) receives the cuts and the damage above, and
// nothing else; a Store opened with Open logs nothing.
//
// Goroutines: a Store is safe for concurrent use by any number of
// goroutines, and several Stores (in one process or several) may use one
// directory at once. Close must not race with other calls on the same
// Store; calls after Close return ErrClosed.
package dirstore
