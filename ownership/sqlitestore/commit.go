package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/internal/groupcommit"
)

// Group commit. A write (Put or Delete) that finds no batch running
// commits alone, on its caller's goroutine. Otherwise it queues: when the
// running batch ends, a committer goroutine (gone again once the queue is
// empty) takes the queued writes as the next batch. Under the write lock
// a batch opens one transaction (BEGIN IMMEDIATE), checks each write's
// condition in batch order (against the database as the transaction sees
// it, earlier writes of the batch included), writes those that pass,
// commits, and only then answers every write of the batch. Nothing waits
// for a batch to fill.

// The states of a write. The committer claims a pending write under the
// lock before acting on it; a caller whose context ends abandons it if it
// is still pending, and is answered at once with nothing written.
const (
	pending int32 = iota
	claimed
	abandoned
)

// maxBatchBytes bounds the bodies of one batch (a single larger write is
// a batch of its own).
const maxBatchBytes = 8 << 20

// smallWrite is the size up to which a queued write goes into the next
// batch ahead of bigger ones that queued before it.
const smallWrite = 64 << 10

// write is one Put or Delete waiting to be committed.
type write struct {
	ctx  context.Context
	del  bool
	key  string
	body []byte
	// sums are the checksums of the body's chunks, when it is chunked.
	sums []uint32
	cond ownership.Condition
	etag etagBits

	state atomic.Int32 // pending, claimed or abandoned

	// Set by the committer for a claimed write, read by its caller once
	// done is closed.
	err error
	// decided: the answer rests on what the batch read or wrote, so a
	// failed commit makes it unknown.
	decided bool
	done    chan struct{}
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

// committer is a Store's queue of writes.
type committer struct {
	mu      sync.Mutex
	queue   []*write
	running bool // a batch is running; new writes queue
}

// commit commits w and returns its answer. If ctx ends while w is queued,
// w is abandoned: the caller learns ErrUnknownOutcome and nothing is
// written. Once claimed, w runs to completion whatever ctx does, but its
// caller is answered ErrUnknownOutcome as soon as ctx ends.
func (s *Store) commit(ctx context.Context, w *write) error {
	q := &s.committer
	q.mu.Lock()
	if !q.running {
		q.running = true
		q.mu.Unlock()
		s.commitBatch(ctx, []*write{w})
		s.drain()
		return w.err
	}
	q.queue = append(q.queue, w)
	q.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
	}
	if w.state.CompareAndSwap(pending, abandoned) {
		return unknown(w.op(), w.key, ctx.Err())
	}
	// Claimed: it may land yet, and nothing that would tell is known.
	return unknown(w.op(), w.key, ctx.Err())
}

// drain is called when a lone write is done: it hands the writes queued
// meanwhile to a committer goroutine, or marks the Store idle.
func (s *Store) drain() {
	q := &s.committer
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		q.running = false
		return
	}
	go s.runCommitter()
}

// runCommitter commits batches until the queue is empty.
func (s *Store) runCommitter() {
	q := &s.committer
	for {
		q.mu.Lock()
		batch := q.next()
		if len(batch) == 0 {
			q.queue = nil
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		s.commitBatch(context.Background(), batch)
	}
}

// next takes the next batch from the queue (groupcommit.Next: the oldest
// write, the small ones, then big ones while the batch stays within
// maxBatchBytes). The caller holds q.mu.
func (q *committer) next() []*write {
	var batch []*write
	batch, q.queue = groupcommit.Next(q.queue, (*write).size, smallWrite, maxBatchBytes)
	return batch
}

// commitBatch commits a batch in one transaction under one hold of the
// write lock, then answers every write in it. ctx bounds only the wait
// for the lock.
func (s *Store) commitBatch(ctx context.Context, batch []*write) {
	unlockFn, err := s.lock(ctx)
	if err != nil {
		for _, w := range batch {
			if !w.state.CompareAndSwap(pending, claimed) {
				continue
			}
			if ctx.Err() != nil {
				w.err = unknown(w.op(), w.key, err)
			} else {
				w.err = w.fail(err)
			}
		}
		answer(batch)
		return
	}
	defer unlockFn()
	s.runBatch(batch)
	answer(batch)
}

func answer(batch []*write) {
	for _, w := range batch {
		close(w.done)
	}
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
		if !x.state.CompareAndSwap(pending, claimed) {
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
		if !x.state.CompareAndSwap(pending, claimed) {
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
