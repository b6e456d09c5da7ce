package sockets

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
)

// The node's bound on queued bytes. Each socket's send queue is bounded
// (Config.SendQueue), but a node of many clients that read slowly would
// still hold that much for each of them. So what every socket holds until
// it is written is also counted in a total for the node (Owner.queued,
// the gauge wasmkeep_websocket_queued_bytes): its queued messages, the
// frame its writer is writing, the tail of a direct write the kernel took
// in part (restFrame), and the broadcasts kept for a socket being
// accepted. A broadcast's message is one buffer shared by its sockets, yet
// each socket counts all of it: the buffer is kept until the slowest of
// them has written it, and a socket's count is what closing it would give
// back of its share.
//
// Past Config.SendQueueTotal the sockets that hold the most are closed as
// slow readers (1013, ErrSlowReader), the largest first, until the total
// is back to seven eighths of the bound (shedTarget): they are the clients
// furthest behind what they were sent, and closing them gives back the
// most. The socket whose send passed the bound is closed only if it is one
// of them, so a client that reads what it is sent, and holds little, does
// not pay for those that do not. The sockets are looked over only past the
// bound, and each time at least an eighth of it is given back, so a node
// whose clients all fall behind does not look them over per message.
//
// The total may pass the bound by the messages being queued at that
// moment (a send checks it after queuing, with no lock across sockets),
// and by what is kept for sockets being accepted (each at most SendQueue),
// which is not closed before they are open.

// holdLocked counts n more bytes held by s. s.mu is held.
func (s *socket) holdLocked(n int) {
	s.queued += n
	s.o.hold(n)
}

// releaseLocked counts n bytes written by s. s.mu is held.
func (s *socket) releaseLocked(n int) {
	s.queued -= n
	s.o.hold(-n)
}

// dropQueueLocked drops what s has queued, and what its writer is writing
// from the count (the writer then releases nothing). s.mu is held.
func (s *socket) dropQueueLocked() {
	s.queue = nil
	if s.queued != 0 {
		s.o.hold(-s.queued)
	}
	s.queued, s.inflight = 0, 0
}

// hold adds n (negative: gives back) to the node's total.
func (o *Owner) hold(n int) {
	o.queued.Add(int64(n))
	o.m.queued.Add(float64(n))
}

// overTotal reports whether the node's sockets hold more than
// SendQueueTotal.
func (o *Owner) overTotal() bool {
	return o.queued.Load() > int64(o.cfg.SendQueueTotal)
}

// shedTarget is what shed brings the total back to.
func (o *Owner) shedTarget() int64 {
	limit := int64(o.cfg.SendQueueTotal)
	return limit - limit/8
}

// shed closes the sockets that hold the most, past the node's total, and
// reports whether s (nil: none) was one of them. One shed picks at a time;
// a send that finds one picking leaves it to that one (no send waits).
func (o *Owner) shed(s *socket) bool {
	if !o.shedding.TryLock() {
		return false
	}
	victims, total := o.pickVictims()
	o.shedding.Unlock()
	if len(victims) == 0 {
		return false
	}
	o.log.Warn("sockets hold more than the node's send queue total: closing the ones that hold the most",
		slog.Int64("queued_bytes", total), slog.Int("limit", o.cfg.SendQueueTotal), slog.Int("sockets", len(victims)))
	hit := false
	for _, v := range victims {
		hit = hit || v.s == s
		v.s.fail(fmt.Errorf("%w: %d bytes queued for it, %d for the node's sockets, limit %d", ErrSlowReader, v.held, total, o.cfg.SendQueueTotal))
	}
	return hit
}

type holding struct {
	s    *socket
	held int
}

// pickVictims returns, if the node's sockets hold more than their total,
// the sockets that hold the most, enough of them to bring the total back
// to shedTarget, and the total it saw.
func (o *Owner) pickVictims() ([]holding, int64) {
	total := o.queued.Load()
	if total <= int64(o.cfg.SendQueueTotal) {
		return nil, total
	}
	all := o.allSockets()
	list := make([]holding, 0, len(all))
	for _, t := range all {
		t.mu.Lock()
		held, gone := t.queued, t.aborted || t.freed
		t.mu.Unlock()
		if held > 0 && !gone {
			list = append(list, holding{t, held})
		}
	}
	slices.SortFunc(list, func(x, y holding) int {
		return cmp.Or(cmp.Compare(y.held, x.held), cmp.Compare(x.s.id, y.s.id))
	})
	left, target := total, o.shedTarget()
	n := 0
	for n < len(list) && left > target {
		left -= int64(list[n].held)
		n++
	}
	return list[:n], total
}
