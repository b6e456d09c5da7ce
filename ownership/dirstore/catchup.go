package dirstore

import (
	"errors"
	"fmt"
	"log/slog"
)

// Catching up: a Store's index reflects its segment up to seg.end. Other
// Stores (in this process or others) append frames after that, and a
// compaction replaces the segment. Every call looks before it answers:
// an fstat of the segment says whether it grew (read the new frames) or
// was unlinked (a compaction replaced it: load the new one). A writer,
// holding the lock, also checks `current`, in case a compactor died
// between switching segments and unlinking the old one.

// catchUp brings the index up to date. The caller holds mu for writing;
// with writer, it also holds the write lock.
func (s *Store) catchUp(writer bool) error {
	sg := s.seg
	if sg == nil {
		return ErrClosed
	}
	st, err := fstat(sg.fd, sg.path)
	if err != nil {
		return err
	}
	switched := !st.linked
	if writer && !switched {
		ino, err := inode(s.path(currentName))
		if isNotExist(err) {
			return fmt.Errorf("%w: %s is missing", ErrCorrupt, s.path(currentName))
		}
		if err != nil {
			return err
		}
		switched = ino != sg.currentIno
	}
	switch {
	case switched:
		return s.load(writer)
	case st.size < sg.end:
		return fmt.Errorf("%w: %s shrank from %d to %d bytes", ErrCorrupt, sg.path, sg.end, st.size)
	case st.size == sg.end:
		return nil
	}
	return s.follow(st.size, writer)
}

// fresh reports, for a reader holding mu for reading, whether the index
// is up to date: the segment is still linked, and has not grown since the
// index last caught up with it.
func (s *Store) fresh() (bool, error) {
	sg := s.seg
	if sg == nil {
		return false, ErrClosed
	}
	st, err := fstat(sg.fd, sg.path)
	if err != nil {
		return false, err
	}
	return st.linked && st.size == sg.end, nil
}

// maxLoadAttempts bounds how often load follows `current` to a segment
// that a compaction replaced before it could be opened.
const maxLoadAttempts = 8

// load opens the segment `current` names and reads it whole into a new
// index, replacing the Store's. The caller holds mu for writing. A writer
// (holding the write lock as well) also cuts off a torn tail, and leaves
// settle to do before any write lands in this segment: sync the directory,
// since the compaction that made it current may have failed to, and remove
// every other segment, so that a reader still on an old one finds it
// unlinked.
func (s *Store) load(writer bool) error {
	missing := "" // the segment `current` named last time, found missing
	for range maxLoadAttempts {
		name, ino, err := s.readCurrent()
		if err != nil {
			return err
		}
		sg, size, err := s.openSegment(name, ino)
		if isNotExist(err) && !writer && name != missing {
			// Replaced by a compaction since `current` was read: `current`
			// names another one now. (A compaction switches `current`
			// before it unlinks the old segment, so a `current` that still
			// names a missing segment when read again names a lost one.)
			missing = name
			continue
		}
		if isNotExist(err) {
			return fmt.Errorf("%w: %s names %s, which is missing", ErrCorrupt, s.path(currentName), s.path(name))
		}
		if err != nil {
			return err
		}
		if sg == nil {
			continue // unlinked since it was opened
		}
		old, oldIdx := s.seg, s.idx
		s.seg, s.idx = sg, newIndex()
		if err := s.follow(size, writer); err != nil {
			s.seg, s.idx = old, oldIdx
			closeFD(sg.fd)
			return err
		}
		if old != nil {
			closeFD(old.fd)
		}
		s.unsynced = true
		if writer {
			s.dirUnsynced, s.staleSegments = true, true
		}
		return nil
	}
	return fmt.Errorf("segments switched %d times while one was being opened", maxLoadAttempts)
}

// openSegment opens the segment name and checks its header. It returns a
// nil segment if the file is no longer linked.
func (s *Store) openSegment(name string, currentIno uint64) (*segment, int64, error) {
	seq, _ := parseSegName(name)
	p := s.path(name)
	fd, err := openRW(p)
	if err != nil {
		return nil, 0, err
	}
	st, err := fstat(fd, p)
	if err == nil && !st.linked {
		closeFD(fd)
		return nil, 0, nil
	}
	h := make([]byte, segHeaderLen)
	if err == nil {
		err = preadFull(fd, p, h, 0)
	}
	var salt uint64
	if err == nil {
		salt, err = parseSegHeader(h)
	}
	if errors.Is(err, errShortFile) {
		err = fmt.Errorf("%w: %s: %w", ErrCorrupt, p, err)
	}
	if err != nil {
		closeFD(fd)
		return nil, 0, err
	}
	return &segment{fd: fd, path: p, name: name, seq: seq, salt: salt, currentIno: currentIno, end: segHeaderLen}, st.size, nil
}

// follow applies the whole frames between seg.end and size. A writer
// also deals with what follows the last whole frame (see cutTail).
func (s *Store) follow(size int64, writer bool) error {
	sg := s.seg
	end, st, err := sg.scan(sg.end, size, s.applyFrame)
	if end > sg.end {
		s.unsynced = true
		sg.end = end
	}
	if err != nil || st == nil || !writer {
		return err
	}
	return s.cutTail(st, size)
}

// cutTail deals with bytes after the last whole frame, found by a writer
// holding the lock. No one is appending, so they are a write cut short (a
// crash, or a pwrite that failed part way), which is cut off; or damage,
// which a crash cannot cause: a frame that fails its checksum though whole
// frames follow it. If the sync after the cut fails, the segment is
// suspect (see markSuspect), and the next append waits for its rewrite.
func (s *Store) cutTail(st *stop, size int64) error {
	sg := s.seg
	damaged := st.complete && st.frameEnd < size
	if !st.complete {
		found, err := sg.wholeFrameAfter(st.at, size)
		if err != nil {
			return err
		}
		damaged = found
	}
	if damaged {
		return fmt.Errorf("%w: %s: the bytes at offset %d are not a whole frame, yet whole frames follow them; "+
			"a crash cannot leave that, so the store will not guess what was lost "+
			"(restore the directory, or truncate the segment to %d bytes to drop everything from there)",
			ErrCorrupt, sg.path, st.at, st.at)
	}
	if err := ftruncate(sg.fd, sg.path, st.at); err != nil {
		return err
	}
	// Nothing cut here was ever acknowledged; but a segment cut short by
	// other means while no Store had it open also ends in a torn frame, so
	// the bytes dropped are worth a person's look.
	s.log.Warn("dirstore: cut off a torn tail: bytes after the last whole frame, left by a write cut short",
		slog.String("segment", sg.path), slog.Int64("offset", st.at), slog.Int64("bytes", size-st.at))
	if err := s.sys.datasync(sg.fd, sg.path); err != nil {
		return s.syncFailed(sg, err)
	}
	return nil
}

// applyFrame applies a whole frame's records to the index, all or none.
func (s *Store) applyFrame(off int64, payload []byte) error {
	type placed struct {
		at int
		r  record
	}
	var recs []placed
	err := parseRecords(payload, func(at int, r record) { recs = append(recs, placed{at, r}) })
	if err != nil {
		return fmt.Errorf("%s: frame at offset %d: %w", s.seg.path, off, err)
	}
	for _, p := range recs {
		s.applyRecord(off+frameHeaderLen+int64(p.at), p.r.kind, string(p.r.key), p.r.etag, len(p.r.body))
	}
	return nil
}

// applyRecord applies one record, at off in the segment, to the index.
func (s *Store) applyRecord(off int64, kind byte, key string, etag etagBits, bodyLen int) {
	if kind == kindDelete {
		s.idx.remove(key)
		return
	}
	size := recordLen(key, bodyLen)
	s.idx.put(key, entry{off: off, size: uint32(size), keyLen: uint16(len(key)), etag: etag})
}

// syncIfUnsynced makes frames other Stores appended durable before the
// caller, a writer holding the lock, answers a write checked against them.
// If the sync fails they stay unsynced, and the segment suspect (see
// syncFailed).
func (s *Store) syncIfUnsynced() error {
	if !s.unsynced {
		return nil
	}
	if err := s.sys.datasync(s.seg.fd, s.seg.path); err != nil {
		return s.syncFailed(s.seg, err)
	}
	s.unsynced = false
	return nil
}

// syncFailed deals with a failed fdatasync of sg, for a writer holding the
// lock that answers no write on it: sg is suspect from then on, and no
// write is appended to it before a rewrite (see markSuspect). Once the
// suspicion is recorded the failure is the next writer's to deal with, so
// syncFailed returns nil; it returns an error only if the suspect file
// could not be written, since other Stores would then not know.
func (s *Store) syncFailed(sg *segment, err error) error {
	if merr := s.markSuspect(sg); merr != nil {
		return errors.Join(err, merr)
	}
	return nil
}
