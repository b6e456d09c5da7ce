package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// testWrite is a store's write as the tests see it: a name and a size.
type testWrite struct {
	Write
	name string
	size int
	err  error
}

func newWrite(name string, size int) *testWrite { return &testWrite{name: name, size: size} }

// batchRun is what a test's batch function saw of one batch.
type batchRun struct {
	claimed  []string // the writes it claimed, in order
	ctx      context.Context
	onCaller bool // it ran on the goroutine of a caller of commitHere
}

// testStore commits batches by claiming each write and answering it with
// an error that names it. Before answering the batch numbered n (from
// 0), it waits for hold[n], if there is one.
type testStore struct {
	mu   sync.Mutex
	runs []batchRun
	hold map[int]chan struct{}
	// claimed is told the number of each batch once it has claimed its
	// writes.
	claimed chan int
}

func (s *testStore) batch(ctx context.Context, batch []*testWrite) {
	r := batchRun{ctx: ctx, onCaller: onStack("groupcommit.commitHere")}
	for _, w := range batch {
		if w.Claim() {
			r.claimed = append(r.claimed, w.name)
		}
	}
	s.mu.Lock()
	n := len(s.runs)
	s.runs = append(s.runs, r)
	hold, claimed := s.hold[n], s.claimed
	s.mu.Unlock()
	if claimed != nil {
		claimed <- n
	}
	if hold != nil {
		<-hold
	}
	for _, w := range batch {
		if slices.Contains(r.claimed, w.name) {
			w.err = answerOf(w.name)
		}
	}
}

func (s *testStore) queue() *Queue[*testWrite] {
	// Writes of up to 10 bytes are small; a batch holds up to 100.
	return NewQueue(func(w *testWrite) int { return w.size }, 10, 100, s.batch)
}

func (s *testStore) batches() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names [][]string
	for _, r := range s.runs {
		names = append(names, r.claimed)
	}
	return names
}

func answerOf(name string) error { return errors.New("answer to " + name) }

type callerKey struct{}

// commitHere commits w with a context that names its caller, so that a
// batch can tell whether it runs on the caller's goroutine (commitHere is
// on its stack) and with the caller's context.
//
//go:noinline
func commitHere(ctx context.Context, q *Queue[*testWrite], w *testWrite) Outcome {
	return q.Commit(context.WithValue(ctx, callerKey{}, w.name), w)
}

// onStack reports whether a function whose name ends with name is on the
// calling goroutine's stack.
func onStack(name string) bool {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(1, pc)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, name) {
			return true
		}
		if !more {
			return false
		}
	}
}

// goCommit commits w on a goroutine of its own, and sends how it ended.
func goCommit(ctx context.Context, q *Queue[*testWrite], w *testWrite) <-chan Outcome {
	out := make(chan Outcome, 1)
	go func() { out <- commitHere(ctx, q, w) }()
	return out
}

// wantIdle checks that the queue is idle, with no committer goroutine
// left (synctest.Wait returns only once every goroutine of the bubble is
// blocked or gone, and synctest.Test fails if one is left blocked), and
// that the next write commits alone again, on its caller's goroutine.
func wantIdle(t *testing.T, s *testStore, q *Queue[*testWrite]) {
	t.Helper()
	synctest.Wait()
	q.mu.Lock()
	running, queued := q.running, len(q.queue)
	q.mu.Unlock()
	if running || queued != 0 {
		t.Fatalf("idle queue: running %v with %d writes queued", running, queued)
	}
	w := newWrite("after", 1)
	if o := commitHere(t.Context(), q, w); o != Answered || w.err == nil || w.err.Error() != answerOf("after").Error() {
		t.Fatalf("write once idle: %v, %v", o, w.err)
	}
	s.mu.Lock()
	last := s.runs[len(s.runs)-1]
	s.mu.Unlock()
	if !last.onCaller || !slices.Equal(last.claimed, []string{"after"}) {
		t.Fatalf("write once idle: batch %v, on its caller's goroutine %v", last.claimed, last.onCaller)
	}
}

// TestLoneWrite: a write that finds no batch running is a batch of its
// own, run on its caller's goroutine with its caller's context, and
// answered when Commit returns.
func TestLoneWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &testStore{}
		q := s.queue()
		w := newWrite("w", 1)
		if o := commitHere(t.Context(), q, w); o != Answered {
			t.Fatalf("commit: %v, want Answered", o)
		}
		if w.err == nil || w.err.Error() != answerOf("w").Error() {
			t.Fatalf("answer %v", w.err)
		}
		r := s.runs[0]
		if !r.onCaller || r.ctx.Value(callerKey{}) != "w" || !slices.Equal(r.claimed, []string{"w"}) {
			t.Fatalf("batch %v, on the caller's goroutine %v, with its context %v", r.claimed, r.onCaller, r.ctx.Value(callerKey{}) != nil)
		}
		wantIdle(t, s, q)
	})
}

// TestQueuedWritesFormTheNextBatch: writes that queue while a batch runs
// are committed by a committer goroutine, in batches that Next chooses
// within the queue's bounds, and each caller gets its own write's answer.
func TestQueuedWritesFormTheNextBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		s := &testStore{hold: map[int]chan struct{}{0: release}}
		q := s.queue()
		ws := []*testWrite{newWrite("first", 1), newWrite("big1", 60), newWrite("big2", 60), newWrite("small", 5)}
		outs := []<-chan Outcome{goCommit(t.Context(), q, ws[0])}
		synctest.Wait() // the first write's batch runs, held
		for _, w := range ws[1:] {
			outs = append(outs, goCommit(t.Context(), q, w))
			synctest.Wait() // queued, in this order
		}
		if got := s.batches(); len(got) != 1 {
			t.Fatalf("batches while the first is held: %v", got)
		}
		close(release)
		for i, out := range outs {
			if o := <-out; o != Answered {
				t.Fatalf("%s: %v, want Answered", ws[i].name, o)
			}
			if ws[i].err == nil || ws[i].err.Error() != answerOf(ws[i].name).Error() {
				t.Fatalf("%s: answer %v", ws[i].name, ws[i].err)
			}
		}
		// The small write goes ahead of the second big one, which does
		// not fit within 100 bytes.
		want := [][]string{{"first"}, {"big1", "small"}, {"big2"}}
		if got := s.batches(); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("batches %v, want %v", got, want)
		}
		for _, r := range s.runs[1:] {
			if r.onCaller || r.ctx.Value(callerKey{}) != nil {
				t.Fatalf("a batch of queued writes ran on a caller's goroutine (%v) or with its context (%v)", r.onCaller, r.ctx.Value(callerKey{}))
			}
		}
		wantIdle(t, s, q)
	})
}

// TestAbandonedWhileQueued: a caller whose context ends while its write
// is queued learns Abandoned at once, and no batch can claim the write:
// it is never written, nor answered.
func TestAbandonedWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		s := &testStore{hold: map[int]chan struct{}{0: release}}
		q := s.queue()
		first := goCommit(t.Context(), q, newWrite("first", 1))
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		w := newWrite("gone", 1)
		out := goCommit(ctx, q, w)
		other := newWrite("other", 1)
		otherOut := goCommit(t.Context(), q, other)
		synctest.Wait()
		cancel()
		if o := <-out; o != Abandoned {
			t.Fatalf("commit whose context ended while queued: %v, want Abandoned", o)
		}
		close(release)
		if <-first != Answered || <-otherOut != Answered {
			t.Fatal("the other writes were not answered")
		}
		synctest.Wait()
		want := [][]string{{"first"}, {"other"}}
		if got := s.batches(); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("claimed %v, want %v", got, want)
		}
		if w.err != nil {
			t.Fatalf("the abandoned write was answered %v", w.err)
		}
		wantIdle(t, s, q)
	})
}

// TestClaimedThenContextEnds: a caller whose context ends once a batch
// has claimed its write learns Claimed while the batch still runs; the
// write runs to completion, and Wait returns once it is answered.
func TestClaimedThenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release0, release1 := make(chan struct{}), make(chan struct{})
		s := &testStore{hold: map[int]chan struct{}{0: release0, 1: release1}, claimed: make(chan int)}
		q := s.queue()
		first := goCommit(t.Context(), q, newWrite("first", 1))
		if n := <-s.claimed; n != 0 {
			t.Fatalf("batch %d claimed first", n)
		}
		ctx, cancel := context.WithCancel(t.Context())
		w := newWrite("w", 1)
		out := goCommit(ctx, q, w)
		synctest.Wait() // queued
		close(release0)
		if <-first != Answered {
			t.Fatal("first write not answered")
		}
		if n := <-s.claimed; n != 1 {
			t.Fatalf("batch %d claimed second", n)
		}
		cancel()
		if o := <-out; o != Claimed {
			t.Fatalf("commit whose context ended once claimed: %v, want Claimed", o)
		}
		synctest.Wait()
		if w.err != nil {
			t.Fatalf("answered %v before its batch ended", w.err)
		}
		close(release1)
		w.Wait()
		if w.err == nil || w.err.Error() != answerOf("w").Error() {
			t.Fatalf("answer once waited for: %v", w.err)
		}
		s.mu.Lock()
		s.claimed = nil
		s.mu.Unlock()
		wantIdle(t, s, q)
	})
}

// TestAnswerEarly: writes a batch function answers itself are answered
// then, not again when it returns.
func TestAnswerEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		answered := make(chan struct{})
		var q *Queue[*testWrite]
		calls := 0
		q = NewQueue(func(w *testWrite) int { return w.size }, 10, 100, func(ctx context.Context, batch []*testWrite) {
			calls++
			for _, w := range batch {
				if w.Claim() {
					w.err = answerOf(w.name)
				}
			}
			if calls == 1 {
				<-release // the first, lone write, holds the queue
				return
			}
			Answer(batch)
			close(answered)
			<-release // work after answering, which a closed done must not wait for
		})
		first := goCommit(t.Context(), q, newWrite("first", 1))
		synctest.Wait()
		w := newWrite("w", 1)
		out := goCommit(t.Context(), q, w)
		synctest.Wait()
		release <- struct{}{}
		<-first
		<-answered
		if o := <-out; o != Answered || w.err == nil {
			t.Fatalf("write answered early: %v, %v", o, w.err)
		}
		close(release) // the queue answers again, which must not close done twice
		synctest.Wait()
	})
}
