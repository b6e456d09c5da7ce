package dirstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
)

// Compaction writes the live records of the segment into a new one and
// switches to it, so that the log holds what the keys hold now and not
// every version they ever had. A writer starts one after answering a batch
// that left the segment with more dead bytes than live ones and at least
// compactMin of them.
//
// A compaction copies while writes go on: it is a goroutine of its own,
// and copying the live records of a store of gigabytes takes longer than a
// lease may wait for a write. It copies the records the index names into
// a temporary file, without the write lock; then, in rounds, what was
// written meanwhile (a key written since its copy is copied again, a key
// deleted since gets a delete record), until a round copies little; then
// it takes the write lock, copies the last writes, and switches. Writes
// wait only for that last round, bounded by finalRound bytes. One
// compaction runs at a time in the directory: the compaction lock (a
// flock on dir/compacting) keeps other Stores from starting theirs, and
// from removing the temporary file as a crash's leftover. If the segment
// was replaced meanwhile (a suspect segment rewritten, or a compactor that
// takes no compaction lock), the switch finds it under the write lock and
// drops the copy.
//
// The switch, in order: the new segment (the copy renamed to the next
// sequence number; it holds a new salt) has been written and
// fdatasynced, and the directory is synced; `current` is replaced by
// rename and the directory synced; the old segment is unlinked. A crash before the rename leaves the old segment current and a
// stray new one, which the next Open removes; after it, the new one is
// complete and durable. Other Stores find the old segment unlinked at
// their next fstat and load the new one; a reader in the middle of a pread
// finishes it, the descriptor keeping the old file's blocks alive. If the
// compactor dies between rename and unlink, the next writer, which checks
// `current` under the lock, unlinks the old segment before it appends.
//
// Invariant: the old segment is unlinked only after a directory sync has
// made the rename durable. If that sync fails, the compactor follows the
// new segment (`current` names it) but leaves the old one linked, and no
// write lands until a sync succeeds (see settle): a crash could otherwise
// bring back a `current` naming the old segment, without the writes
// appended to the new one since. A writer of another Store that loads the
// new segment syncs the directory too before it appends, as it cannot
// know whether the compactor's sync succeeded.
//
// Compaction is also how a segment whose fdatasync failed (a suspect
// one, see markSuspect) is rewritten: the records are read back and
// written to a new segment, which is synced as a whole.

// compactFrameLen is the size at which compaction starts a new frame.
const compactFrameLen = 4 << 20

// compactSyncEvery is how many bytes a compaction copies between two
// fdatasyncs of its file, so that the kernel never holds much of it
// dirty: a writer's fdatasync would otherwise wait behind its writeback.
const compactSyncEvery = 32 << 20

// finalRound bounds the bytes copied under the write lock (a Store's
// compactRound; tests lower it): rounds without it go on until one
// copies less. maxRounds bounds the rounds, for writers that outrun the
// copy.
const (
	finalRound = 16 << 20
	maxRounds  = 8
)

// compactTmp names a compaction's file while it is written.
const compactTmp = "compact" + tmpSuffix

// compactingName is the file a compaction holds flocked.
const compactingName = "compacting"

// maybeCompact starts a compaction if the segment is worth it, or
// compacts at once if a failed sync of this Store's left it suspect. The
// caller holds the write lock. Errors leave the old segment in use and are
// not reported: no write depends on a compaction, and the next batch will
// try again once more garbage piles up (or at once, before it appends, if
// the segment is suspect; see prepareWrite).
func (s *Store) maybeCompact() {
	s.mu.RLock()
	sg := s.seg
	dead := sg.end - segHeaderLen - s.idx.live
	live := s.idx.live
	s.mu.RUnlock()
	if s.suspect == sg.name {
		if err := s.compact(); err != nil {
			s.compactAt.Store(dead + s.compactMin)
		} else {
			s.compactAt.Store(0)
		}
		return
	}
	if dead < max(s.compactMin, s.compactAt.Load()) || dead <= live || !s.compacting.CompareAndSwap(false, true) {
		return
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer s.compacting.Store(false)
		switch err := s.compactConcurrently(); {
		case err == nil:
			s.compactAt.Store(0)
		case !errors.Is(err, errCompactionBusy) && !errors.Is(err, ErrClosed):
			s.compactAt.Store(dead + s.compactMin)
		}
	}()
}

// errCompactionBusy: another Store holds the compaction lock, or the
// segment was switched under the compaction.
var errCompactionBusy = errors.New("another compaction switched segments or is running")

// compactConcurrently compacts the segment while writes go on (see the
// top of this file). The caller holds no lock.
func (s *Store) compactConcurrently() error {
	ok, err := tryLock(s.compactFile)
	if err != nil || !ok {
		return errors.Join(errCompactionBusy, err)
	}
	defer unlock(s.compactFile)
	c, err := s.newCopy()
	if err != nil {
		return err
	}
	defer c.close()
	for round := 0; ; round++ {
		if s.closed.Load() {
			return ErrClosed
		}
		n, err := c.round(s)
		if err != nil {
			return err
		}
		if n <= s.compactRound || round == maxRounds {
			break
		}
	}
	unlockFn, err := s.lock(context.Background())
	if err != nil {
		return err
	}
	defer unlockFn()
	s.mu.Lock()
	err = s.catchUp(true)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return c.finish(s)
}

// compact compacts the segment at once. The caller holds the write lock,
// so the segment does not change while it runs (other Stores only read
// it); this Store's readers go on meanwhile.
func (s *Store) compact() error {
	c, err := s.newCopy()
	if err != nil {
		return err
	}
	defer c.close()
	return c.finish(s)
}

// segCopy is a compaction under way: the new segment being written, and
// the version of each key it holds.
type segCopy struct {
	old *segment // the segment copied; its fd is this copy's own
	sg  *segment // the copy, named compactTmp… until the switch
	idx *index   // the copy's index
	fb  frameBuilder
	// unsynced: bytes written since the copy's last fdatasync.
	unsynced int64
	// moved maps the offset of each large record copied (one range reads
	// keep block sums for) to its offset in the copy, so that the sums
	// follow the records (sumCache.moved).
	moved    map[int64]int64
	datasync func(fd int, p string) error // the Store's
}

// newCopy starts a copy of the segment: an empty file with a new salt,
// and a descriptor of the segment of its own, so that a switch by someone
// else cannot close it under the copy.
func (s *Store) newCopy() (*segCopy, error) {
	s.mu.RLock()
	old := s.seg
	if old == nil {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	fd, err := dupFD(old.fd, old.path)
	own := *old
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	own.fd = fd
	salt := randomSalt()
	name := compactTmp + randomHex(8)
	if err := s.createSegment(name, appendSegHeader(nil, salt)); err != nil {
		closeFD(fd)
		return nil, err
	}
	p := s.path(name)
	nfd, err := openRW(p)
	if err != nil {
		closeFD(fd)
		_ = os.Remove(p)
		return nil, err
	}
	c := &segCopy{old: &own, idx: newIndex(), datasync: s.sys.datasync, moved: map[int64]int64{},
		sg: &segment{fd: nfd, path: p, name: name, seq: old.seq + 1, salt: salt, end: segHeaderLen}}
	c.fb.reset()
	return c, nil
}

// close releases the copy's descriptors and, unless it became the
// segment, removes its file.
func (c *segCopy) close() {
	closeFD(c.old.fd)
	if c.sg != nil {
		closeFD(c.sg.fd)
		_ = os.Remove(c.sg.path)
	}
}

// round copies what the index holds that the copy does not: every key
// whose version differs, and a delete record for every key the copy holds
// that the index does not. It returns the bytes it copied. It reads the
// index under mu for reading, and copies with no lock: records in the
// segment never change once the index names them.
func (c *segCopy) round(s *Store) (int64, error) {
	s.mu.RLock()
	if s.seg == nil || s.seg.name != c.old.name || s.seg.salt != c.old.salt {
		s.mu.RUnlock()
		return 0, errCompactionBusy
	}
	var todo []liveRecord
	for k, e := range s.idx.m {
		if have, ok := c.idx.m[k]; !ok || have.etag != e.etag {
			todo = append(todo, liveRecord{k, e})
		}
	}
	var gone []string
	for k := range c.idx.m {
		if _, ok := s.idx.m[k]; !ok {
			gone = append(gone, k)
		}
	}
	s.mu.RUnlock()
	// In segment order, so that the copy reads the old segment forward.
	slices.SortFunc(todo, func(a, b liveRecord) int { return cmp.Compare(a.e.off, b.e.off) })
	var n int64
	for _, lr := range todo {
		if s.closed.Load() {
			return n, ErrClosed
		}
		if err := c.copyRecord(lr); err != nil {
			return n, err
		}
		n += int64(lr.e.size)
	}
	for _, k := range gone {
		c.fb.add(kindDelete, k, newETagBits(), nil)
		c.idx.remove(k)
		n += int64(recordLen(k, 0))
	}
	return n, c.flush(true)
}

// copyRecord copies one record from the old segment, checked, into the
// frame being built.
func (c *segCopy) copyRecord(lr liveRecord) error {
	at := len(c.fb.buf)
	c.fb.buf = slices.Grow(c.fb.buf, int(lr.e.size))[:at+int(lr.e.size)]
	buf := c.fb.buf[at:]
	if err := preadFull(c.old.fd, c.old.path, buf, lr.e.off); err != nil {
		return err
	}
	if r, err := parseRecord(buf); err != nil || r.etag != lr.e.etag || string(r.key) != lr.key {
		return fmt.Errorf("%w: record of %q at offset %d", ErrCorrupt, lr.key, lr.e.off)
	}
	e := lr.e
	e.off = c.sg.end + int64(at)
	c.idx.put(lr.key, e)
	if e.bodyLen() > rangeWholeMax {
		c.moved[lr.e.off] = e.off
	}
	if len(c.fb.buf) >= compactFrameLen {
		return c.flush(false)
	}
	return nil
}

// flush appends the frame built so far to the copy, and fdatasyncs it
// every compactSyncEvery bytes, or now with sync.
func (c *segCopy) flush(sync bool) error {
	if !c.fb.empty() {
		frame := c.fb.finish(c.sg.salt)
		if err := pwriteFull(c.sg.fd, c.sg.path, frame, c.sg.end); err != nil {
			return err
		}
		c.sg.end += int64(len(frame))
		c.unsynced += int64(len(frame))
		c.fb.reset()
	}
	if c.unsynced == 0 || !sync && c.unsynced < compactSyncEvery {
		return nil
	}
	c.unsynced = 0
	return c.datasync(c.sg.fd, c.sg.path)
}

// finish copies the last writes and switches to the copy. The caller
// holds the write lock, and its index has caught up with the segment.
func (c *segCopy) finish(s *Store) error {
	if _, err := c.round(s); err != nil { // syncs the copy
		return err
	}
	name := segName(c.sg.seq)
	p := s.path(name)
	if err := os.Rename(c.sg.path, p); err != nil {
		return err
	}
	c.sg.path, c.sg.name = p, name
	err := s.sys.syncDir(s.dir)
	if err == nil {
		err = s.createSegment(currentName+tmpSuffix+"compact", []byte(name+"\n"))
	}
	if err == nil {
		err = os.Rename(s.path(currentName+tmpSuffix+"compact"), s.path(currentName))
	}
	if err != nil {
		_ = os.Remove(p)
		return fmt.Errorf("compact %s: %w", c.old.path, err)
	}
	sg, idx, old := c.sg, c.idx, c.old
	c.sg = nil // the segment now; close leaves it be
	// From here on `current` names the new segment; this Store follows
	// it whatever fails next.
	syncErr := s.sys.syncDir(s.dir)
	ino, inoErr := inode(s.path(currentName))
	sg.currentIno = ino
	// Invariant: the swap comes before the unlink. This Store's readers
	// load the segment `current` names when they find theirs unlinked;
	// they must find the new one in place by then, not close the old one
	// under the compactor's feet.
	s.mu.Lock()
	closeFD(s.seg.fd)
	s.seg, s.idx = sg, idx
	s.unsynced = false // every record of the new segment is synced
	// The copy checked each record it copied, byte for byte the same:
	// the block sums range reads took of them hold in the copy too.
	s.sums.moved(old, sg, c.moved)
	s.mu.Unlock()
	// The old segment is no longer current, so no write will be appended
	// to it: whatever suspicion it was under is over.
	if old.name == s.suspect {
		s.suspect = ""
	}
	// A suspect file left behind names a segment that is not current,
	// and the next writer removes it (see suspected).
	_ = os.Remove(s.path(suspectName))
	if syncErr != nil {
		// The old segment stays linked, and writes wait, until a directory
		// sync succeeds (see settle).
		s.dirUnsynced, s.staleSegments = true, true
		return fmt.Errorf("compact %s: %w", old.path, errors.Join(syncErr, inoErr))
	}
	if err := s.sys.remove(old.path); err != nil && !isNotExist(err) {
		s.staleSegments = true
	}
	if inoErr != nil {
		return fmt.Errorf("compact %s: %w", old.path, inoErr)
	}
	return nil
}

// liveRecord is a key's current entry, as a compaction copies it.
type liveRecord struct {
	key string
	e   entry
}
