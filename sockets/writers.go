package sockets

import "sync"

// Writer goroutines are reused. A socket has a writer only while it has
// frames queued, so that an idle socket costs no goroutine; but a
// goroutine started per message paid for its start, its exit and, above
// all, for growing its stack from the smallest size to what a write
// needs (gorilla's framing, the deadline, the syscall), which was about
// half of the node's CPU per delivered message (BenchmarkBroadcast). A
// writer that has emptied its socket's queue waits for the next socket
// to write instead, unless maxIdleWriters already wait. Each waits on a
// channel of its own: a receive from one channel costs less than a
// select over two.

// maxIdleWriters bounds the writers kept waiting, with the stacks they
// grew: about 8 KiB each.
const maxIdleWriters = 128

// writers holds the waiting writers' channels.
type writers struct {
	mu      sync.Mutex
	idle    []chan *socket // the last one waited least
	stopped bool
}

// startWriter runs s.write on a waiting writer, or on a new one.
func (o *Owner) startWriter(s *socket) {
	w := &o.writers
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- s
		return
	}
	w.mu.Unlock()
	go o.writer(s)
}

// writer writes s's queue, then the queues of the sockets it is handed,
// until maxIdleWriters others wait or the writers are stopped.
func (o *Owner) writer(s *socket) {
	w := &o.writers
	ch := make(chan *socket, 1)
	for s != nil {
		s.write()
		w.mu.Lock()
		if w.stopped || len(w.idle) >= maxIdleWriters {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, ch)
		w.mu.Unlock()
		s = <-ch
	}
}

// stop ends the waiting writers; a writer that ends a write later ends
// too.
func (w *writers) stop() {
	w.mu.Lock()
	w.stopped = true
	idle := w.idle
	w.idle = nil
	w.mu.Unlock()
	for _, ch := range idle {
		ch <- nil
	}
}

// waiting returns how many writers wait.
func (w *writers) waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.idle)
}
