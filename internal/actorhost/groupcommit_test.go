package actorhost_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// gatedBucket holds every Put of a state object until the test opens the
// gate, and counts them.
type gatedBucket struct {
	ownership.Bucket
	mu      sync.Mutex
	puts    int
	entered chan struct{}
	gate    chan struct{}
}

func (b *gatedBucket) Put(ctx context.Context, key string, body []byte, c ownership.Condition) (ownership.ETag, error) {
	b.mu.Lock()
	b.puts++
	b.mu.Unlock()
	b.entered <- struct{}{}
	<-b.gate
	return b.Bucket.Put(ctx, key, body, c)
}

// TestGroupCommit: while one commit is in flight the actor goes on running
// events; their writes go out together in the next commit, and no response
// is released before the commit covering its writes has landed.
// signalling is the built-in counter, reporting on ran each event it ran.
func signalling(ran chan<- struct{}) *actors.Registry {
	reg := actors.NewRegistry()
	_ = reg.Register("counter", actors.ClassFunc(func(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
		resp, err := actors.Counter{}.Handle(ctx, req, st)
		ran <- struct{}{}
		return resp, err
	}))
	return reg
}

func TestGroupCommit(t *testing.T) {
	b := &gatedBucket{Bucket: memstore.New(memstore.Faults{}), entered: make(chan struct{}, 16), gate: make(chan struct{})}
	ran := make(chan struct{}, 64)
	h := newHost(t, b, &fakeKeeper{}, signalling(ran))

	const events = 10
	type answer struct {
		body string
		err  error
	}
	answers := make(chan answer, events)
	send := func() {
		go func() {
			got, err := count(t, h, 1, "")
			answers <- answer{got, err}
		}()
	}
	send()
	<-b.entered // the first event's commit is in flight, held
	for i := 1; i < events; i++ {
		send()
	}
	// The other events run meanwhile, but none is answered: even an event
	// that only read would have seen writes that are not durable yet.
	for range events {
		<-ran
	}
	select {
	case a := <-answers:
		t.Fatalf("an answer before any commit landed: %+v", a)
	default:
	}
	close(b.gate) // every commit from now on lands at once
	var got []int
	for i := 0; i < events; i++ {
		select {
		case a := <-answers:
			if a.err != nil {
				t.Fatalf("event failed: %v", a.err)
			}
			n, err := strconv.Atoi(a.body)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d events answered", len(got), events)
		}
	}
	slices.Sort(got)
	for i, n := range got {
		if n != i+1 {
			t.Fatalf("counts %v, want 1..%d each once", got, events)
		}
	}
	b.mu.Lock()
	puts := b.puts
	b.mu.Unlock()
	// The first event's commit (which creates the state), and one commit
	// for the nine that ran while it was in flight.
	if puts != 2 {
		t.Fatalf("%d puts for %d events, want 2 (first commit, one group commit)", puts, events)
	}
	mustCount(t, h, 1, strconv.Itoa(events+1))
}

// failingBucket refuses the state put numbered failAt, after holding it
// until the gate opens.
type failingBucket struct {
	gatedBucket
	failAt int
}

func (b *failingBucket) Put(ctx context.Context, key string, body []byte, c ownership.Condition) (ownership.ETag, error) {
	b.mu.Lock()
	b.puts++
	n := b.puts
	b.mu.Unlock()
	if n == b.failAt {
		b.entered <- struct{}{}
		<-b.gate
		return "", ownership.ErrPrecondition
	}
	return b.Bucket.Put(ctx, key, body, c)
}

// TestGroupCommitFailure: when a commit does not land, every event that ran
// after the last durable version fails (each may have seen its writes), and
// the next event starts again from what the bucket holds.
func TestGroupCommitFailure(t *testing.T) {
	b := &failingBucket{gatedBucket: gatedBucket{Bucket: memstore.New(memstore.Faults{}), entered: make(chan struct{}, 16), gate: make(chan struct{})}, failAt: 2}
	ran := make(chan struct{}, 64)
	h := newHost(t, b, &fakeKeeper{}, signalling(ran))
	mustCount(t, h, 1, "1") // put 1: the commit that creates the state
	<-ran

	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			_, err := count(t, h, 1, "")
			errs <- err
		}()
		if i == 0 {
			<-b.entered // the commit that will fail is in flight
		}
	}
	for range 4 { // all four ran, the three later ones on the unsaved count
		<-ran
	}
	close(b.gate)
	for i := 0; i < 4; i++ {
		if err := <-errs; err == nil {
			t.Fatal("an event answered although the commit of its writes failed")
		}
	}
	mustCount(t, h, 1, "2") // reloaded: only the first count was durable
}
