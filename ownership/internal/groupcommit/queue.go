package groupcommit

import (
	"context"
	"sync"
	"sync/atomic"
)

// The states of a write. A batch claims a pending write under the store's
// lock before acting on it; a caller whose context ends abandons it if it
// is still pending, and is answered at once with nothing written.
const (
	pending int32 = iota
	claimed
	abandoned
)

// Write is what a Queue keeps of a store's write: its state, and how a
// caller waiting in the queue learns its answer. A store's write type
// embeds it; its zero value is a pending write.
type Write struct {
	state atomic.Int32 // pending, claimed or abandoned
	// done is made when the write queues and closed once it is answered;
	// a lone write, answered on its caller's goroutine, has none.
	done chan struct{}
	// answered: done is closed. Only the goroutine running the batch
	// touches it.
	answered bool
}

// Claim makes a pending write claimed and reports whether it was
// pending: a batch acts on a write only once it has claimed it, and
// leaves alone one its caller abandoned.
func (w *Write) Claim() bool { return w.state.CompareAndSwap(pending, claimed) }

// Wait waits until a write that Commit reported Claimed is answered.
func (w *Write) Wait() { <-w.done }

func (w *Write) base() *Write { return w }

// Queued is what a Queue holds: a pointer to a store's write type, which
// embeds Write.
type Queued interface{ base() *Write }

// Outcome is how Commit ended.
type Outcome int

const (
	// Answered: the batch function set the write's answer.
	Answered Outcome = iota
	// Abandoned: the context ended while the write was queued. No batch
	// claimed it, so nothing of it is written, nor ever will be.
	Abandoned
	// Claimed: the context ended after a batch claimed the write. It runs
	// to completion, and may land; Wait waits for its answer.
	Claimed
)

// Queue is a store's queue of writes waiting to commit.
type Queue[W Queued] struct {
	size       func(W) int
	small, max int
	batch      func(ctx context.Context, batch []W)

	mu      sync.Mutex
	queue   []W
	running bool // a batch is running; new writes queue
}

// NewQueue returns an empty queue. Its batches are chosen by Next with
// size, small and max, and committed by batch, which claims each write
// (Write.Claim) before acting on it and sets the answer of each write it
// claimed. ctx is the caller's for a lone write and context.Background()
// for a batch of queued writes; it should bound only waits that come
// before any write is claimed (for the store's lock, say). The queue
// answers the writes of a batch once batch returns, or earlier where
// batch calls Answer.
func NewQueue[W Queued](size func(W) int, small, max int, batch func(ctx context.Context, batch []W)) *Queue[W] {
	return &Queue[W]{size: size, small: small, max: max, batch: batch}
}

// Commit commits w and reports how that ended. A write that finds no
// batch running is a batch of its own, committed on the caller's
// goroutine; otherwise it queues, and a committer goroutine commits it in
// a later batch. If ctx ends while w is queued, w is abandoned (Abandoned,
// and nothing is written); if it ends once a batch has claimed w, w runs
// to completion (Claimed).
func (q *Queue[W]) Commit(ctx context.Context, w W) Outcome {
	b := w.base()
	q.mu.Lock()
	if !q.running {
		q.running = true
		q.mu.Unlock()
		q.run(ctx, []W{w})
		q.drain()
		return Answered
	}
	done := make(chan struct{})
	b.done = done
	q.queue = append(q.queue, w)
	q.mu.Unlock()
	select {
	case <-done:
		return Answered
	case <-ctx.Done():
	}
	if b.state.CompareAndSwap(pending, abandoned) {
		return Abandoned
	}
	return Claimed
}

// run commits a batch and answers its writes.
func (q *Queue[W]) run(ctx context.Context, batch []W) {
	q.batch(ctx, batch)
	Answer(batch)
}

// drain is called when a lone write is done: it hands the writes queued
// meanwhile to a committer goroutine, or marks the queue idle.
func (q *Queue[W]) drain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		q.running = false
		return
	}
	go q.runCommitter()
}

// runCommitter commits batches until the queue is empty.
func (q *Queue[W]) runCommitter() {
	for {
		q.mu.Lock()
		var batch []W
		batch, q.queue = Next(q.queue, q.size, q.small, q.max)
		if len(batch) == 0 {
			q.queue = nil
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.run(context.Background(), batch)
	}
}

// Answer wakes the callers waiting in the queue for the writes of batch,
// whose answers are set. A batch function calls it to answer before work
// of its own that the answers need not wait for; the queue calls it once
// the batch function returns, and a write is answered only once.
func Answer[W Queued](batch []W) {
	for _, w := range batch {
		if b := w.base(); b.done != nil && !b.answered {
			b.answered = true
			close(b.done)
		}
	}
}
