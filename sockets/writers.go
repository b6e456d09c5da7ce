package sockets

// Writer goroutines are reused. A socket has a writer only while it has
// frames queued, so that an idle socket costs no goroutine; but a
// goroutine started per message paid for its start, its exit and, above
// all, for growing its stack from the smallest size to what a write
// needs (gorilla's framing, the deadline, the syscall), which was about
// half of the node's CPU per delivered message (BenchmarkBroadcast). A
// writer that has emptied its socket's queue waits for the next socket
// to write instead, unless maxIdleWriters already wait.

// maxIdleWriters bounds the writers kept waiting, with the stacks they
// grew: about 8 KiB each.
const maxIdleWriters = 128

// startWriter runs s.write on a waiting writer, or on a new one.
func (o *Owner) startWriter(s *socket) {
	select {
	case o.handoff <- s:
	default:
		go o.writer(s)
	}
}

// writer writes s's queue, then the queues of the sockets it is handed,
// until maxIdleWriters others wait or the Owner is shut down.
func (o *Owner) writer(s *socket) {
	for {
		s.write()
		if o.idleWriters.Add(1) > maxIdleWriters {
			o.idleWriters.Add(-1)
			return
		}
		select {
		case s = <-o.handoff:
			o.idleWriters.Add(-1)
		case <-o.stop:
			o.idleWriters.Add(-1)
			return
		}
	}
}
