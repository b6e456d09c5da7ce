package memstore

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Store is an ownership.Bucket in memory, safe for concurrent use, with the
// faults its Faults say. Create it with New.
type Store struct {
	faults Faults

	mu    sync.Mutex
	state State
	rng   *rand.Rand
	// late holds writes struck by FaultLandLate, in arrival order.
	late []lateWrite
	// gate, while holds > 0, stops writes until the last hold is
	// released (see HoldWrites).
	gate  chan struct{}
	holds int
}

type lateWrite struct {
	req Request
	// wait counts the applied requests still to go before req lands.
	wait int
}

var _ ownership.RangeReader = (*Store)(nil)

// New returns an empty Store. It panics if f is invalid (see Faults.Validate):
// fault settings are constants of a test, and a wrong one is a bug in it.
func New(f Faults) *Store {
	if err := f.Validate(); err != nil {
		panic(err)
	}
	if f.MaxLateRequests == 0 {
		f.MaxLateRequests = defaultMaxLateRequests
	}
	s := &Store{
		faults: f,
		// The second PCG word is a fixed constant: the seed alone selects
		// the stream.
		rng: rand.New(rand.NewPCG(f.Seed, 0x6a09e667f3bcc908)),
	}
	s.state.IgnoreConditions = f.IgnoreConditions
	return s
}

// Get reads an object; see ownership.Bucket.
func (s *Store) Get(ctx context.Context, key string) (ownership.Object, error) {
	res := s.do(ctx, Request{Op: OpGet, Key: key})
	return res.Object, res.Err
}

// GetRange reads part of an object; see ownership.RangeReader. It is a
// Get to the faults: it meets the same ones, drawn from the same
// randomness, and is delayed and ended by its context alike.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (ownership.Object, error) {
	res := s.do(ctx, Request{Op: OpGet, Key: key, Ranged: true, Off: off, N: n})
	return res.Object, res.Err
}

// Put writes an object under a condition; see ownership.Bucket.
func (s *Store) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	res := s.do(ctx, Request{Op: OpPut, Key: key, Body: body, Cond: cond})
	return res.ETag, res.Err
}

// Delete removes an object under a condition; see ownership.Bucket.
func (s *Store) Delete(ctx context.Context, key string, cond ownership.Condition) error {
	return s.do(ctx, Request{Op: OpDelete, Key: key, Cond: cond}).Err
}

// List returns one page of keys; see ownership.Bucket.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) (ownership.ListPage, error) {
	res := s.do(ctx, Request{Op: OpList, Prefix: prefix, StartAfter: startAfter, Limit: limit})
	return res.Page, res.Err
}

// Settle lands every late write now, in the order the writes arrived, and
// reports how many landed (or were refused on landing).
func (s *Store) Settle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.late)
	for _, lw := range s.late {
		s.state.Apply(lw.req)
	}
	s.late = nil
	return n
}

// Pending reports how many late writes have not landed yet.
func (s *Store) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.late)
}

// Inspect calls fn with the bucket's true contents, bypassing every fault,
// while holding the Store's lock. fn must not keep the State or call the
// Store.
func (s *Store) Inspect(fn func(*State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.state)
}

// HoldWrites makes every Put and Delete that arrives from now on wait
// until release is called, as if the server had stopped answering: a
// caller whose context ends meanwhile gets ErrUnknownOutcome
// (FaultContextDone) and its write is not applied. Reads are not held.
// Holds nest; writes go on when every hold is released. release may be
// called more than once.
func (s *Store) HoldWrites() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds == 0 {
		s.gate = make(chan struct{})
	}
	s.holds++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.holds--
			if s.holds == 0 {
				close(s.gate)
				s.gate = nil
			}
		})
	}
}

// drawn is what the seed decided for one request.
type drawn struct {
	fault     Fault
	delay     time.Duration
	lateAfter int
}

// draw decides the fate of one request. The caller holds mu.
//
// Invariant: every request consumes exactly three values from rng, whatever
// the configuration and whatever is decided, so that the n-th request meets
// the same fate for the same seed and a change to one setting (a delay, say)
// does not reshuffle which requests the other faults strike.
func (s *Store) draw(r Request) drawn {
	u := s.rng.Float64()
	dv := s.rng.Uint64()
	lv := s.rng.Uint64()

	f := s.faults
	var d drawn
	for _, c := range []struct {
		p     float64
		fault Fault
	}{
		{f.LoseRequest, FaultLoseRequest},
		{f.LoseReply, FaultLoseReply},
		{f.LandLate, FaultLandLate},
		{f.UnavailableApplied, FaultUnavailableApplied},
		{f.UnavailableNotApplied, FaultUnavailableNotApplied},
	} {
		if u < c.p {
			d.fault = c.fault
			break
		}
		u -= c.p
	}
	if d.fault == FaultLandLate && !r.IsWrite() {
		d.fault = NoFault
	}
	if f.MaxDelay > 0 {
		d.delay = time.Duration(dv % uint64(f.MaxDelay))
	}
	d.lateAfter = 1 + int(lv%uint64(f.MaxLateRequests))
	return d
}

func (s *Store) do(ctx context.Context, r Request) Response {
	// A request a client library would refuse is never sent, so it meets
	// no fault and consumes no randomness.
	if err := r.check(); err != nil {
		return Response{Err: err}
	}
	if err := ctx.Err(); err != nil {
		return Response{Err: &FaultError{Fault: FaultContextDone, Request: r, Cause: err}}
	}

	s.mu.Lock()
	d := s.draw(r)
	gate := s.gate
	s.mu.Unlock()

	if gate != nil && r.IsWrite() {
		select {
		case <-gate:
		case <-ctx.Done():
			return Response{Err: &FaultError{Fault: FaultContextDone, Request: r, Cause: ctx.Err()}}
		}
	}
	if d.delay > 0 {
		t := time.NewTimer(d.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Response{Err: &FaultError{Fault: FaultContextDone, Request: r, Cause: ctx.Err()}}
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	switch d.fault {
	case FaultLoseRequest, FaultUnavailableNotApplied:
		return Response{Err: &FaultError{Fault: d.fault, Request: r}}
	case FaultLandLate:
		// The caller may reuse its buffer once it has its answer; the write
		// it sent must not change with it.
		r.Body = slices.Clone(r.Body)
		s.late = append(s.late, lateWrite{req: r, wait: d.lateAfter})
		return Response{Err: &FaultError{Fault: d.fault, Request: r}}
	}
	res := s.state.Apply(r)
	s.landDue()
	if d.fault != NoFault {
		return Response{Err: &FaultError{Fault: d.fault, Request: r}}
	}
	return res
}

// landDue counts one applied request against every late write and lands, in
// arrival order, those whose wait is over. A landing late write does not
// count as a request itself. The caller holds mu.
func (s *Store) landDue() {
	if len(s.late) == 0 {
		return
	}
	var due []Request
	kept := s.late[:0]
	for _, lw := range s.late {
		lw.wait--
		if lw.wait <= 0 {
			due = append(due, lw.req)
		} else {
			kept = append(kept, lw)
		}
	}
	clear(s.late[len(kept):]) // drop references to landed bodies
	s.late = kept
	for _, r := range due {
		s.state.Apply(r)
	}
}
