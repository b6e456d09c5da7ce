package wasmhost

import (
	"context"
	"testing"
	"time"
)

// TestWatchCancelsDueCalls: a check cancels exactly the calls whose
// deadline has come, once, and never a call that stopped.
func TestWatchCancelsDueCalls(t *testing.T) {
	var w watch
	t0 := time.Unix(1000, 0)
	a, b, c := &event{}, &event{}, &event{}
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	ctxC, cancelC := context.WithCancel(context.Background())
	defer cancelA()
	defer cancelB()
	defer cancelC()
	w.start(a, t0.Add(time.Second), cancelA)
	w.start(b, t0.Add(3*time.Second), cancelB)
	w.start(c, t0.Add(time.Second), cancelC)
	w.stop(c) // c's call ended in time
	w.check(t0.Add(999 * time.Millisecond))
	if ctxA.Err() != nil || ctxB.Err() != nil {
		t.Fatal("a call was cancelled before its deadline")
	}
	w.check(t0.Add(time.Second))
	if ctxA.Err() == nil || ctxB.Err() != nil || ctxC.Err() != nil {
		t.Fatalf("at a's deadline: a %v, b %v, c %v; want only a cancelled", ctxA.Err(), ctxB.Err(), ctxC.Err())
	}
	w.check(t0.Add(5 * time.Second))
	if ctxB.Err() == nil || ctxC.Err() != nil {
		t.Fatalf("after b's deadline: b %v, c %v; want b cancelled, c (stopped) not", ctxB.Err(), ctxC.Err())
	}
	if len(w.calls) != 0 {
		t.Fatalf("%d calls still watched", len(w.calls))
	}
}
