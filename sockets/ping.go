package sockets

import (
	"time"
)

// wheelSlots is the number of slots sockets are spread over for pings: a
// socket is in slot id % wheelSlots, and one slot is pinged each
// PingInterval / wheelSlots, so pings (and the short-lived writers that
// send them) are spread evenly over the interval instead of bursting.
const wheelSlots = 32

// pingLoop is the one goroutine that pings every socket. At tick n it first
// checks the slot pinged pongLag ticks ago (about PongTimeout): a socket
// pinged then that has sent nothing since is closed as dead (1011). Then it
// pings slot n. No socket has a timer of its own.
func (o *Owner) pingLoop() {
	defer close(o.pingDone)
	tick := max(o.cfg.PingInterval/wheelSlots, time.Millisecond)
	pongLag := int64(min(max((o.cfg.PongTimeout+tick-1)/tick, 1), wheelSlots))
	t := time.NewTicker(tick)
	defer t.Stop()
	var buf []*socket
	for n := int64(wheelSlots); ; n++ { // start at a full turn: n-pongLag ≥ 0
		select {
		case <-o.stop:
			return
		case <-t.C:
		}
		checked := n - pongLag
		buf = o.slot(checked%wheelSlots, buf[:0])
		for _, s := range buf {
			o.pingOne(s, checked, true)
		}
		buf = o.slot(n%wheelSlots, buf[:0])
		for _, s := range buf {
			o.pingOne(s, n, false)
		}
		clear(buf) // keep no freed socket alive until the next tick
	}
}

// pingOne closes s as dead if it has not answered the ping of tick
// (check), or pings it at tick. A panic in it is a failure of s's room
// (failure.go): the loop goes on with the other sockets.
func (o *Owner) pingOne(s *socket, tick int64, check bool) {
	defer o.containSocket(s, opPinger)
	if check {
		if s.pingTick.Load() == tick && !s.answered.Load() {
			s.fail(ErrPingTimeout)
		}
		return
	}
	o.fault(s.actor, opPinger)
	s.ping(tick)
}

// slot appends the sockets of wheel slot i to buf.
func (o *Owner) slot(i int64, buf []*socket) []*socket {
	ws := &o.wheel[i]
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, s := range ws.sockets {
		buf = append(buf, s)
	}
	return buf
}
