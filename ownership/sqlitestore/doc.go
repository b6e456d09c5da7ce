// Package sqlitestore is an ownership.Bucket kept in one SQLite database
// in a local directory: the embedded alternative to the directory store
// (ownership/dirstore), chosen with a bucket URL such as sqlite:///DIR.
// Several node processes on one machine may share the directory, as they
// share a directory store. SQLite is github.com/ncruces/go-sqlite3, the
// build the SQL actors use (a translation of SQLite's own code to Go,
// without cgo), in WAL mode.
//
// Guarantees (the directory store's):
//   - Conditional writes are atomic across goroutines and across
//     processes: of any number of racing create-only or if-match writes,
//     exactly one lands and the others get ErrPrecondition.
//   - A write that returned nil survives a crash of the process or the
//     machine (but see Failed syncs below). A write that returned any
//     other error except ErrUnknownOutcome left the store as it was.
//   - Readers never see a partly written object, nor a write before it
//     is durable.
//   - A read (Get, List) sees every write that returned before it
//     started, whichever Store or process made it.
//   - Every write gets a new ETag (128 random bits), even for identical
//     bytes, so a stale ETag never matches a later version.
//   - Every key ValidateKey accepts can be stored, beside any other.
//   - List pages are in byte order of keys, as S3's, and hold at most
//     ownership.DefaultListLimit keys.
//   - A call whose context is done returns ErrUnknownOutcome (wrapping
//     the context's error), never a refusal.
//
// Durability: the writer's connection runs with synchronous=FULL, so
// SQLite fdatasyncs the WAL at every commit, before the commit returns.
// A write is answered only after its commit, so an acknowledged write
// survives a crash of the process and of the machine: the guarantee the
// directory store gives, which fdatasyncs each batch. synchronous=NORMAL,
// WAL mode's usual setting, would be enough for a process crash alone
// (the commit is in the kernel's page cache when it returns), but a
// power loss could take back writes the node had acknowledged, and with
// them leases and holds the protocol counted on; since the group commit
// below shares each sync among every write of a batch, FULL costs little
// where it matters.
//
// Layout of the database (bucket.db in the directory):
//
//	objects (key BLOB PRIMARY KEY, etag, size, id, sum, body) WITHOUT ROWID
//	chunks  (rowid, sum, data)
//
// A body of up to 512 bytes (a lease, a record, a small head) is kept in
// its object's row, so a small write changes one row of one table. A
// larger body is cut into chunks of 32,640 bytes (32 KiB less 128, so
// that a chunk's row fills whole pages) in the chunks table, whose
// rowids are the object's chunk id shifted left by 20 plus the chunk's
// place; the row holds the id and an empty body. Keys are BLOBs, so
// they sort as bytes, as S3's; ETags are 16 bytes. A new database has
// pages of 16 KiB (SQLite's default is 4 KiB): most bytes are chunks, and
// each page is a WAL frame written with two calls, so larger pages write
// and read a MiB of chunks with a quarter of the calls.
//
// Checksums: every row carries the CRC-32C of its key, ETag, size, chunk
// id and inline body, and every chunk the CRC-32C of its place and its
// bytes. A read checks what it returns: a Get the row and every chunk, a
// range read (GetRange) the row and the chunks that hold the range, and
// it reads only those (a chunk is about 32 KiB; a range read of a body
// kept in its row reads the row). A mismatch, or a chunk missing or out of
// place, is a damaged object (ownership.ErrDamaged): other keys are read
// and written as before. Damage SQLite itself finds (SQLITE_CORRUPT,
// SQLITE_NOTADB: its b-trees broken) is damage to the whole store
// (ownership.ErrBucketDamaged), logged once (Options.Logger).
//
// How a write works: Put and Delete queue their write for a group commit
// (commit.go). A batch takes the writes queued so far (up to 8 MiB of
// them, the oldest first, then every small one ahead of bigger ones, as
// the directory store does), takes the store's write lock (a one-slot
// semaphore for goroutines of this Store, plus flock on dir/lock for
// other Stores and processes), and opens one transaction with BEGIN
// IMMEDIATE. In it, for each write in batch order, it reads what the key
// holds (earlier writes of the batch included), checks the condition,
// and, if it holds, writes the row and the chunks (and deletes the old
// version's chunks). A refused condition is that write's answer alone.
// Then one COMMIT, one fdatasync of the WAL, and every write of the batch
// is answered. If SQLite fails a statement (a full disk, an I/O error),
// the transaction is rolled back and every write of the batch fails with
// nothing written; if the COMMIT fails, every write of the batch is
// answered ErrUnknownOutcome.
//
// Failed syncs: a batch whose COMMIT fails (its fdatasync, say) is
// answered ErrUnknownOutcome, and the writer's connection is rolled back
// or opened again. Unlike the directory store (its suspect segments),
// this store does not rewrite what a failed sync may have left unwritten:
// Linux may count such pages clean, a later commit's fdatasync then
// succeeds without them, and a machine crash after it could take back
// that later, acknowledged commit with the WAL cut short before it. A
// process crash cannot; a failed fdatasync is rare (a failing disk); it
// is one of the ways this store is not yet the directory store's equal.
//
// The flock orders writers before SQLite's own write lock does: a writer
// waiting for another process's batch sleeps in the kernel and is woken
// when it ends, where SQLite's busy handler would poll. BEGIN IMMEDIATE
// still guards the database against a writer that does not take the
// flock (the sqlite3 shell, say), waiting up to Options.BusyTimeout.
//
// A context that ends while a write waits in the queue or for the lock
// makes it return ErrUnknownOutcome with nothing written. Once a batch
// has claimed the write under the lock it runs to completion; a caller
// whose context ends meanwhile is answered ErrUnknownOutcome at once.
//
// How a read works: each Store keeps a few read connections (Options.
// Readers). A Get is one statement, which reads the row and its chunks
// from one snapshot of the database: WAL mode lets reads run beside the
// writer, in this process and in others, and never see a commit before
// it is durable. A read's context interrupts SQLite when it ends.
//
// Checkpoints: the WAL grows with every commit; when it holds more than
// 1,000 pages, a goroutine of the Store copies it into the database on a
// connection of its own, so that no commit waits for the copy. SQLite
// starts the WAL over (from its first byte, so it stays as long as it
// was) only at a write that begins after a checkpoint copied all of it,
// which under steady writes never comes, and the WAL would grow with
// every commit (TestWALStartsOver). So the copy runs in rounds (SQLite's
// PASSIVE checkpoints) beside reads and writes until a round finds fewer
// than 256 pages written since the one before, then takes the write lock
// for a last round; the next write starts the WAL over. A WAL is cut back to 64 MiB when it starts over.
// Freed pages of the database are reused by later writes; the file does
// not shrink.
//
// Costs: a batch is a flock, a BEGIN, per write a lookup and an insert
// (one per chunk), a COMMIT that appends the changed pages to the WAL
// (16 KiB each, two write calls a page) and fdatasyncs it. Every page is written twice in
// the end: to the WAL, and by the checkpoint into the database.
//
// Several processes: every Store in every process takes the same flock
// around each batch, so a process stopped while it holds it (SIGSTOP)
// stops every other's writes until it runs again, as with the directory
// store. The directory must be on a local file system: SQLite's WAL
// mode shares memory through the -shm file, and the locks do not work
// over network file systems.
//
// Claims (Claim) are files under dir/claims, flocked, exactly as the
// directory store keeps them: see claim.go.
//
// Layout of the directory:
//
//	bucket.db       the database
//	bucket.db-wal   its write-ahead log, while connections are open
//	bucket.db-shm   the WAL's index, shared by the processes
//	lock            flocked around every write batch
//	claims/         the claims, one file per name (its hex)
//
// Open refuses a directory that holds a directory store (its `format`
// file), and a database that another application made (ErrFormat).
//
// Goroutines: a Store is safe for concurrent use by any number of
// goroutines, and several Stores (in one process or several) may use one
// directory at once. Close must not race with other calls on the same
// Store; calls after Close return ErrClosed.
package sqlitestore
