package dirstore

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Group commit. A Put writes and fsyncs its temp file on its own goroutine,
// then commits. If no commit is running it commits alone, on its own
// goroutine. Otherwise it queues and waits: when the running commit ends, a
// committer goroutine (gone again once the queue is empty) takes every
// commit queued so far as a batch and, under the write lock: checks each
// one's condition and renames its file into place, in queue order; syncs
// every directory the batch changed, at once; releases the lock; and only
// then answers them all. Commits that arrive meanwhile form the next batch.
// Nothing waits for a batch to fill: a lone Put commits at once, and under
// load a batch holds whatever arrived during the previous one.
//
// Holding the lock across the sync keeps the guarantee the store had with
// one commit per lock: a condition is only ever checked against objects
// that are durable or renamed earlier in the same batch, whose fate (and
// answer) the checked commit shares. See doc.go for what readers see.

// The states of a commit. The committer claims a pending commit under the
// lock before acting on it; a caller whose context ends abandons it if it
// is still pending, and is then answered at once and nothing is written.
const (
	pending int32 = iota
	claimed
	abandoned
)

// A commit is one Put whose temp file is written and synced, waiting to be
// checked and renamed into place.
type commit struct {
	ctx  context.Context
	key  string
	tmp  string // the synced temp file
	path string // the object file it becomes
	cond ownership.Condition

	state atomic.Int32 // pending, claimed or abandoned

	// Set by the committer for a claimed commit, read by its caller once
	// done is closed.
	renamed bool   // tmp is now path: the caller must not remove it
	old     func() // closes the version tmp replaced (see holdOpen), if set
	err     error
	done    chan struct{}
}

// committer is a Store's queue of commits.
type committer struct {
	mu      sync.Mutex
	queue   []*commit
	running bool // a commit or batch is running; new commits queue
}

// commit commits c and returns its answer. A commit that finds no commit
// running commits alone, on its caller's goroutine, exactly as before group
// commit, so a lone writer pays nothing for batching. One that finds a
// commit running joins the queue, which a committer goroutine, started
// when the running commit ends, takes as the next batch. If ctx ends
// while c is queued, c is abandoned: the caller learns ErrUnknownOutcome
// and nothing is written. Once claimed, c runs to completion (a rename and
// a sync) whatever ctx does.
func (s *Store) commit(ctx context.Context, c *commit) error {
	if s.serialCommits {
		s.commitBatch(ctx, []*commit{c}, false)
		return c.err
	}
	q := &s.committer
	q.mu.Lock()
	if !q.running {
		q.running = true
		q.mu.Unlock()
		s.commitBatch(ctx, []*commit{c}, false)
		s.drain()
		return c.err
	}
	q.queue = append(q.queue, c)
	q.mu.Unlock()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
	}
	if c.state.CompareAndSwap(pending, abandoned) {
		return unknown("put", c.key, ctx.Err())
	}
	<-c.done
	return c.err
}

// drain is called when a lone commit is done: it hands the commits queued
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
		batch := q.queue
		q.queue = nil
		if len(batch) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		s.commitBatch(context.Background(), batch, true)
	}
}

// commitBatch commits a batch under one hold of the write lock and one
// round of directory syncs, then answers every commit in it. ctx bounds
// only the wait for the lock (the committer goroutine waits for as long as
// it takes; queued callers give up on their own). With holdOld, the
// versions the batch replaces are kept open until their writers are
// answered (see holdOpen), which shortens the lock's hold when others wait.
func (s *Store) commitBatch(ctx context.Context, batch []*commit, holdOld bool) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	unlockFn, err := s.lock(ctx)
	if err != nil {
		for _, c := range batch {
			if !c.state.CompareAndSwap(pending, claimed) {
				continue
			}
			if ctx.Err() != nil {
				c.err = unknown("put", c.key, err)
			} else {
				c.err = fmt.Errorf("dirstore: put %q: %w", c.key, err)
			}
		}
		return
	}
	defer unlockFn()

	var dirs []string     // directories whose entries this batch changed
	var renamed []*commit // commits whose rename the sync must make durable
	for _, c := range batch {
		if !c.state.CompareAndSwap(pending, claimed) {
			continue // abandoned: its caller has answered and removes tmp
		}
		// The rename below is the commit point; a caller whose deadline
		// passed before it has been told nothing yet, and is told
		// "unknown" with nothing written, rather than a late success it
		// has stopped waiting for.
		if err := c.ctx.Err(); err != nil {
			c.err = unknown("put", c.key, err)
			continue
		}
		if err := s.admit("put", c.key, c.path, c.cond); err != nil {
			c.err = err
			continue
		}
		if holdOld && c.cond.Kind != ownership.CreateOnly {
			// The caller closes it once answered, outside the lock.
			c.old = holdOpen(c.path)
		}
		created, err := s.place(c.tmp, c.path)
		// Directories made for c are synced even if its rename failed:
		// later commits of the batch may use them without making them.
		dirs = append(dirs, created...)
		if err != nil {
			c.err = fmt.Errorf("dirstore: put %q: %w", c.key, err)
			continue
		}
		c.renamed = true
		dirs = append(dirs, path.Dir(c.path))
		renamed = append(renamed, c)
	}
	if len(dirs) == 0 {
		return
	}
	slices.Sort(dirs)
	// The objects are visible now. If a sync fails, a crash may still undo
	// the renames: the writes landed, but not for certain.
	if err := s.syncDirs(slices.Compact(dirs)); err != nil {
		for _, c := range renamed {
			c.err = unknown("put", c.key, err)
		}
	}
}

// maxParallelSyncs bounds the fsyncs one batch has in flight, and so the
// OS threads blocked in them.
const maxParallelSyncs = 32

// syncDirsParallel fsyncs the directories, several at once. One after the
// other, each fsync after the first waits for a disk cache flush of its
// own; issued together, they share journal commits and flushes (on the
// ext4 disk of bench/RESULTS.md, 28 directories took 4–8 ms so and 8–12 ms
// one after the other; one alone, 0.4–0.7 ms). It reports the first error,
// after every sync has ended.
//
// syncfs(2) would make a whole batch durable with one call, and measured
// faster on a quiet disk, but it also writes back every other program's
// dirty data on the file system (on a shared disk it measured slower), and
// older kernels do not report all its errors; see syncfs_linux_test.go.
func syncDirsParallel(dirs []string) error {
	if len(dirs) == 1 {
		return syncDir(dirs[0])
	}
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for range min(len(dirs), maxParallelSyncs) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(dirs)); i = next.Add(1) - 1 {
				if err := syncDir(dirs[i]); err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}
