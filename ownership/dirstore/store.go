package dirstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/internal/groupcommit"
)

// Layout of a store directory (see doc.go).
const (
	formatName  = "format"
	formatText  = "wasmkeep dirstore 2\n"
	lockName    = "lock"
	currentName = "current"
	suspectName = "suspect" // names a segment whose fdatasync failed
	tmpSuffix   = ".tmp-"   // format.tmp-…, current.tmp-…: being written
)

// defaultCompactMin is the dead bytes a segment must hold, besides more
// dead than live, before a writer compacts it.
const defaultCompactMin = 64 << 20

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("dirstore: store closed")

// ErrFormat reports a directory that holds something other than a
// bucket in this layout: an earlier or later layout, or unrelated files.
var ErrFormat = errors.New("dirstore: not a bucket directory in this layout")

// errBadCondition marks a condition a call cannot take (CreateOnly on a
// delete, or an unknown kind). OutcomeOf classifies it as Failed.
var errBadCondition = errors.New("invalid condition")

// Store is an ownership.Bucket in one local directory. See the package doc.
type Store struct {
	dir string
	log *slog.Logger

	// broken is the damage that ended this Store while it ran (see fatal):
	// nil until then, and every call returns it after.
	broken atomic.Pointer[error]

	// sem is the in-process half of the write lock: a one-slot semaphore
	// rather than a sync.Mutex so that waiting for it honours a context.
	sem chan struct{}
	// lockFile is the cross-process half: flocked while sem is held.
	lockFile *os.File

	// mu guards seg, idx and unsynced. Readers hold it for reading while
	// they look a key up and read its record; catching up with the
	// segment, and changing it, take it for writing.
	mu  sync.RWMutex
	seg *segment // nil once closed
	idx *index
	// unsynced: the index holds frames other Stores appended that this
	// Store has not fdatasynced since. A writer that checks a condition
	// against them syncs them before it answers (see doc.go, Visibility).
	unsynced bool

	// committer queues writes for group commit (commit.go); it has a
	// mutex of its own.
	committer *groupcommit.Queue[*write]

	// sums holds the block sums of the large records that range reads
	// have checked (ranges.go); it has a mutex of its own.
	sums sumCache

	// compactAt raises compactMin after a compaction failed, so that a
	// full disk is not retried on every batch. compacting is set while
	// this Store's compaction runs (compact.go), and background counts it
	// for Close; compactFile is what it holds flocked meanwhile.
	compactAt   atomic.Int64
	compacting  atomic.Bool
	background  sync.WaitGroup
	compactFile *os.File

	// The fields below belong to whoever holds the write lock.

	// dirUnsynced: `current` may name a segment that no directory sync of
	// this Store has made durable since (it loaded the segment, or its
	// compaction's directory sync failed). No write may land, and no old
	// segment be unlinked, until a directory sync succeeds (see settle).
	dirUnsynced bool
	// staleSegments: segments other than the current one may still be
	// linked (a writer loaded a segment, or an unlink failed); no write may
	// land until they are gone, or a reader elsewhere still on one of them
	// would miss it (see removeStale).
	staleSegments bool
	// suspect names the segment whose fdatasync failed in this Store, as
	// this Store knows it; the suspect file tells the others (see
	// markSuspect). Nothing is appended to a suspect segment: the next
	// writer rewrites it first.
	suspect string
	// compactMin is the dead bytes that make a segment worth compacting,
	// compactRound the bytes of a compaction's last round (finalRound);
	// tests lower them.
	compactMin, compactRound int64
	// sys makes files durable and removes segments (see sysCalls).
	sys sysCalls

	closed atomic.Bool
}

var _ ownership.RangeReader = (*Store)(nil)

// sysCalls are the calls through which a Store makes its files durable and
// unlinks segments. A Store takes them from sysHooks when it opens; tests
// replace them, in sysHooks or in one Store, to make them fail, and
// nothing else does.
type sysCalls struct {
	datasync func(fd int, p string) error // of a segment, or a file about to be renamed into place
	syncDir  func(dir string) error
	remove   func(p string) error // of a segment
}

var sysHooks = sysCalls{datasync: fdatasync, syncDir: syncDir, remove: os.Remove}

// Options are what a Store opens with. The zero value is the defaults.
type Options struct {
	// Logger receives what a person should know of the directory: a torn
	// tail cut off (at Open, or by a writer after another process died in
	// its write), with the bytes dropped; damage found while the Store
	// runs, with the segment's path. Nil: nothing is logged.
	Logger *slog.Logger
}

// Open opens the store in dir with the default Options; see OpenWith.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith opens the store in dir, creating the directory and an empty
// store if needed. It cuts off a torn tail a crash left, and refuses a
// directory in another layout or a segment with damage a crash cannot
// explain (ErrCorrupt). Several Stores, in one process or several, may have
// one directory open at once.
func OpenWith(dir string, opts Options) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("dirstore: open %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o777); err != nil {
		return nil, fmt.Errorf("dirstore: create %s: %w", dir, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{dir: abs, log: log, sem: make(chan struct{}, 1), compactMin: defaultCompactMin, compactRound: finalRound, sys: sysHooks}
	s.committer = groupcommit.NewQueue((*write).size, smallWrite, maxBatchBytes, s.commitBatch)
	if err := s.open(); err != nil {
		s.release()
		return nil, fmt.Errorf("dirstore: open %s: %w", dir, err)
	}
	return s, nil
}

func (s *Store) path(name string) string { return s.dir + "/" + name }

func (s *Store) open() error {
	f, err := os.OpenFile(s.path(lockName), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return err
	}
	s.lockFile = f
	if s.compactFile, err = os.OpenFile(s.path(compactingName), os.O_RDWR|os.O_CREATE, 0o666); err != nil {
		return err
	}
	unlockFn, err := s.lock(context.Background())
	if err != nil {
		return err
	}
	defer unlockFn()
	if err := s.checkFormat(); err != nil {
		return err
	}
	if err := s.ensureCurrent(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(true); err != nil {
		return err
	}
	if err := s.settle(s.seg.name); err != nil {
		return err
	}
	// Frames of a writer that crashed before its sync are in the index
	// now; make them durable before any condition is checked against them.
	// If that sync fails the segment is suspect, which the suspect file
	// tells the next writer, and the Store can open all the same.
	s.unsynced = true
	return s.syncIfUnsynced()
}

// checkFormat refuses a directory in another layout and writes the format
// marker into a new one. The caller holds the lock, so two processes
// opening a new directory at once write it once.
func (s *Store) checkFormat() error {
	data, err := os.ReadFile(s.path(formatName))
	if err == nil {
		text := string(data)
		switch {
		case text == formatText:
			return nil
		case text == "wasmkeep dirstore 1\n":
			return fmt.Errorf("%w: it holds a bucket in the layout of file per object (format %q) that earlier builds wrote, which this build does not read; start from an empty directory", ErrFormat, strings.TrimSpace(text))
		}
		return fmt.Errorf("%w: unknown format %q (want %q)", ErrFormat, strings.TrimSpace(text), strings.TrimSpace(formatText))
	}
	if !isNotExist(err) {
		return err
	}
	names, err := readDirNames(s.dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if name != lockName && name != compactingName && !strings.HasPrefix(name, formatName+tmpSuffix) {
			return fmt.Errorf("%w: no format marker, and the directory is not empty (it holds %q)", ErrFormat, name)
		}
	}
	return s.replaceFile(formatName, []byte(formatText))
}

// ensureCurrent creates the first segment of a new store, and the
// `current` file naming it. Without `current`, a segment that holds frames
// means that `current` was lost, not that the store is new: that is
// refused, since starting afresh would drop what the segment holds. A
// segment no longer than its header holds nothing, and is what a crash
// while a store was being created leaves; it is replaced.
func (s *Store) ensureCurrent() error {
	if _, err := os.Stat(s.path(currentName)); !isNotExist(err) {
		return err
	}
	names, err := readDirNames(s.dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, ok := parseSegName(n); !ok {
			continue
		}
		fi, err := os.Lstat(s.path(n))
		if err != nil && !isNotExist(err) {
			return err
		}
		if err == nil && (!fi.Mode().IsRegular() || fi.Size() > segHeaderLen) {
			return fmt.Errorf("%w: %s is missing, yet %s holds %d bytes; the store will not start afresh over it "+
				"(restore `current`, writing the name of the segment in use into it)", ErrCorrupt, s.path(currentName), n, fi.Size())
		}
	}
	name := segName(1)
	if err := s.createSegment(name, appendSegHeader(nil, randomSalt())); err != nil {
		return err
	}
	return s.replaceFile(currentName, []byte(name+"\n"))
}

// createSegment writes a new segment file with the given first bytes and
// fdatasyncs it. A file of that name can only be a leftover (segments are
// named in sequence, and the caller holds the lock), so it is replaced.
func (s *Store) createSegment(name string, data []byte) error {
	p := s.path(name)
	if err := os.Remove(p); err != nil && !isNotExist(err) {
		return err
	}
	fd, err := createNew(p)
	if err != nil {
		return err
	}
	err = pwriteFull(fd, p, data, 0)
	if err == nil {
		err = s.sys.datasync(fd, p)
	}
	if cerr := closeFD(fd); err == nil && cerr != nil {
		err = pathErr("close", p, cerr)
	}
	return err
}

// replaceFile replaces the file name with data, atomically and durably:
// a synced temp file renamed over it, and the directory synced.
func (s *Store) replaceFile(name string, data []byte) error {
	tmp := s.path(name + tmpSuffix + randomHex(8))
	err := s.createSegment(filepath.Base(tmp), data)
	if err == nil {
		err = os.Rename(tmp, s.path(name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return s.sys.syncDir(s.dir)
}

// readCurrent returns the segment `current` names and the inode of the
// `current` file read (one open, so the two agree).
func (s *Store) readCurrent() (name string, ino uint64, err error) {
	p := s.path(currentName)
	fd, err := openFD(p, 0, 0)
	if isNotExist(err) {
		// Open creates it before any read, and a switch replaces it by
		// rename: it is never missing in a store that was opened.
		return "", 0, fmt.Errorf("%w: %s is missing", ErrCorrupt, p)
	}
	if err != nil {
		return "", 0, err
	}
	defer closeFD(fd)
	st, err := fstat(fd, p)
	if err != nil {
		return "", 0, err
	}
	buf := make([]byte, min(st.size, 64))
	if err := preadFull(fd, p, buf, 0); err != nil {
		return "", 0, err
	}
	name = strings.TrimSuffix(string(buf), "\n")
	if _, ok := parseSegName(name); !ok {
		return "", 0, fmt.Errorf("%w: %s names no segment: %q", ErrCorrupt, p, buf)
	}
	return name, st.ino, nil
}

// removeStale removes every segment but current, and temp files a crash
// left. The caller holds the lock, and has synced the directory since
// `current` last changed (see settle): a segment is never unlinked while
// a crash could still bring back a `current` naming it. A Store still
// reading a removed segment keeps its open descriptor, and learns of the
// removal from fstat. Until a call succeeds, staleSegments keeps every
// write from landing: a reader elsewhere still on a segment that could not
// be removed finds it linked, and would not look for the writes in the
// new one.
func (s *Store) removeStale(current string) error {
	s.staleSegments = true
	names, err := readDirNames(s.dir)
	if err != nil {
		return err
	}
	// A compaction's file is a crash's leftover only if no compaction
	// runs: this Store's, or another's, which holds the compaction lock.
	copies := false
	if !s.compacting.Load() {
		if ok, _ := tryLock(s.compactFile); ok {
			defer unlock(s.compactFile)
			copies = true
		}
	}
	for _, name := range names {
		_, isSeg := parseSegName(name)
		var err error
		switch {
		case isSeg && name != current:
			err = s.sys.remove(s.path(name))
		case strings.HasPrefix(name, compactTmp) && !copies:
		case strings.Contains(name, tmpSuffix):
			err = os.Remove(s.path(name))
		}
		if err != nil && !isNotExist(err) {
			return fmt.Errorf("remove stale segment: %w", err)
		}
	}
	s.staleSegments = false
	return nil
}

// settle makes current, the segment this Store has caught up with, fit to
// append to as far as the directory goes: it syncs the directory if `current`
// may have changed since the last sync (a crash must not bring back a
// `current` naming a segment that later writes are not in), then removes
// the other segments. The caller holds the write lock.
func (s *Store) settle(current string) error {
	if s.dirUnsynced {
		if err := s.sys.syncDir(s.dir); err != nil {
			return fmt.Errorf("sync the directory after a segment switch: %w", err)
		}
		s.dirUnsynced = false
	}
	if !s.staleSegments {
		return nil
	}
	return s.removeStale(current)
}

// markSuspect records that an fdatasync of sg failed. Linux reports a
// failed writeback once and then counts the pages clean, so a later
// fdatasync of the segment succeeds without writing them: nothing
// appended after that frame could be trusted to survive a machine crash
// (see doc.go, Failed syncs). The suspect file, naming sg, tells every
// Store and process; the caller holds the write lock. It is replaced by
// rename, so it is never read half written, and not synced: it matters
// only while the machine runs, since after a machine crash the segment
// holds what the disk holds and Open checks its tail as after any crash.
func (s *Store) markSuspect(sg *segment) error {
	s.suspect = sg.name
	tmp := s.path(suspectName + tmpSuffix + randomHex(8))
	err := os.WriteFile(tmp, []byte(sg.name+"\n"), 0o666)
	if err == nil {
		err = os.Rename(tmp, s.path(suspectName))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("mark %s suspect: %w", sg.path, err)
	}
	return nil
}

// suspected reports whether sg, the current segment, failed an fdatasync
// (in this Store, or in any other as the suspect file says). A suspect
// file that names another segment is left from a rewrite that succeeded,
// and is removed. The caller holds the write lock.
func (s *Store) suspected(sg *segment) (bool, error) {
	if s.suspect == sg.name {
		return true, nil
	}
	p := s.path(suspectName)
	data, err := os.ReadFile(p)
	if isNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if strings.TrimSuffix(string(data), "\n") == sg.name {
		return true, nil
	}
	if err := os.Remove(p); err != nil && !isNotExist(err) {
		return false, err
	}
	return false, nil
}

func readDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// Close waits for the write in flight, if any, and releases the Store's
// files. Calls after Close return ErrClosed; calls racing with Close may
// fail with ErrClosed, and never damage the store.
func (s *Store) Close() error {
	s.sem <- struct{}{}
	if s.closed.Swap(true) {
		<-s.sem
		return ErrClosed
	}
	<-s.sem
	s.background.Wait() // a compaction stops at its next record
	if err := s.release(); err != nil {
		return fmt.Errorf("dirstore: close %s: %w", s.dir, err)
	}
	return nil
}

func (s *Store) release() error {
	var errs []error
	s.mu.Lock()
	if s.seg != nil {
		errs = append(errs, closeFD(s.seg.fd))
		s.seg = nil
	}
	s.mu.Unlock()
	if s.lockFile != nil {
		errs = append(errs, s.lockFile.Close())
	}
	if s.compactFile != nil {
		errs = append(errs, s.compactFile.Close())
	}
	return errors.Join(errs...)
}

// Dir returns the directory the Store was opened on, as an absolute path.
func (s *Store) Dir() string { return s.dir }

// fatal ends a running Store that found its directory damaged in a way
// that concerns every key, not one record: the segment cut shorter than the
// index knows, a segment or `current` gone, a frame that is not whole where
// whole frames follow it (any err that wraps ErrCorrupt). No answer the
// Store gives after that can be trusted, and no retry mends it, so every
// later call returns the same error, which wraps
// ownership.ErrBucketDamaged: a node stops acting on it, as after a lost
// lease, rather than answer 503s until someone looks. It is logged once,
// with segment, the path of the segment the Store was on. Other errors
// (I/O errors, say) are returned as they are.
func (s *Store) fatal(err error, segment string) error {
	if !errors.Is(err, ErrCorrupt) {
		return err
	}
	damaged := fmt.Errorf("%w: %w", ownership.ErrBucketDamaged, err)
	if s.broken.CompareAndSwap(nil, &damaged) {
		s.log.Error("dirstore: the bucket directory is damaged; every call on it fails from now on",
			slog.String("dir", s.dir), slog.String("segment", segment), slog.String("err", err.Error()))
	}
	return *s.broken.Load()
}

// brokenErr is the damage that ended the Store, or nil.
func (s *Store) brokenErr() error {
	if p := s.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// segPath is the path of the segment the Store is on ("" once closed). The
// caller holds mu.
func (s *Store) segPath() string {
	if s.seg == nil {
		return ""
	}
	return s.seg.path
}

func unknown(op, key string, err error) error {
	return fmt.Errorf("dirstore: %s %q: %w: %w", op, key, ownership.ErrUnknownOutcome, err)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
