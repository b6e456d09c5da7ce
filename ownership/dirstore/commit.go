package dirstore

import (
	"context"
	"fmt"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/internal/groupcommit"
)

// Group commit: Put and Delete go through the Store's queue of writes
// (ownership/internal/groupcommit), which commits a lone write on its
// caller's goroutine and queued writes in batches. Under the write lock
// a batch catches up with the segment, checks each write's condition in
// queue order (against the index, and against earlier writes of the same
// batch), appends the records of those that pass as one frame with one
// pwrite, fdatasyncs the segment, and only then answers every write of
// the batch.

// maxBatchBytes bounds the records of one batch (a single larger write is
// a batch of its own), and so the frame held in memory.
const maxBatchBytes = 8 << 20

// smallWrite is the size up to which a queued write goes into the next
// batch ahead of bigger ones that queued before it.
const smallWrite = 64 << 10

// write is one Put or Delete waiting to be committed.
type write struct {
	groupcommit.Write

	ctx  context.Context
	op   string // "put" or "delete", for errors
	kind byte
	key  string
	body []byte
	cond ownership.Condition
	etag etagBits

	// Set by the batch for a claimed write, read by its caller once it
	// is answered.
	err error
	// decided: the answer rests on what the batch read or wrote, so a
	// failed sync makes it unknown.
	decided bool
}

func (w *write) size() int { return recordLen(w.key, len(w.body)) }

func (w *write) fail(err error) error { return fmt.Errorf("dirstore: %s %q: %w", w.op, w.key, err) }

// commit commits w and returns its answer. If ctx ends while w is queued,
// w is abandoned: the caller learns ErrUnknownOutcome and nothing is
// written. Once claimed, w runs to completion whatever ctx does, and its
// caller waits for the answer.
func (s *Store) commit(ctx context.Context, w *write) error {
	switch s.committer.Commit(ctx, w) {
	case groupcommit.Abandoned:
		return unknown(w.op, w.key, ctx.Err())
	case groupcommit.Claimed:
		w.Wait()
	}
	return w.err
}

// commitBatch commits a batch under one hold of the write lock, with one
// pwrite and one fdatasync, then answers every write in it. ctx bounds
// only the wait for the lock. Before letting the lock go it compacts the
// segment, if the batch left enough garbage.
func (s *Store) commitBatch(ctx context.Context, batch []*write) {
	unlockFn, err := s.lock(ctx)
	if err != nil {
		for _, w := range batch {
			if !w.Claim() {
				continue
			}
			if ctx.Err() != nil {
				w.err = unknown(w.op, w.key, err)
			} else {
				w.err = w.fail(err)
			}
		}
		return
	}
	defer unlockFn()
	caughtUp := s.runBatch(batch)
	// Callers waiting in the queue are answered before the compaction,
	// not after it (a lone write's caller runs it).
	groupcommit.Answer(batch)
	// Invariant: only a Store whose index holds every whole frame of the
	// segment compacts it; one that could not catch up (damage, say)
	// would drop the writes it did not see.
	if caughtUp {
		s.maybeCompact()
	}
}

// runBatch does a batch's work. The caller holds the write lock. It
// reports whether the index caught up with the segment.
func (s *Store) runBatch(batch []*write) bool {
	if err := s.prepareWrite(); err != nil {
		s.mu.RLock()
		err = s.fatal(err, s.segPath())
		s.mu.RUnlock()
		for _, w := range batch {
			if w.Claim() {
				w.err = w.fail(err)
			}
		}
		return false
	}
	s.mu.Lock()
	appended := s.appendBatch(batch)
	sg := s.seg
	mustSync := appended || s.unsynced
	s.unsynced = false
	s.mu.Unlock()
	if !mustSync {
		return true
	}
	// The frame is visible now (see doc.go, Visibility); the lock, held
	// until the sync is done, keeps every other writer from acting on it
	// before it is durable.
	if err := s.sys.datasync(sg.fd, sg.path); err != nil {
		for _, w := range batch {
			if w.decided {
				w.err = unknown(w.op, w.key, err)
			}
		}
		s.mu.Lock()
		s.unsynced = true
		s.mu.Unlock()
		// The segment is suspect: nothing is appended to it again before
		// it is rewritten, which commitBatch tries at once. If even the
		// suspect file cannot be written, this Store still knows.
		_ = s.markSuspect(sg)
	}
	return true
}

// prepareWrite brings the index up to date under the write lock and makes
// the segment fit to append to: the directory synced since it became
// current, no other segment left, and no failed fdatasync behind it. A
// suspect segment (see markSuspect) is rewritten first, by a compaction;
// if that fails, so does the batch, with nothing written. The caller holds
// the write lock, not mu.
func (s *Store) prepareWrite() error {
	s.mu.Lock()
	err := s.catchUp(true)
	sg := s.seg
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := s.settle(sg.name); err != nil {
		return err
	}
	suspect, err := s.suspected(sg)
	if err != nil {
		return fmt.Errorf("read %s: %w", s.path(suspectName), err)
	}
	if !suspect {
		return nil
	}
	if err := s.compact(); err != nil {
		return fmt.Errorf("%s failed an fdatasync, and rewriting it failed: %w", sg.path, err)
	}
	s.mu.RLock()
	cur := s.seg.name
	s.mu.RUnlock()
	return s.settle(cur)
}

// pendingVersion is what an earlier write of the batch left under a key.
type pendingVersion struct {
	present bool
	etag    etagBits
}

// appendBatch claims the batch's writes, checks their conditions in
// order, appends the records of those that pass as one frame, and applies
// them to the index. It reports whether it appended. The caller holds the
// write lock and mu for writing.
func (s *Store) appendBatch(batch []*write) bool {
	sg := s.seg
	var fb frameBuilder
	fb.reset()
	overlay := map[string]pendingVersion{}
	type placed struct {
		w  *write
		at int
	}
	var recs []placed
	for _, w := range batch {
		if !w.Claim() {
			continue // abandoned: its caller has been answered
		}
		// Appending is the commit point: a caller whose deadline passed
		// before it is told "unknown" with nothing written, rather than
		// a late success it has stopped waiting for.
		if err := w.ctx.Err(); err != nil {
			w.err = unknown(w.op, w.key, err)
			continue
		}
		w.decided = true
		cur, ok := overlay[w.key]
		if !ok {
			e, present := s.idx.get(w.key)
			cur = pendingVersion{present: present, etag: e.etag}
		}
		if err := admit(w, cur); err != nil {
			w.err = err
			continue
		}
		if w.kind == kindDelete && !cur.present {
			continue // an unconditional delete of a missing key lands, as in S3
		}
		recs = append(recs, placed{w, fb.add(w.kind, w.key, w.etag, w.body)})
		overlay[w.key] = pendingVersion{present: w.kind == kindPut, etag: w.etag}
	}
	if fb.empty() {
		return false
	}
	frame := fb.finish(sg.salt)
	if err := pwriteFull(sg.fd, sg.path, frame, sg.end); err != nil {
		// Part of the frame may be in the file; it does not count, and
		// the next writer cuts it off if this truncate fails. Every
		// answer of the batch may rest on a record that is not there.
		_ = ftruncate(sg.fd, sg.path, sg.end)
		for _, w := range batch {
			if w.decided {
				w.err, w.decided = w.fail(err), false
			}
		}
		return false
	}
	for _, p := range recs {
		s.applyRecord(sg.end+int64(p.at), p.w.kind, p.w.key, p.w.etag, len(p.w.body))
	}
	sg.end += int64(len(frame))
	return true
}

// admit checks a write's condition against the version cur.
func admit(w *write, cur pendingVersion) error {
	switch w.cond.Kind {
	case ownership.CreateOnly:
		if cur.present {
			return fmt.Errorf("dirstore: %s %q (%s): key exists: %w", w.op, w.key, w.cond, ownership.ErrPrecondition)
		}
	case ownership.ReplaceOnly:
		if !cur.present {
			return fmt.Errorf("dirstore: %s %q (%s): key absent: %w", w.op, w.key, w.cond, ownership.ErrPrecondition)
		}
		if !cur.etag.matches(w.cond.ETag) {
			return fmt.Errorf("dirstore: %s %q (%s): holds %s: %w", w.op, w.key, w.cond, cur.etag.ETag(), ownership.ErrPrecondition)
		}
	}
	return nil
}
