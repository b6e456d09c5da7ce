package wasmhost

import (
	"context"
	"sync"
	"time"
)

// watch enforces Config.EventTimeout: one goroutine per runtime looks at
// the calls under way a few times per timeout and cancels the context of
// those past their deadline, which stops their guest (the runtime closes a
// module whose call's context is done). A timer per call would cost more
// than the rest of a short event's host side.
type watch struct {
	mu    sync.Mutex
	calls map[*event]watchedCall
}

type watchedCall struct {
	deadline time.Time
	cancel   context.CancelFunc
}

// watchTicks is how many times per EventTimeout the calls are looked at:
// a guest is stopped between one and 1+1/watchTicks timeouts after its
// event began.
const watchTicks = 10

// start watches the call for ev that cancel stops, until stop.
func (w *watch) start(ev *event, deadline time.Time, cancel context.CancelFunc) {
	w.mu.Lock()
	if w.calls == nil {
		w.calls = map[*event]watchedCall{}
	}
	w.calls[ev] = watchedCall{deadline: deadline, cancel: cancel}
	w.mu.Unlock()
}

// stop ends the watch of the call for ev.
func (w *watch) stop(ev *event) {
	w.mu.Lock()
	delete(w.calls, ev)
	w.mu.Unlock()
}

// check cancels the calls whose deadline is not after now.
func (w *watch) check(now time.Time) {
	var due []context.CancelFunc
	w.mu.Lock()
	for ev, c := range w.calls {
		if !now.Before(c.deadline) {
			due = append(due, c.cancel)
			delete(w.calls, ev)
		}
	}
	w.mu.Unlock()
	for _, cancel := range due {
		cancel()
	}
}

// watchPeriod is how often the calls are looked at for timeout.
func watchPeriod(timeout time.Duration) time.Duration {
	return min(max(timeout/watchTicks, time.Millisecond), time.Second)
}
