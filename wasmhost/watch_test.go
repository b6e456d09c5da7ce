package wasmhost

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestWatchCancelsDueCalls: a check stops exactly the calls whose
// deadline has come, once, and never a call that stopped.
func TestWatchCancelsDueCalls(t *testing.T) {
	var w watch
	t0 := time.Unix(1000, 0)
	a, b, c := &event{parent: context.Background()}, &event{parent: context.Background()}, &event{parent: context.Background()}
	w.start(a, t0.Add(time.Second))
	w.start(b, t0.Add(3*time.Second))
	w.start(c, t0.Add(time.Second))
	w.stop(c) // c's call ended in time
	w.check(t0.Add(999 * time.Millisecond))
	if a.Err() != nil || b.Err() != nil {
		t.Fatal("a call was stopped before its deadline")
	}
	w.check(t0.Add(time.Second))
	if a.Err() == nil || b.Err() != nil || c.Err() != nil {
		t.Fatalf("at a's deadline: a %v, b %v, c %v; want only a stopped", a.Err(), b.Err(), c.Err())
	}
	w.check(t0.Add(5 * time.Second))
	if b.Err() == nil || c.Err() != nil {
		t.Fatalf("after b's deadline: b %v, c %v; want b stopped, c (ended) not", b.Err(), c.Err())
	}
	if len(w.calls) != 0 {
		t.Fatalf("%d calls still watched", len(w.calls))
	}
}

// TestEventContext: an event is its call's context: it carries itself
// and the caller's values, and is done when the timeout stops it (Err
// errStopped) or when the caller's context is (the caller's Err), its
// Done channel closed either way, made before or after.
func TestEventContext(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	defer cancel()
	ev := &event{parent: parent}
	if ev.Value(eventKey{}) != ev || ev.Value(key{}) != "v" || ev.Err() != nil {
		t.Fatalf("event context: value %v, %v; err %v", ev.Value(eventKey{}), ev.Value(key{}), ev.Err())
	}
	done := ev.Done()
	ev.stop()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Done not closed by the stop")
	}
	if !errors.Is(ev.Err(), errStopped) {
		t.Fatalf("stopped: Err %v", ev.Err())
	}
	ev.release()

	late := &event{parent: parent}
	late.stop()
	select {
	case <-late.Done():
	default:
		t.Fatal("Done made after the stop is not closed")
	}

	caller := &event{parent: parent}
	done = caller.Done()
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Done not closed when the caller's context is")
	}
	if !errors.Is(caller.Err(), context.Canceled) {
		t.Fatalf("caller gone: Err %v", caller.Err())
	}
	caller.release()
}
