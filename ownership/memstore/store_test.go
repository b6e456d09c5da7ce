package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// faultOf returns the fault an error reports, NoFault for a plain answer.
func faultOf(t *testing.T, err error) Fault {
	t.Helper()
	var fe *FaultError
	if !errors.As(err, &fe) {
		return NoFault
	}
	if !errors.Is(err, ownership.ErrUnknownOutcome) {
		t.Fatalf("fault error %v does not wrap ErrUnknownOutcome", err)
	}
	return fe.Fault
}

// stored returns what the bucket really holds under key, past every fault.
func stored(s *Store, key string) (string, bool) {
	var body string
	var ok bool
	s.Inspect(func(st *State) {
		obj, err := st.Get(key)
		body, ok = string(obj.Body), err == nil
	})
	return body, ok
}

func TestFaultLoseRequest(t *testing.T) {
	s := New(Faults{LoseRequest: 1})
	ctx := t.Context()
	_, err := s.Put(ctx, "k", []byte("v"), ownership.IfAbsent())
	if f := faultOf(t, err); f != FaultLoseRequest {
		t.Fatalf("put: fault %v (%v), want %v", f, err, FaultLoseRequest)
	}
	if _, ok := stored(s, "k"); ok {
		t.Fatal("a lost request was applied")
	}
	_, err = s.Get(ctx, "k")
	if f := faultOf(t, err); f != FaultLoseRequest {
		t.Fatalf("get: fault %v (%v)", f, err)
	}
	if f := faultOf(t, s.Delete(ctx, "k", ownership.Always())); f != FaultLoseRequest {
		t.Fatalf("delete: fault %v", f)
	}
}

func TestFaultLoseReply(t *testing.T) {
	s := New(Faults{LoseReply: 1})
	ctx := t.Context()
	_, err := s.Put(ctx, "k", []byte("v1"), ownership.IfAbsent())
	if f := faultOf(t, err); f != FaultLoseReply {
		t.Fatalf("put: fault %v (%v), want %v", f, err, FaultLoseReply)
	}
	if body, ok := stored(s, "k"); !ok || body != "v1" {
		t.Fatalf("a write whose reply was lost: stored (%q, %v), want it applied", body, ok)
	}
	// A refused write's refusal is lost the same way: unknown, not refused.
	_, err = s.Put(ctx, "k", []byte("v2"), ownership.IfAbsent())
	if f := faultOf(t, err); f != FaultLoseReply {
		t.Fatalf("refused put: fault %v (%v)", f, err)
	}
	if body, _ := stored(s, "k"); body != "v1" {
		t.Fatalf("stored %q after a refused write, want v1", body)
	}
}

func TestFaultUnavailable(t *testing.T) {
	ctx := t.Context()
	applied := New(Faults{UnavailableApplied: 1})
	_, err := applied.Put(ctx, "k", []byte("v"), ownership.Always())
	if f := faultOf(t, err); f != FaultUnavailableApplied {
		t.Fatalf("put: fault %v (%v)", f, err)
	}
	if _, ok := stored(applied, "k"); !ok {
		t.Fatal("503 after applying: the write is missing")
	}
	if !strings.Contains(err.Error(), "503") {
		t.Errorf("error %q does not say 503", err)
	}

	notApplied := New(Faults{UnavailableNotApplied: 1})
	_, err = notApplied.Put(ctx, "k", []byte("v"), ownership.Always())
	if f := faultOf(t, err); f != FaultUnavailableNotApplied {
		t.Fatalf("put: fault %v (%v)", f, err)
	}
	if _, ok := stored(notApplied, "k"); ok {
		t.Fatal("503 without applying: the write landed")
	}
}

// TestFaultLandLate: a late write is invisible when its caller gives up,
// lands after later requests, and its condition is evaluated when it lands.
func TestFaultLandLate(t *testing.T) {
	ctx := t.Context()
	s := New(Faults{LandLate: 1, MaxLateRequests: 1})

	body := []byte("first")
	_, err := s.Put(ctx, "k", body, ownership.IfAbsent())
	if f := faultOf(t, err); f != FaultLandLate {
		t.Fatalf("put: fault %v (%v), want %v", f, err, FaultLandLate)
	}
	copy(body, "XXXXX") // the caller reuses its buffer after giving up
	_, err = s.Put(ctx, "k", []byte("second"), ownership.IfAbsent())
	if f := faultOf(t, err); f != FaultLandLate {
		t.Fatalf("second put: fault %v", f)
	}
	if n := s.Pending(); n != 2 {
		t.Fatalf("pending %d, want 2", n)
	}
	// Reads are never late. This one is applied before the late writes
	// land, so it still sees nothing.
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("get before the late writes land: %v, want ErrNotFound", err)
	}
	// Both landed after that read, in arrival order: the first created the
	// key, the second's create-only condition was then refused.
	if n := s.Pending(); n != 0 {
		t.Fatalf("pending %d after one later request, want 0", n)
	}
	obj, err := s.Get(ctx, "k")
	if err != nil || string(obj.Body) != "first" {
		t.Fatalf("get after landing: (%q, %v), want first", obj.Body, err)
	}

	// A late if-match write whose ETag went stale meanwhile is refused when
	// it lands.
	_, err = s.Put(ctx, "k", []byte("late replace"), ownership.IfMatch(obj.ETag))
	if f := faultOf(t, err); f != FaultLandLate {
		t.Fatalf("if-match put: fault %v", f)
	}
	s.Inspect(func(st *State) {
		if _, err := st.Put("k", []byte("meanwhile"), ownership.Always()); err != nil {
			t.Fatal(err)
		}
	})
	if n := s.Settle(); n != 1 {
		t.Fatalf("Settle landed %d writes, want 1", n)
	}
	if body, _ := stored(s, "k"); body != "meanwhile" {
		t.Fatalf("stored %q, want the stale late write refused", body)
	}
}

// TestLateWritesWaitForLaterRequests: a late write lands only after the
// number of later applied requests drawn for it, never before Settle when
// nothing else happens.
func TestLateWritesWaitForLaterRequests(t *testing.T) {
	ctx := t.Context()
	s := New(Faults{Seed: 7, LandLate: 0.5, MaxLateRequests: 6})
	var lateKeys []string
	for i := range 40 {
		key := fmt.Sprintf("k%d", i)
		if _, err := s.Put(ctx, key, []byte("v"), ownership.IfAbsent()); faultOf(t, err) == FaultLandLate {
			lateKeys = append(lateKeys, key)
			if _, ok := stored(s, key); ok {
				t.Fatalf("late write %s visible when its caller gave up", key)
			}
		}
	}
	if len(lateKeys) == 0 {
		t.Fatal("seed 7 drew no late write; pick another seed")
	}
	pending := s.Pending()
	if pending == 0 || pending == len(lateKeys) {
		// Some landed during the run and the last few cannot have.
		t.Fatalf("pending %d of %d late writes", pending, len(lateKeys))
	}
	s.Settle()
	for _, k := range lateKeys {
		if _, ok := stored(s, k); !ok {
			t.Errorf("late write %s never landed", k)
		}
	}
}

func TestIgnoreConditions(t *testing.T) {
	ctx := t.Context()
	s := New(Faults{IgnoreConditions: true})
	e1, err := s.Put(ctx, "k", []byte("v1"), ownership.IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "k", []byte("v2"), ownership.IfAbsent()); err != nil {
		t.Fatalf("create-only over an existing key: %v, want it to land on a broken server", err)
	}
	if _, err := s.Put(ctx, "k", []byte("v3"), ownership.IfMatch(e1)); err != nil {
		t.Fatalf("stale if-match: %v, want it to land on a broken server", err)
	}
	if err := s.Delete(ctx, "gone", ownership.IfMatch(e1)); err != nil {
		t.Fatalf("if-match delete of a missing key: %v, want it to land on a broken server", err)
	}
}

// TestDelay runs in a synctest bubble, whose clock advances only when every
// goroutine in it is blocked, so delays of hours take no real time and the
// elapsed fake time is exactly the drawn delay.
func TestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxDelay = time.Hour
		delays := func() []time.Duration {
			s := New(Faults{Seed: 3, MaxDelay: maxDelay})
			var out []time.Duration
			for i := range 20 {
				start := time.Now()
				if _, err := s.Put(t.Context(), fmt.Sprint(i), nil, ownership.Always()); err != nil {
					t.Fatal(err)
				}
				out = append(out, time.Since(start))
			}
			return out
		}
		a := delays()
		if !slices.Equal(a, delays()) {
			t.Fatalf("same seed, different delays: %v", a)
		}
		distinct := map[time.Duration]bool{}
		for _, d := range a {
			if d < 0 || d >= maxDelay {
				t.Fatalf("delay %v outside [0, %v)", d, maxDelay)
			}
			distinct[d] = true
		}
		if len(distinct) < 10 {
			t.Fatalf("delays barely vary: %v", a)
		}

		// A deadline that ends during the delay ends the call: unknown,
		// nothing applied. The twin store shows how long the delay is.
		s := New(Faults{Seed: 3, MaxDelay: maxDelay})
		ctx, cancel := context.WithTimeout(t.Context(), a[0]/2)
		defer cancel()
		_, err := s.Put(ctx, "k", []byte("v"), ownership.Always())
		if f := faultOf(t, err); f != FaultContextDone || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("put whose deadline ends during the delay: fault %v (%v)", f, err)
		}
		if _, ok := stored(s, "k"); ok {
			t.Fatal("a request abandoned during its delay was applied")
		}
	})
}

// TestRangeReadFaults: to the faults a range read is a Get. It meets the
// fault a Get would meet in its place, consuming the same randomness, so a
// test can make one fail or hang; a bad range is refused before it is sent
// and meets none.
func TestRangeReadFaults(t *testing.T) {
	ctx := t.Context()
	lost := New(Faults{LoseRequest: 1})
	_, err := lost.GetRange(ctx, "k", 0, 10)
	if f := faultOf(t, err); f != FaultLoseRequest {
		t.Fatalf("range read: fault %v (%v), want %v", f, err, FaultLoseRequest)
	}
	_, err = lost.GetRange(ctx, "k", -1, 10)
	if f := faultOf(t, err); f != NoFault || !errors.Is(err, ownership.ErrInvalidRange) {
		t.Fatalf("range read at a negative offset: fault %v (%v), want ErrInvalidRange and no fault", f, err)
	}

	// The same seed and sequence, reads made as Gets in one store and as
	// range reads in the other: the same faults strike, request by request.
	faults := Faults{Seed: 5, LoseRequest: 0.2, LoseReply: 0.2, UnavailableApplied: 0.1, UnavailableNotApplied: 0.1}
	run := func(ranged bool) []string {
		s := New(faults)
		var out []string
		for i := range 200 {
			key := fmt.Sprintf("k%d", i%7)
			var err error
			switch {
			case i%3 == 0:
				_, err = s.Put(ctx, key, []byte("0123456789"), ownership.Always())
			case ranged:
				_, err = s.GetRange(ctx, key, 2, 5)
			default:
				_, err = s.Get(ctx, key)
			}
			out = append(out, fmt.Sprintf("%d|%v|%v", i, faultOf(t, err), ownership.OutcomeOf(err)))
		}
		return out
	}
	gets, ranges := run(false), run(true)
	if !slices.Equal(gets, ranges) {
		t.Fatalf("range reads met other faults than Gets in their place; first difference at request %d", firstDiff(gets, ranges))
	}

	// A deadline that ends during the delay ends a range read as it does
	// a Get: unknown, at the deadline.
	synctest.Test(t, func(t *testing.T) {
		s := New(Faults{Seed: 3, MaxDelay: time.Hour})
		s.Inspect(func(st *State) { st.Put("k", []byte("0123456789"), ownership.Always()) })
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := s.GetRange(ctx, "k", 0, 4)
		if f := faultOf(t, err); f != FaultContextDone || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("range read whose deadline ends during the delay: fault %v (%v)", f, err)
		}
		if d := time.Since(start); d != time.Millisecond {
			t.Fatalf("range read returned after %v, want at its deadline (1ms)", d)
		}
	})
}

// trace runs a fixed sequence of requests against a Store with every fault
// switched on and records what each request met.
func trace(t *testing.T, seed uint64) []string {
	s := New(Faults{
		Seed:                  seed,
		LoseRequest:           0.1,
		LoseReply:             0.1,
		LandLate:              0.1,
		UnavailableApplied:    0.05,
		UnavailableNotApplied: 0.05,
	})
	ctx := t.Context()
	var out []string
	etags := map[string]ownership.ETag{}
	for i := range 400 {
		key := fmt.Sprintf("k%d", i%13)
		var err error
		var etag ownership.ETag
		switch i % 4 {
		case 0:
			etag, err = s.Put(ctx, key, []byte{byte(i)}, ownership.IfAbsent())
		case 1:
			etag, err = s.Put(ctx, key, []byte{byte(i)}, ownership.IfMatch(etags[key]))
		case 2:
			var obj ownership.Object
			obj, err = s.Get(ctx, key)
			etag = obj.ETag
		case 3:
			err = s.Delete(ctx, key, ownership.IfMatch(etags[key]))
		}
		if etag != "" {
			etags[key] = etag
		}
		out = append(out, fmt.Sprintf("%d|%v|%v|%s", i, faultOf(t, err), ownership.OutcomeOf(err), etag))
	}
	s.Settle()
	var final []string
	s.Inspect(func(st *State) {
		page, _ := st.List("", "", 0)
		for _, e := range page.Entries {
			final = append(final, fmt.Sprintf("%s=%s", e.Key, e.ETag))
		}
	})
	return append(out, strings.Join(final, " "))
}

func TestDeterministicBySeed(t *testing.T) {
	a := trace(t, 42)
	if b := trace(t, 42); !slices.Equal(a, b) {
		t.Fatalf("seed 42 gave two different runs; first difference at request %d", firstDiff(a, b))
	}
	if c := trace(t, 43); slices.Equal(a, c) {
		t.Fatal("seeds 42 and 43 gave the same run")
	}
	seen := map[string]int{}
	for _, line := range a[:len(a)-1] {
		seen[strings.Split(line, "|")[1]]++
	}
	for _, f := range []Fault{NoFault, FaultLoseRequest, FaultLoseReply, FaultLandLate, FaultUnavailableApplied, FaultUnavailableNotApplied} {
		if seen[f.String()] == 0 {
			t.Errorf("fault %q never struck in 400 requests: %v", f, seen)
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFaultRates: over many requests each fault strikes about as often as
// configured. The seed is fixed, so this is exact on every run; the bounds
// only guard against a drawing bug, such as a fault shadowing another.
func TestFaultRates(t *testing.T) {
	f := Faults{Seed: 1, LoseRequest: 0.1, LoseReply: 0.2, LandLate: 0.05, UnavailableApplied: 0.15, UnavailableNotApplied: 0.1}
	s := New(f)
	const n = 20000
	counts := map[Fault]int{}
	for i := range n {
		_, err := s.Put(t.Context(), fmt.Sprint(i%100), nil, ownership.Always())
		counts[faultOf(t, err)]++
	}
	for fault, p := range map[Fault]float64{
		FaultLoseRequest: f.LoseRequest, FaultLoseReply: f.LoseReply, FaultLandLate: f.LandLate,
		FaultUnavailableApplied: f.UnavailableApplied, FaultUnavailableNotApplied: f.UnavailableNotApplied,
		NoFault: 0.4,
	} {
		got := float64(counts[fault]) / n
		if got < p*0.9 || got > p*1.1 {
			t.Errorf("%v struck %.3f of requests, want about %.3f", fault, got, p)
		}
	}
}

func TestContextDoneBeforeSending(t *testing.T) {
	s := New(Faults{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Put(ctx, "k", []byte("v"), ownership.IfAbsent())
	if f := faultOf(t, err); f != FaultContextDone || !errors.Is(err, context.Canceled) {
		t.Fatalf("put with a canceled context: fault %v (%v)", f, err)
	}
	if _, ok := stored(s, "k"); ok {
		t.Fatal("a request whose context was done was applied")
	}
}

func TestFaultsValidate(t *testing.T) {
	for _, f := range []Faults{
		{LoseRequest: -0.1},
		{LoseReply: 1.5},
		{LandLate: 0.6, LoseRequest: 0.6},
		{UnavailableApplied: nan()},
		{MaxDelay: -time.Second},
		{MaxLateRequests: -1},
	} {
		if err := f.Validate(); err == nil {
			t.Errorf("%+v: valid, want an error", f)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", f)
				}
			}()
			New(f)
		}()
	}
	if err := (Faults{LoseRequest: 0.5, LoseReply: 0.5}).Validate(); err != nil {
		t.Errorf("probabilities summing to 1: %v", err)
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}

// TestConcurrentFaults exercises the Store from many goroutines with every
// fault on; run under -race it checks the locking, and Settle at the end
// must leave nothing pending.
func TestConcurrentFaults(t *testing.T) {
	s := New(Faults{Seed: 9, LoseRequest: 0.1, LoseReply: 0.1, LandLate: 0.2, UnavailableApplied: 0.1, UnavailableNotApplied: 0.1})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("k%d", (g*7+i)%17)
				switch i % 3 {
				case 0:
					_, _ = s.Put(t.Context(), key, []byte{byte(i)}, ownership.IfAbsent())
				case 1:
					_, _ = s.Get(t.Context(), key)
				case 2:
					_ = s.Delete(t.Context(), key, ownership.Always())
				}
			}
		})
	}
	wg.Wait()
	s.Settle()
	if n := s.Pending(); n != 0 {
		t.Fatalf("pending %d after Settle", n)
	}
}

func TestHoldWrites(t *testing.T) {
	s := New(Faults{})
	ctx := t.Context()
	release := s.HoldWrites()
	inner := s.HoldWrites()

	// A held write whose caller gives up is not applied.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := s.Put(cctx, "k", []byte("v"), ownership.IfAbsent())
	if f := faultOf(t, err); f != FaultContextDone {
		t.Fatalf("put with a canceled context: fault %v (%v)", f, err)
	}
	// Reads go on.
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("get while writes are held: %v", err)
	}

	done := make(chan error)
	go func() {
		_, err := s.Put(ctx, "k", []byte("held"), ownership.IfAbsent())
		done <- err
	}()
	release()
	release() // a second call does nothing
	inner()   // the last hold: the write goes on
	if err := <-done; err != nil {
		t.Fatalf("held put after release: %v", err)
	}
	if body, ok := stored(s, "k"); !ok || body != "held" {
		t.Fatalf("stored (%q, %v)", body, ok)
	}
}
