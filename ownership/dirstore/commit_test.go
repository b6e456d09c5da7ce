package dirstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/buckettest"
)

// TestContractSerialCommits keeps the commit path before group commit,
// which the benchmarks compare against, to the contract too.
func TestContractSerialCommits(t *testing.T) {
	buckettest.Run(t, func(t *testing.T) ownership.Bucket {
		s := openTemp(t)
		s.serialCommits = true
		return &heldStore{s}
	}, buckettest.Traits{})
}

// TestConcurrentConditionalPuts: many goroutines at once, with group
// commit batching them, on one key and on keys of their own. Read-modify-
// write with if-match loses no update, create-only races have one winner,
// and every goroutine's chain of if-match writes on its own key lands.
func TestConcurrentConditionalPuts(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	const workers, rounds = 16, 20
	mustPut(t, s, "shared/counter", "0", ownership.IfAbsent())
	var wg sync.WaitGroup
	var mu sync.Mutex
	increments, creates := 0, map[int]int{}
	for w := range workers {
		wg.Go(func() {
			own := fmt.Sprintf("actors/test/%d/state", w)
			etag, err := s.Put(ctx, own, []byte("0"), ownership.IfAbsent())
			if err != nil {
				t.Error(err)
				return
			}
			for r := range rounds {
				// Its own key: an if-match chain that must always land.
				if etag, err = s.Put(ctx, own, []byte(strconv.Itoa(r+1)), ownership.IfMatch(etag)); err != nil {
					t.Errorf("%s round %d: %v", own, r, err)
					return
				}
				// A create-only race with every other worker.
				_, err := s.Put(ctx, fmt.Sprintf("race/%d", r), []byte(strconv.Itoa(w)), ownership.IfAbsent())
				switch ownership.OutcomeOf(err) {
				case ownership.Landed:
					mu.Lock()
					creates[r]++
					mu.Unlock()
				case ownership.Refused:
				default:
					t.Errorf("create race %d: %v", r, err)
				}
				// The shared counter: read, then write back one more
				// with if-match; a refusal means someone else got there.
				obj, err := s.Get(ctx, "shared/counter")
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := strconv.Atoi(string(obj.Body))
				_, err = s.Put(ctx, "shared/counter", []byte(strconv.Itoa(n+1)), ownership.IfMatch(obj.ETag))
				switch ownership.OutcomeOf(err) {
				case ownership.Landed:
					mu.Lock()
					increments++
					mu.Unlock()
				case ownership.Refused:
				default:
					t.Errorf("counter: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	obj, err := s.Get(ctx, "shared/counter")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(obj.Body); got != strconv.Itoa(increments) {
		t.Errorf("counter holds %s after %d landed increments", got, increments)
	}
	for r := range rounds {
		if creates[r] != 1 {
			t.Errorf("create race %d: %d winners", r, creates[r])
		}
	}
	for w := range workers {
		obj, err := s.Get(ctx, fmt.Sprintf("actors/test/%d/state", w))
		if err != nil || string(obj.Body) != strconv.Itoa(rounds) {
			t.Errorf("worker %d's key: %q, %v", w, obj.Body, err)
		}
	}
	if got := dirNames(t, s.session); len(got) != 0 {
		t.Errorf("temp files left: %q", got)
	}
}

// stalledSync makes a Store's first batch sync wait until released, so
// that the Puts started meanwhile queue up as the next batch; it records
// the directories of each later sync and fails it with fail, if set.
type stalledSync struct {
	entered, release chan struct{}
	mu               sync.Mutex
	calls            int
	batches          [][]string
	fail             error
}

func stallSync(s *Store, fail error) *stalledSync {
	st := &stalledSync{entered: make(chan struct{}), release: make(chan struct{}), fail: fail}
	s.syncDirs = func(dirs []string) error {
		st.mu.Lock()
		st.calls++
		first := st.calls == 1
		if !first {
			st.batches = append(st.batches, dirs)
		}
		st.mu.Unlock()
		if first {
			close(st.entered)
			<-st.release
			return syncDirsParallel(dirs)
		}
		if st.fail != nil {
			return st.fail
		}
		return syncDirsParallel(dirs)
	}
	return st
}

// waitQueued waits until n commits wait in the Store's queue.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.committer.mu.Lock()
		queued := len(s.committer.queue)
		s.committer.mu.Unlock()
		if queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d commits queued, want %d", queued, n)
		}
	}
}

// TestSyncErrorFailsWholeBatch: the Puts that queued while a sync ran are
// committed as one batch with one sync; when that sync fails, every one of
// them is told its write did not land for certain (ErrUnknownOutcome,
// wrapping the sync's error), none is told it landed, and the store works
// afterwards.
func TestSyncErrorFailsWholeBatch(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	injected := errors.New("injected sync failure")
	st := stallSync(s, injected)

	first := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, "actors/a/first/state", []byte("v"), ownership.IfAbsent())
		first <- err
	}()
	<-st.entered
	const n = 10
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := s.Put(ctx, fmt.Sprintf("actors/a/%d/state", i), []byte("v"), ownership.IfAbsent())
			errs <- err
		}()
	}
	waitQueued(t, s, n)
	close(st.release)
	if err := <-first; err != nil {
		t.Fatalf("first put: %v", err)
	}
	for range n {
		err := <-errs
		if ownership.OutcomeOf(err) != ownership.Unknown || !errors.Is(err, injected) {
			t.Errorf("put in the failed batch: %v, want ErrUnknownOutcome wrapping the sync error", err)
		}
	}
	st.mu.Lock()
	batches := st.batches
	st.fail = nil
	st.mu.Unlock()
	// One sync for the whole batch: each object's directory, plus the
	// directories the batch created ("actors/a" and each name's).
	if len(batches) != 1 || len(batches[0]) != n+1 {
		t.Fatalf("syncs after the first: %q, want one of %d directories", batches, n+1)
	}
	mustPut(t, s, "after", "v", ownership.IfAbsent())
}

// TestAbandonedWhileQueued: a Put whose context ends while it waits in the
// queue returns at once with ErrUnknownOutcome; it never lands and leaves
// no temp file, and the Puts queued with it are unaffected.
func TestAbandonedWhileQueued(t *testing.T) {
	s := openTemp(t)
	st := stallSync(s, nil)
	first := make(chan error, 1)
	go func() {
		_, err := s.Put(t.Context(), "first", []byte("v"), ownership.IfAbsent())
		first <- err
	}()
	<-st.entered
	ctx, cancel := context.WithCancel(t.Context())
	abandoned, other := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, "abandoned", []byte("v"), ownership.IfAbsent())
		abandoned <- err
	}()
	go func() {
		_, err := s.Put(t.Context(), "other", []byte("v"), ownership.IfAbsent())
		other <- err
	}()
	waitQueued(t, s, 2)
	cancel()
	if err := <-abandoned; ownership.OutcomeOf(err) != ownership.Unknown {
		t.Fatalf("abandoned put: %v, want ErrUnknownOutcome", err)
	}
	close(st.release)
	for _, ch := range []chan error{first, other} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(t.Context(), "abandoned"); !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("get of the abandoned write: %v, want ErrNotFound", err)
	}
	if got := dirNames(t, s.session); len(got) != 0 {
		t.Fatalf("temp files left: %q", got)
	}
}
