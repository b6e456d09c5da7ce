package dirstore

import (
	"errors"
	"fmt"
	"os"
)

// Compaction writes the live records of the segment into a new one and
// switches to it, so that the log holds what the keys hold now and not
// every version they ever had. A writer compacts, under the write lock,
// after answering a batch that left the segment with more dead bytes than
// live ones and at least compactMin of them.
//
// The switch, in order: the new segment (named with the next sequence
// number, holding a new salt) is written and fdatasynced; `current` is
// replaced by rename and the directory synced; the old segment is
// unlinked. A crash before the rename leaves the old segment current and a
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

// maybeCompact compacts the segment if it is worth it, or if a failed
// sync of this Store's left it suspect. The caller holds the write lock.
// Errors leave the old segment in use and are not reported: no write
// depends on a compaction, and the next batch will try again once more
// garbage piles up (or at once, before it appends, if the segment is
// suspect; see prepareWrite).
func (s *Store) maybeCompact() {
	s.mu.RLock()
	sg := s.seg
	dead := sg.end - segHeaderLen - s.idx.live
	live := s.idx.live
	s.mu.RUnlock()
	due := dead >= max(s.compactMin, s.compactAt) && dead > live
	if !due && s.suspect != sg.name {
		return
	}
	if err := s.compact(); err != nil {
		s.compactAt = dead + s.compactMin
		return
	}
	s.compactAt = 0
}

// liveRecord is a key's current entry, as a compaction copies it.
type liveRecord struct {
	key string
	e   entry
}

// compact writes the live records to a new segment and switches to it.
// The caller holds the write lock, so the segment does not change while it
// runs (other Stores only read it); the index is read under mu, and
// replaced under mu, so this Store's readers go on meanwhile.
func (s *Store) compact() error {
	s.mu.Lock()
	old := s.seg
	keys := s.idx.sorted()
	recs := make([]liveRecord, len(keys))
	for i, k := range keys {
		recs[i] = liveRecord{k, s.idx.m[k]}
	}
	s.mu.Unlock()

	name := segName(old.seq + 1)
	sg, idx, err := s.writeSegment(old, name, recs)
	if err != nil {
		_ = os.Remove(s.path(name))
		return fmt.Errorf("compact %s: %w", old.path, err)
	}
	if err := os.Rename(s.path(currentName+tmpSuffix+"compact"), s.path(currentName)); err != nil {
		closeFD(sg.fd)
		_ = os.Remove(s.path(name))
		return fmt.Errorf("compact %s: %w", old.path, err)
	}
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
	closeFD(old.fd)
	s.seg, s.idx = sg, idx
	s.unsynced = false // every record of the new segment is synced
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

// writeSegment writes the records recs, read from old, into the new
// segment name and fdatasyncs it, then writes the temp file that will
// become `current`. It returns the open segment and its index.
func (s *Store) writeSegment(old *segment, name string, recs []liveRecord) (*segment, *index, error) {
	salt := randomSalt()
	if err := s.createSegment(name, appendSegHeader(nil, salt)); err != nil {
		return nil, nil, err
	}
	seq, _ := parseSegName(name)
	p := s.path(name)
	fd, err := openRW(p)
	if err != nil {
		return nil, nil, err
	}
	sg := &segment{fd: fd, path: p, name: name, seq: seq, salt: salt, end: segHeaderLen}
	idx, err := s.copyRecords(old, sg, recs)
	if err == nil {
		err = s.sys.datasync(fd, p)
	}
	if err == nil {
		err = s.createSegment(currentName+tmpSuffix+"compact", []byte(name+"\n"))
	}
	if err != nil {
		closeFD(fd)
		return nil, nil, err
	}
	return sg, idx, nil
}

// copyRecords appends recs, read from old and checked, to sg in frames of
// about compactFrameLen bytes, and returns the index of sg.
func (s *Store) copyRecords(old, sg *segment, recs []liveRecord) (*index, error) {
	idx := &index{m: make(map[string]entry, len(recs)), keys: make([]string, 0, len(recs))}
	var fb frameBuilder
	fb.reset()
	flush := func() error {
		if fb.empty() {
			return nil
		}
		frame := fb.finish(sg.salt)
		if err := pwriteFull(sg.fd, sg.path, frame, sg.end); err != nil {
			return err
		}
		sg.end += int64(len(frame))
		fb.reset()
		return nil
	}
	for _, lr := range recs {
		buf := make([]byte, lr.e.size)
		if err := preadFull(old.fd, old.path, buf, lr.e.off); err != nil {
			return nil, err
		}
		if r, err := parseRecord(buf); err != nil || r.etag != lr.e.etag || string(r.key) != lr.key {
			return nil, fmt.Errorf("%w: record of %q at offset %d", ErrCorrupt, lr.key, lr.e.off)
		}
		e := lr.e
		e.off = sg.end + int64(len(fb.buf))
		fb.buf = append(fb.buf, buf...)
		idx.m[lr.key] = e
		idx.keys = append(idx.keys, lr.key)
		idx.live += int64(e.size)
		if len(fb.buf) >= compactFrameLen {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	return idx, flush()
}
