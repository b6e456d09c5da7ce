package sqlitestore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/internal/groupcommit"
)

// Layout of a store directory (see doc.go).
const (
	dbName     = "bucket.db"
	lockName   = "lock"
	claimsName = "claims"
	// dirstoreMarker is the file a directory store keeps its layout's
	// name in: a directory that holds one is not opened as this store.
	dirstoreMarker = "format"
)

// The database's marks: application_id "wksq", user_version the schema.
const (
	applicationID = 0x776b7371
	schemaVersion = 1
)

// Sizes. A new database has pages of pageSize bytes. A body of at most
// inlineMax bytes is kept in its object's row; a larger one in chunks of
// chunkSize bytes, at most maxChunks of them. A chunk is 128 bytes short
// of 32 KiB so that its row fills whole pages: SQLite keeps in the leaf
// what is left of a row after whole overflow pages when that fits there
// (so a chunk takes one leaf and one overflow page of 16 KiB, or a leaf
// and seven overflow pages of 4 KiB), while a row of 32 KiB and a few
// bytes would keep a few hundred bytes in a leaf and leave 2 KiB of its
// last overflow page of 16 KiB empty.
const (
	pageSize   = 16 << 10
	inlineMax  = 512
	chunkSize  = 32<<10 - 128
	chunkShift = 20
	maxChunks  = 1 << chunkShift
	// maxBodyLen is the largest body a Put takes, as the directory
	// store's.
	maxBodyLen = 1 << 30
	etagBytes  = 16
)

// Defaults of Options.
const (
	defaultBusyTimeout = 10 * time.Second
	// checkpointPages is the WAL length, in pages, past which the
	// checkpointer copies it into the database (SQLite's own default
	// for its automatic checkpoints).
	checkpointPages = 1000
	// walLimit is what a WAL is cut back to when it starts over.
	walLimit = 64 << 20
)

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("sqlitestore: store closed")

// ErrFormat reports a directory or database that holds something other
// than a store of this layout.
var ErrFormat = errors.New("sqlitestore: not a bucket database of this layout")

// errBadCondition marks a condition a call cannot take (CreateOnly on a
// delete, or an unknown kind). OutcomeOf classifies it as Failed.
var errBadCondition = errors.New("invalid condition")

// Options configure a Store. The zero value is the default.
type Options struct {
	// Logger receives what the Store finds that a person should know:
	// the database found damaged by SQLite (ErrBucketDamaged). nil logs
	// nothing.
	Logger *slog.Logger
	// BusyTimeout bounds how long a connection waits for a lock SQLite
	// takes that another program holds (the write lock, taken by a
	// writer that does not take the store's lock; a WAL's recovery). 0
	// means 10 s.
	BusyTimeout time.Duration
	// Readers bounds the connections reads use at once; 0 means twice
	// GOMAXPROCS, at least 4.
	Readers int
}

// Store is an ownership.Bucket in one SQLite database. See the package
// doc.
type Store struct {
	dir, path string
	log       *slog.Logger
	busy      time.Duration

	// sem is the in-process half of the write lock: a one-slot semaphore
	// rather than a sync.Mutex so that waiting for it honours a context.
	sem chan struct{}
	// lockFile is the cross-process half: flocked while sem is held.
	lockFile *os.File
	// w is the writer's connection; it belongs to whoever holds sem.
	w *writer

	// committer queues writes for group commit (commit.go); it has a
	// mutex of its own.
	committer *groupcommit.Queue[*write]

	// readers are the idle read connections; nreaders counts them all,
	// idle or not, under readersMu.
	readers    chan *reader
	readersMu  sync.Mutex
	nreaders   int
	maxReaders int

	// checkpoint wakes the checkpointer; stop ends it and done says it
	// has ended.
	checkpoint chan struct{}
	stop, done chan struct{}

	// damaged: the Store has logged SQLite's report of a damaged
	// database once.
	damaged atomic.Bool

	// synchronous is SQLite's synchronous setting of every connection:
	// FULL (see doc.go); a benchmark lowers it to NORMAL for comparison.
	synchronous string

	closed atomic.Bool
}

var _ ownership.RangeReader = (*Store)(nil)

// Open opens the store in dir, creating dir and the database as needed.
func Open(dir string, opts Options) (*Store, error) {
	return open(dir, opts, "FULL")
}

func open(dir string, opts Options, synchronous string) (*Store, error) {
	if !filepath.IsAbs(dir) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: %w", err)
		}
		dir = abs
	}
	if _, err := os.Stat(filepath.Join(dir, dirstoreMarker)); err == nil {
		return nil, fmt.Errorf("%w: %s holds a directory store (its %q file); give this store a directory of its own",
			ErrFormat, dir, dirstoreMarker)
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	s := &Store{
		dir: dir, path: filepath.Join(dir, dbName), log: opts.Logger,
		busy: opts.BusyTimeout, sem: make(chan struct{}, 1),
		maxReaders: opts.Readers, synchronous: synchronous,
		checkpoint: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	s.committer = groupcommit.NewQueue((*write).size, smallWrite, maxBatchBytes, s.commitBatch)
	if s.busy <= 0 {
		s.busy = defaultBusyTimeout
	}
	if s.maxReaders <= 0 {
		s.maxReaders = max(4, 2*runtime.GOMAXPROCS(0))
	}
	s.readers = make(chan *reader, s.maxReaders)
	var err error
	if s.lockFile, err = os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o666); err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	if err := s.init(); err != nil {
		s.lockFile.Close()
		return nil, err
	}
	go s.runCheckpointer()
	return s, nil
}

// init creates or checks the database under the write lock, and opens
// the writer's connection.
func (s *Store) init() error {
	if err := waitLock(s.lockFile); err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	defer unlock(s.lockFile)
	_, statErr := os.Stat(s.path)
	w, err := s.openWriter()
	if err != nil {
		return err
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// The database file is new: make its name durable.
		if err := syncDir(s.dir); err != nil {
			w.close()
			return fmt.Errorf("sqlitestore: %w", err)
		}
	}
	s.w = w
	return nil
}

// openConn opens a connection to the database with the settings every
// connection shares.
func (s *Store) openConn() (*sqlite3.Conn, error) {
	c, err := sqlite3.OpenFlags(s.path, sqlite3.OPEN_READWRITE|sqlite3.OPEN_CREATE|sqlite3.OPEN_NOFOLLOW)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", s.path, err)
	}
	if err := c.BusyTimeout(s.busy); err != nil {
		c.Close()
		return nil, fmt.Errorf("sqlitestore: %s: %w", s.path, err)
	}
	// Every connection syncs as the writer does: the checkpointer's
	// checkpoints, too, must be durable before the WAL starts over.
	if err := c.Exec("PRAGMA synchronous = " + s.synchronous); err != nil {
		c.Close()
		return nil, fmt.Errorf("sqlitestore: %s: %w", s.path, err)
	}
	return c, nil
}

// schema is the database's layout (see doc.go).
var schema = fmt.Sprintf(`
CREATE TABLE objects (
	key  BLOB PRIMARY KEY NOT NULL,
	etag BLOB NOT NULL,
	size INTEGER NOT NULL,
	id   INTEGER NOT NULL,
	sum  INTEGER NOT NULL,
	body BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE chunks (
	sum  INTEGER NOT NULL,
	data BLOB NOT NULL
);
PRAGMA application_id = %d;
PRAGMA user_version = %d;
`, applicationID, schemaVersion)

// setUp puts a new database in WAL mode and creates its tables, or checks
// that an existing one is a store of this layout. The caller holds the
// write lock.
func setUp(c *sqlite3.Conn, path string) error {
	// Pages of 16 KiB: a MiB of chunks is 64 WAL frames, each two write
	// calls, where pages of 4 KiB take 256. A database that has pages
	// keeps its size.
	if err := c.Exec(fmt.Sprintf("PRAGMA page_size = %d", pageSize)); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", path, err)
	}
	var mode string
	if err := queryRow(c, "PRAGMA journal_mode = WAL", func(st *sqlite3.Stmt) { mode = st.ColumnText(0) }); err != nil {
		return fmt.Errorf("sqlitestore: %s: WAL mode: %w", path, err)
	}
	if mode != "wal" {
		return fmt.Errorf("sqlitestore: %s: journal mode %q, want wal (a file system without shared memory?)", path, mode)
	}
	var app, version, tables int64
	err := queryRow(c, "SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema)",
		func(st *sqlite3.Stmt) { app, version, tables = st.ColumnInt64(0), st.ColumnInt64(1), st.ColumnInt64(2) })
	if err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", path, err)
	}
	switch {
	case app == applicationID && version == schemaVersion:
		return nil
	case app == applicationID:
		return fmt.Errorf("%w: %s has layout %d, this build reads %d", ErrFormat, path, version, schemaVersion)
	case app != 0 || tables != 0:
		return fmt.Errorf("%w: %s is another application's database", ErrFormat, path)
	}
	if err := c.Exec("BEGIN IMMEDIATE;" + schema + "COMMIT;"); err != nil {
		_ = c.Exec("ROLLBACK")
		return fmt.Errorf("sqlitestore: %s: create tables: %w", path, err)
	}
	return nil
}

// queryRow runs a statement that answers one row and hands it to row.
func queryRow(c *sqlite3.Conn, query string, row func(*sqlite3.Stmt)) error {
	st, _, err := c.Prepare(query)
	if err != nil {
		return err
	}
	defer st.Close()
	if st.Step() {
		row(st)
	}
	return st.Reset()
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close ends the Store: it waits for the batch under way, then closes
// its connections. The last connection to close in any process copies
// the WAL into the database and removes it. Close must not race with
// other calls on the same Store; calls after it return ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	close(s.stop)
	<-s.done
	s.sem <- struct{}{}
	var errs []error
	for {
		select {
		case r := <-s.readers:
			errs = append(errs, r.close())
			continue
		default:
		}
		break
	}
	if s.w != nil {
		errs = append(errs, s.w.close())
		s.w = nil
	}
	errs = append(errs, s.lockFile.Close())
	return errors.Join(errs...)
}

// runCheckpointer copies the WAL into the database whenever the writer
// says it has grown past checkpointPages, on a connection of its own, so
// that no commit waits for the copy. A checkpoint runs beside writes and
// reads (SQLite's PASSIVE mode) and copies what no reader still needs;
// but SQLite starts the WAL over only at a write that begins after a
// checkpoint copied all of it, which under steady writes never comes. So
// the checkpointer copies in rounds without the write lock, until a
// round finds less than finalRound pages written since the one before,
// then takes the lock for a last round: the next write starts the WAL
// over. Writes wait for that last round only.
func (s *Store) runCheckpointer() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-s.stop; cancel() }()
	var c *sqlite3.Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-s.checkpoint:
		}
		if c == nil {
			var err error
			if c, err = s.openConn(); err != nil {
				continue // the next commit asks again
			}
		}
		last := -1
		for range maxRounds {
			log, err := checkpoint(c)
			if err != nil || (last >= 0 && log-last < finalRound) {
				break
			}
			last = log
		}
		unlockFn, err := s.lock(ctx)
		if err != nil {
			continue
		}
		_, _ = checkpoint(c)
		unlockFn()
	}
}

// The rounds of a checkpoint: at most maxRounds without the write lock,
// and the last with it once fewer than finalRound pages came since the
// round before.
const (
	maxRounds  = 4
	finalRound = 256
)

// checkpoint runs a PASSIVE checkpoint and returns the WAL's length in
// pages. BUSY (another connection checkpoints now) is no error.
func checkpoint(c *sqlite3.Conn) (log int, err error) {
	err = queryRow(c, "PRAGMA wal_checkpoint(PASSIVE)", func(st *sqlite3.Stmt) { log = st.ColumnInt(1) })
	return log, err
}

// Errors.

func unknown(op, key string, err error) error {
	return fmt.Errorf("sqlitestore: %s %q: %w: %w", op, key, ownership.ErrUnknownOutcome, err)
}

// readErr classifies the error of a read: interrupted by its context,
// unknown; the database damaged, bucket damaged; otherwise as it is.
func (s *Store) readErr(op, key string, err error) error {
	switch {
	case errors.Is(err, sqlite3.INTERRUPT):
		return unknown(op, key, err)
	case isCorrupt(err):
		return fmt.Errorf("sqlitestore: %s %q: %w: %w", op, key, ownership.ErrBucketDamaged, s.corrupt(err))
	}
	return fmt.Errorf("sqlitestore: %s %q: %w", op, key, err)
}

func isCorrupt(err error) bool {
	return errors.Is(err, sqlite3.CORRUPT) || errors.Is(err, sqlite3.NOTADB)
}

// corrupt logs, once per Store, that SQLite found the database damaged.
func (s *Store) corrupt(err error) error {
	if s.log != nil && !s.damaged.Swap(true) {
		s.log.Error("sqlitestore: the database is damaged", slog.String("path", s.path), slog.Any("err", err))
	}
	return err
}

// Checksums and ETags.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var le = binary.LittleEndian

type etagBits [etagBytes]byte

func newETagBits() etagBits {
	var e etagBits
	_, _ = rand.Read(e[:]) // never fails (crypto/rand.Read panics instead)
	return e
}

func (e etagBits) ETag() ownership.ETag { return ownership.ETag(hex.EncodeToString(e[:])) }

// matches reports whether the ETag a caller gave names the version whose
// ETag bytes are b. An ETag this store never handed out names none.
func matches(b []byte, t ownership.ETag) bool {
	if len(t) != 2*etagBytes || len(b) != etagBytes {
		return false
	}
	var want [2 * etagBytes]byte
	hex.Encode(want[:], b)
	return string(want[:]) == string(t)
}

// rowSum is the checksum of an object's row: its key, ETag, size, chunk
// id and inline body.
func rowSum(key string, etag []byte, size, id int64, body []byte) uint32 {
	var hdr [16]byte
	le.PutUint64(hdr[0:], uint64(size))
	le.PutUint64(hdr[8:], uint64(id))
	sum := crc32.Update(0, castagnoli, []byte(key))
	sum = crc32.Update(sum, castagnoli, []byte{0})
	sum = crc32.Update(sum, castagnoli, etag)
	sum = crc32.Update(sum, castagnoli, hdr[:])
	return crc32.Update(sum, castagnoli, body)
}

// chunkSum is the checksum of a chunk: its place in its body (the i-th
// chunk) and its bytes.
func chunkSum(i int64, data []byte) uint32 {
	var hdr [8]byte
	le.PutUint64(hdr[:], uint64(i))
	return crc32.Update(crc32.Update(0, castagnoli, hdr[:]), castagnoli, data)
}
