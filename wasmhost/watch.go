package wasmhost

import (
	"sync"
	"time"
)

// watch enforces Config.EventTimeout: one goroutine per runtime looks at
// the calls under way a few times per timeout and stops those past their
// deadline (event.stop), which stops their guest at its next meter check.
// A timer per call would cost more than the rest of a short event's host
// side.
type watch struct {
	mu    sync.Mutex
	calls map[*event]time.Time // deadlines
}

// watchTicks is how many times per EventTimeout the calls are looked at:
// a guest is stopped between one and 1+1/watchTicks timeouts after its
// event began.
const watchTicks = 10

// start watches the call for ev until stop.
func (w *watch) start(ev *event, deadline time.Time) {
	w.mu.Lock()
	if w.calls == nil {
		w.calls = map[*event]time.Time{}
	}
	w.calls[ev] = deadline
	w.mu.Unlock()
}

// stop ends the watch of the call for ev.
func (w *watch) stop(ev *event) {
	w.mu.Lock()
	delete(w.calls, ev)
	w.mu.Unlock()
}

// check stops the calls whose deadline is not after now.
func (w *watch) check(now time.Time) {
	var due []*event
	w.mu.Lock()
	for ev, deadline := range w.calls {
		if !now.Before(deadline) {
			due = append(due, ev)
			delete(w.calls, ev)
		}
	}
	w.mu.Unlock()
	for _, ev := range due {
		ev.stop()
	}
}

// watchPeriod is how often the calls are looked at for timeout.
func watchPeriod(timeout time.Duration) time.Duration {
	return min(max(timeout/watchTicks, time.Millisecond), time.Second)
}
