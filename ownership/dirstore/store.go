package dirstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Layout of a store directory.
const (
	objectsDir = "objects" // the object tree (see keypath.go)
	tmpDir     = "tmp"     // one session directory per open Store
	lockName   = "lock"    // flocked around every write
	formatName = "format"  // formatText, so a future layout can tell
	formatText = "wasmkeep dirstore 1\n"
)

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("dirstore: store closed")

// errCorrupt marks an object file that is not what this package writes.
var errCorrupt = errors.New("corrupt object file")

// errBadCondition marks a condition a call cannot take (CreateOnly on a
// delete, or an unknown kind). OutcomeOf classifies it as Failed.
var errBadCondition = errors.New("invalid condition")

// Store is an ownership.Bucket in one local directory. See the package doc.
type Store struct {
	// dir is the store's directory as an absolute, clean path; objects
	// is dir/objects. All paths the Store uses are built from them, so
	// that each file operation is one system call however deep the key,
	// and a later change of working directory does not matter.
	dir     string
	objects string

	// sem is the in-process half of the write lock: a one-slot semaphore
	// rather than a sync.Mutex so that waiting for it honours a context.
	sem chan struct{}
	// lockFile is the cross-process half: flocked while sem is held.
	lockFile *os.File

	// session is this Store's directory under tmp/, holding its temp
	// files; sessionDir keeps it open and flocked for the Store's life so
	// that other processes' cleanups leave it alone.
	session    string
	sessionDir *os.File
	seq        atomic.Uint64

	// committer batches Puts (see commit.go).
	committer committer
	// syncDirs makes the entries of a batch's directories durable:
	// syncDirsParallel, or a stand-in that tests use to fail or watch it.
	syncDirs func(dirs []string) error
	// serialCommits makes each Put commit alone under the lock, on its own
	// goroutine, exactly as before group commit; benchmarks compare the two.
	serialCommits bool

	closed atomic.Bool
}

var _ ownership.Bucket = (*Store)(nil)

// maxDirLen bounds the length of a store's directory path so that the
// longest path any valid key needs beneath it stays within PATH_MAX. Where
// PATH_MAX is too small for that whatever the directory (1,024 bytes on
// macOS and the BSDs), maxDirLen is negative, Open does not check, and keys
// whose path would not fit are refused by the system with ENAMETOOLONG.
const maxDirLen = pathMax - 1 - len("/"+objectsDir+"/") - maxKeyPathLen

// Open opens the store in dir, creating the directory if needed, and
// removes temp files that Stores which are no longer open left behind.
// Several Stores, in one process or several, may have one directory open
// at once.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("dirstore: open %s: %w", dir, err)
	}
	if maxDirLen > 0 && len(abs) > maxDirLen {
		return nil, fmt.Errorf("dirstore: open %s: path of %d bytes, over %d: the longest keys would not fit", dir, len(abs), maxDirLen)
	}
	if err := os.MkdirAll(abs, 0o777); err != nil {
		return nil, fmt.Errorf("dirstore: create %s: %w", dir, err)
	}
	s := &Store{dir: abs, objects: abs + "/" + objectsDir, sem: make(chan struct{}, 1), syncDirs: syncDirsParallel}
	if err := s.open(); err != nil {
		s.release()
		return nil, fmt.Errorf("dirstore: open %s: %w", dir, err)
	}
	return s, nil
}

func (s *Store) path(name string) string { return s.dir + "/" + name }

func (s *Store) open() error {
	created := false
	for _, d := range []string{objectsDir, tmpDir} {
		err := os.Mkdir(s.path(d), 0o777)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		created = created || err == nil
	}
	f, err := os.OpenFile(s.path(lockName), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return err
	}
	s.lockFile = f
	if created {
		if err := syncDir(s.dir); err != nil {
			return err
		}
	}

	unlock, err := s.lock(context.Background())
	if err != nil {
		return err
	}
	err = s.checkFormat()
	if err == nil {
		err = s.cleanTmp()
	}
	unlock()
	if err != nil {
		return err
	}
	return s.startSession()
}

// checkFormat writes the format marker into a new store directory and
// refuses a directory written in another format. The caller holds the lock,
// so two processes opening a new directory at once write it once.
func (s *Store) checkFormat() error {
	data, err := os.ReadFile(s.path(formatName))
	if err == nil {
		if string(data) != formatText {
			return fmt.Errorf("unknown format %q (want %q)", strings.TrimSpace(string(data)), strings.TrimSpace(formatText))
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tmp := s.path(tmpDir + "/" + formatName + "-" + randomHex(8))
	if err := writeFileSync(tmp, []byte(formatText)); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path(formatName)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(s.dir)
}

// cleanTmp removes what closed or crashed Stores left under tmp/: session
// directories whose flock nobody holds, and loose files (format markers
// being written, under the lock the caller holds, are the only loose files
// a Store creates).
func (s *Store) cleanTmp() error {
	tmp := s.path(tmpDir)
	d, err := os.Open(tmp)
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		p := tmp + "/" + name
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // another Store cleaned it meanwhile
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		if err := cleanSession(p); err != nil {
			return err
		}
	}
	return nil
}

// cleanSession removes one session directory if its Store is gone. A live
// Store holds the directory's flock from just after creating it until it is
// closed; the race between creating and locking is settled in startSession.
func cleanSession(p string) error {
	d, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	ok, err := tryLock(d)
	if err != nil || !ok {
		return err
	}
	// Holding the lock: the owner is gone, and no new owner can take the
	// directory until it is removed (startSession checks it still exists).
	return os.RemoveAll(p)
}

// startSession creates and locks this Store's temp directory.
func (s *Store) startSession() error {
	const attempts = 8
	for range attempts {
		p := s.path(tmpDir + "/" + randomHex(16))
		if err := os.Mkdir(p, 0o777); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return err
		}
		d, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // cleaned by another Store before we could lock it
		}
		if err != nil {
			return err
		}
		if err := waitLock(d); err != nil {
			d.Close()
			return err
		}
		// Another Store's cleanup may have taken the lock between Mkdir
		// and waitLock, found the directory unowned and removed it. Only a
		// directory still in place after we hold its lock is ours to keep.
		held, err1 := d.Stat()
		there, err2 := os.Lstat(p)
		if err1 == nil && err2 == nil && os.SameFile(held, there) {
			s.session, s.sessionDir = p, d
			return nil
		}
		d.Close()
		if err1 != nil {
			return err1
		}
		if err2 != nil && !errors.Is(err2, fs.ErrNotExist) {
			return err2
		}
	}
	return fmt.Errorf("no temp directory after %d attempts", attempts)
}

// Close waits for writes in flight (including one whose caller gave up
// while it waited for another process to release the lock), removes the
// Store's temp directory and releases its files. Calls after Close return ErrClosed; calls racing with
// Close may fail with ErrClosed or an I/O error, and never damage the store.
func (s *Store) Close() error {
	s.sem <- struct{}{}
	if s.closed.Swap(true) {
		<-s.sem
		return ErrClosed
	}
	<-s.sem
	var errs []error
	if s.session != "" {
		errs = append(errs, os.RemoveAll(s.session))
	}
	errs = append(errs, s.release())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dirstore: close %s: %w", s.dir, err)
	}
	return nil
}

func (s *Store) release() error {
	var errs []error
	if s.sessionDir != nil {
		errs = append(errs, s.sessionDir.Close())
	}
	if s.lockFile != nil {
		errs = append(errs, s.lockFile.Close())
	}
	return errors.Join(errs...)
}

// Dir returns the directory the Store was opened on.
func (s *Store) Dir() string { return s.dir }

// lock takes the write lock: first the in-process semaphore, then the
// flock. It honours ctx while waiting for either.
func (s *Store) lock(ctx context.Context) (unlockFn func(), err error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.closed.Load() {
		<-s.sem
		return nil, ErrClosed
	}
	release := func() {
		// An unlock error would leave the flock with our own open file,
		// where the next lock takes it over; there is nothing better to
		// do with it.
		_ = unlock(s.lockFile)
		<-s.sem
	}
	ok, err := tryLock(s.lockFile)
	if err != nil {
		<-s.sem
		return nil, err
	}
	if ok {
		return release, nil
	}
	// Another Store (in this process or another) holds the lock. flock
	// cannot be interrupted, so wait for it in a goroutine and stop waiting
	// when ctx ends.
	done := make(chan error, 1)
	go func() { done <- waitLock(s.lockFile) }()
	select {
	case err := <-done:
		if err != nil {
			<-s.sem
			return nil, err
		}
		return release, nil
	case <-ctx.Done():
		// The waiting flock keeps the semaphore until it returns, so no
		// other goroutine of this Store touches the lock file meanwhile.
		go func() {
			if err := <-done; err == nil {
				_ = unlock(s.lockFile)
			}
			<-s.sem
		}()
		return nil, ctx.Err()
	}
}

func unknown(op, key string, err error) error {
	return fmt.Errorf("dirstore: %s %q: %w: %w", op, key, ownership.ErrUnknownOutcome, err)
}

func (s *Store) objectPath(key string) string { return s.objects + "/" + keyPath(key) }

// isNotExist reports an error meaning "no such object". ENOTDIR cannot
// arise from paths keyPath makes (kinds keep files and directories apart)
// but would mean the same if someone put a file where a directory goes.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// Get reads an object; see ownership.Bucket.
func (s *Store) Get(ctx context.Context, key string) (ownership.Object, error) {
	if err := ownership.ValidateKey(key); err != nil {
		return ownership.Object{}, fmt.Errorf("dirstore: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return ownership.Object{}, unknown("get", key, err)
	}
	if s.closed.Load() {
		return ownership.Object{}, ErrClosed
	}
	// Invariant: object files are never written in place, only renamed
	// over, so whatever file this opens is complete.
	p := s.objectPath(key)
	data, _, err := readFile(p, -1)
	if isNotExist(err) {
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %w", key, ownership.ErrNotFound)
	}
	if err != nil {
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %w", key, err)
	}
	obj, err := parseObject(data)
	if err != nil {
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %s: %w", key, p, err)
	}
	return obj, nil
}

// Put writes an object under a condition; see ownership.Bucket.
//
// The body goes to a temp file and is fsynced before anything else, so
// writers overlap their slowest step. Then the write joins a group commit
// (commit.go): under the lock, with the other writes queued meanwhile, its
// condition is checked and the file renamed into place; the directories of
// the whole batch are synced before the lock is released, so no one acts on
// a version a crash could undo; and only then does Put return.
func (s *Store) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	if err := ownership.ValidateKey(key); err != nil {
		return "", fmt.Errorf("dirstore: put: %w", err)
	}
	if cond.Kind > ownership.ReplaceOnly {
		return "", fmt.Errorf("dirstore: put %q with %s: %w", key, cond, errBadCondition)
	}
	if err := ctx.Err(); err != nil {
		return "", unknown("put", key, err)
	}
	if s.closed.Load() {
		return "", ErrClosed
	}
	etag := newETag()
	tmp, err := s.writeTemp(etag, body)
	if err != nil {
		return "", fmt.Errorf("dirstore: put %q: %w", key, err)
	}
	c := &commit{ctx: ctx, key: key, tmp: tmp, path: s.objectPath(key), cond: cond, done: make(chan struct{})}
	err = s.commit(ctx, c)
	// An abandoned commit is never touched by the committer again, and
	// the others are answered: c.renamed is settled either way.
	if !c.renamed {
		_ = os.Remove(tmp)
	}
	if c.old != nil {
		c.old()
	}
	if err != nil {
		return "", err
	}
	return etag, nil
}

// place renames the temp file tmp to the object file p, first making p's
// directories if they are missing. It returns the directories whose entries
// it changed by making directories, which the caller must sync (as well as
// p's own directory, if the rename succeeded).
func (s *Store) place(tmp, p string) (created []string, err error) {
	err = os.Rename(tmp, p)
	if !isNotExist(err) {
		return nil, err
	}
	// First object under this directory, or a delete pruned it.
	created, err = s.makeParents(path.Dir(p))
	if err != nil {
		return created, err
	}
	return created, os.Rename(tmp, p)
}

// writeTemp writes a complete object file into the session directory and
// fsyncs it.
func (s *Store) writeTemp(etag ownership.ETag, body []byte) (string, error) {
	name := s.session + "/" + strconv.FormatUint(s.seq.Add(1), 10)
	var err error
	if len(body) <= 64<<10 {
		// One write system call for small objects, the common case.
		data := appendHeader(make([]byte, 0, headerLen+len(body)), etag, body)
		err = writeFileSync(name, append(data, body...))
	} else {
		// Large ones are not copied to put the header in front.
		err = writeFileSync(name, appendHeader(make([]byte, 0, headerLen), etag, body), body)
	}
	if err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}

// admit checks a write's condition against the object at p. The caller
// holds the lock.
func (s *Store) admit(op, key, p string, cond ownership.Condition) error {
	switch cond.Kind {
	case ownership.CreateOnly:
		_, err := os.Lstat(p)
		if err == nil {
			return fmt.Errorf("dirstore: %s %q (%s): key exists: %w", op, key, cond, ownership.ErrPrecondition)
		}
		if !isNotExist(err) {
			return fmt.Errorf("dirstore: %s %q: %w", op, key, err)
		}
	case ownership.ReplaceOnly:
		cur, err := currentETag(p)
		if isNotExist(err) {
			return fmt.Errorf("dirstore: %s %q (%s): key absent: %w", op, key, cond, ownership.ErrPrecondition)
		}
		if err != nil {
			return fmt.Errorf("dirstore: %s %q: %w", op, key, err)
		}
		if cur != cond.ETag {
			return fmt.Errorf("dirstore: %s %q (%s): holds %s: %w", op, key, cond, cur, ownership.ErrPrecondition)
		}
	}
	return nil
}

func currentETag(p string) (ownership.ETag, error) {
	etag, _, err := readHeader(p)
	return etag, err
}

// readHeader returns the ETag and the file size of the object file p.
func readHeader(p string) (ownership.ETag, int64, error) {
	h, size, err := readFile(p, headerLen)
	if err != nil {
		return "", 0, err
	}
	etag, _, err := parseHeader(h)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", p, err)
	}
	return etag, size, nil
}

// makeParents creates the directories of dir that are missing and
// returns the parents of those it created, which the caller must fsync
// before acknowledging a write beneath them, so that the new object's path
// survives a crash too. (Syncing them with the rest of a batch lets one
// file-system journal commit carry them all.) The caller holds the lock, so
// no delete prunes them meanwhile, and syncs them before releasing it.
//
// Assumption: a directory that exists is durable. That fails only if a
// process died holding the lock between its Mkdir and the sync, or that
// sync failed, and the machine then crashed before the file system
// committed that Mkdir on its own (ext4 commits every few seconds, and with
// any later fsync). Syncing every ancestor on every write would close that
// gap at the cost of one fsync per path component.
func (s *Store) makeParents(dir string) ([]string, error) {
	rel, ok := strings.CutPrefix(dir, s.objects+"/")
	if !ok {
		return nil, nil // the objects directory itself, which Open made
	}
	var parents []string
	for i := 0; i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		d := s.objects + "/" + rel[:i]
		err := os.Mkdir(d, 0o777)
		if err == nil {
			parents = append(parents, path.Dir(d))
		} else if !errors.Is(err, fs.ErrExist) {
			return parents, err
		}
	}
	return parents, nil
}

// Delete removes an object under a condition; see ownership.Bucket.
func (s *Store) Delete(ctx context.Context, key string, cond ownership.Condition) error {
	if err := ownership.ValidateKey(key); err != nil {
		return fmt.Errorf("dirstore: delete: %w", err)
	}
	if cond.Kind != ownership.Unconditional && cond.Kind != ownership.ReplaceOnly {
		return fmt.Errorf("dirstore: delete %q with %s: %w", key, cond, errBadCondition)
	}
	if err := ctx.Err(); err != nil {
		return unknown("delete", key, err)
	}
	if s.closed.Load() {
		return ErrClosed
	}
	unlockFn, err := s.lock(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return unknown("delete", key, err)
		}
		return fmt.Errorf("dirstore: delete %q: %w", key, err)
	}
	defer unlockFn()
	if err := ctx.Err(); err != nil {
		return unknown("delete", key, err)
	}
	p := s.objectPath(key)
	if err := s.admit("delete", key, p, cond); err != nil {
		return err
	}
	err = os.Remove(p)
	if isNotExist(err) {
		return nil // unconditional delete of a missing key lands, as in S3
	}
	if err != nil {
		return fmt.Errorf("dirstore: delete %q: %w", key, err)
	}
	if err := syncDir(path.Dir(p)); err != nil {
		return unknown("delete", key, err)
	}
	s.prune(path.Dir(p))
	return nil
}

// prune removes the directories of a deleted object that are now empty, so
// that deleted keys do not slow listings down forever. The caller holds
// the lock. Failures are ignored: an empty directory left behind is
// harmless, and the object itself is already gone.
func (s *Store) prune(dir string) {
	for ; len(dir) > len(s.objects); dir = path.Dir(dir) {
		if os.Remove(dir) != nil {
			return // the common case: the directory still holds other objects
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand.Read panics instead)
	return hex.EncodeToString(b)
}
