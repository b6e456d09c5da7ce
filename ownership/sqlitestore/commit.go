package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/internal/groupcommit"
)

// Group commit: Put and Delete go through the Store's queue of writes
// (ownership/internal/groupcommit), which commits a lone write on its
// caller's goroutine and queued writes in batches. Under the write lock
// a batch opens one transaction (BEGIN IMMEDIATE), checks each write's
// condition in batch order (against the database as the transaction sees
// it, earlier writes of the batch included), writes those that pass, and
// commits; only then is every write of the batch answered.

// maxBatchBytes bounds the bodies of one batch (a single larger write is
// a batch of its own).
const maxBatchBytes = 8 << 20

// smallWrite is the size up to which a queued write goes into the next
// batch ahead of bigger ones that queued before it.
const smallWrite = 64 << 10

// write is one Put or Delete waiting to be committed.
type write struct {
	groupcommit.Write

	ctx  context.Context
	del  bool
	key  string
	body []byte
	// sums are the checksums of the body's chunks, when it is chunked.
	sums []uint32
	cond ownership.Condition
	etag etagBits

	// Set by the batch for a claimed write, read by its caller once it
	// is answered.
	err error
	// decided: the answer rests on what the batch read or wrote, so a
	// failed commit makes it unknown.
	decided bool
}

func (w *write) op() string {
	if w.del {
		return "delete"
	}
	return "put"
}

func (w *write) size() int { return len(w.key) + len(w.body) }

func (w *write) fail(err error) error {
	return fmt.Errorf("sqlitestore: %s %q: %w", w.op(), w.key, err)
}

// commit commits w and returns its answer. If ctx ends while w is queued,
// w is abandoned: the caller learns ErrUnknownOutcome and nothing is
// written. Once claimed, w runs to completion whatever ctx does, but its
// caller is answered ErrUnknownOutcome as soon as ctx ends.
func (s *Store) commit(ctx context.Context, w *write) error {
	switch s.committer.Commit(ctx, w) {
	case groupcommit.Abandoned:
		return unknown(w.op(), w.key, ctx.Err())
	case groupcommit.Claimed:
		// It may land yet, and nothing that would tell is known.
		return unknown(w.op(), w.key, ctx.Err())
	}
	return w.err
}

// commitBatch commits a batch in one transaction under one hold of the
// write lock; the queue answers every write in it once it returns. ctx
// bounds only the wait for the lock.
func (s *Store) commitBatch(ctx context.Context, batch []*write) {
	unlockFn, err := s.lock(ctx)
	if err != nil {
		for _, w := range batch {
			if !w.Claim() {
				continue
			}
			if ctx.Err() != nil {
				w.err = unknown(w.op(), w.key, err)
			} else {
				w.err = w.fail(err)
			}
		}
		return
	}
	defer unlockFn()
	s.runBatch(batch)
}

// runBatch does a batch's work. The caller holds the write lock.
func (s *Store) runBatch(batch []*write) {
	if s.w == nil {
		// An earlier batch lost the connection (see resetWriter).
		if err := s.resetWriter(); err != nil {
			s.failAll(batch, err)
			return
		}
	}
	w := s.w
	w.next = 0
	if err := w.begin.Exec(); err != nil {
		// Nothing is written: the transaction did not start.
		s.failAll(batch, s.writeErr(err))
		return
	}
	for _, x := range batch {
		if !x.Claim() {
			continue // abandoned: its caller has been answered
		}
		// Claiming is the commit point: a caller whose deadline passed
		// before it is told "unknown" with nothing written, rather than
		// a late success it has stopped waiting for.
		if err := x.ctx.Err(); err != nil {
			x.err = unknown(x.op(), x.key, err)
			continue
		}
		x.decided = true
		err := w.apply(x)
		if err == nil || errors.Is(err, ownership.ErrPrecondition) {
			x.err = err
			continue
		}
		// SQLite failed (a full disk, an I/O error): the transaction is
		// rolled back, so nothing of the batch is written.
		s.abort(w)
		err = s.writeErr(err)
		for _, y := range batch {
			if y.decided {
				y.err, y.decided = y.fail(err), false
			}
		}
		// The writes after x are not claimed yet, and nothing of them is
		// written either.
		s.failAll(batch, err)
		return
	}
	if err := w.commit.Exec(); err != nil {
		// The commit may be in the WAL, durable or not: every answer of
		// the batch may rest on a write whose fate is unknown.
		s.abort(w)
		for _, x := range batch {
			if x.decided {
				x.err = unknown(x.op(), x.key, s.writeErr(err))
			}
		}
	}
}

// failAll answers every write of the batch not yet claimed with err,
// nothing written; a write whose context has ended with unknown.
func (s *Store) failAll(batch []*write, err error) {
	for _, x := range batch {
		if !x.Claim() {
			continue
		}
		if cerr := x.ctx.Err(); cerr != nil {
			x.err = unknown(x.op(), x.key, cerr)
		} else {
			x.err = x.fail(err)
		}
	}
}

// abort rolls back what is left of a transaction after an error. If that
// fails too, the connection is closed (which rolls back) and the next
// batch opens a new one.
func (s *Store) abort(w *writer) {
	if w.c.GetAutocommit() {
		return // SQLite rolled it back already
	}
	if err := w.rollback.Exec(); err == nil && w.c.GetAutocommit() {
		return
	}
	_ = w.close()
	s.w = nil
}

// resetWriter opens the writer's connection again. The caller holds the
// write lock.
func (s *Store) resetWriter() error {
	w, err := s.openWriter()
	if err != nil {
		return err
	}
	s.w = w
	return nil
}

// writeErr marks SQLite's report of a damaged database.
func (s *Store) writeErr(err error) error {
	if isCorrupt(err) {
		return fmt.Errorf("%w: %w", ownership.ErrBucketDamaged, s.corrupt(err))
	}
	return err
}
