package certfile

import "time"

// SetClock makes r read the time from now (tests only).
func SetClock(r *Reloader, now func() time.Time) {
	r.mu.Lock()
	r.now = now
	r.mu.Unlock()
}
