package sim

import (
	"fmt"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

type scheduled struct {
	at  time.Duration
	seq uint64
	ev  any
}

type eventQueue []*scheduled

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*scheduled)) }
func (q *eventQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

type (
	evClient struct{}
	evRetry  struct{ id uint64 }
	evArrive struct {
		node, life int
		id         uint64
	}
	evOutput struct {
		node, life int
		id         uint64
		attempt    int // the client's attempt (clientEvent.attempts) it serves
		actor      ownership.Actor
		gen        ownership.Generation
	}
	evIdle struct {
		node, life int
		actor      ownership.Actor
		gen        ownership.Generation
		active     time.Duration
	}
	evSockClose struct {
		node, life int
		actor      ownership.Actor
		sock       uint64
	}
	evTimer struct {
		node, life int
		at         time.Duration
	}
	// evSweep is the sweeper's timer: a Sweep input every sweep period.
	evSweep struct{ node, life int }
	evLand  struct{ p *pendingReq }
	evReply struct {
		p                *pendingReq
		unknown, refused bool
	}
	evCrash    struct{}
	evStop     struct{}
	evDrain    struct{}
	evMove     struct{}
	evCut      struct{}
	evBlackout struct{}
	evHealLink struct{ a, b int }
	evRestart  struct{ node, life int }
	evStopNode struct{ node, life int }
	evHeal     struct{}
	// evPoll is a pass of a node's alarm poller.
	evPoll  struct{ node, life int }
	evEnded struct {
		node, life int
		actor      ownership.Actor
		gen        ownership.Generation
	}
)

func (w *World) live(id, life int) *node {
	n := w.nodes[id]
	if !n.up || n.life != life {
		return nil
	}
	return n
}

func (w *World) handle(ev any) {
	switch ev := ev.(type) {
	case evClient:
		w.newEvent()
	case evRetry:
		if ce := w.events[ev.id]; ce != nil {
			w.send(ce, nil)
		}
	case evArrive:
		ce := w.events[ev.id]
		if ce == nil {
			return
		}
		n := w.live(ev.node, ev.life)
		if n == nil {
			w.retry(ce)
			return
		}
		w.noteEv("arrive", n, ce.id, ce.room, "")
		w.step(n, ownership.Acquire{Actor: ce.room, Ref: ce.id})
	case evOutput:
		n := w.live(ev.node, ev.life)
		if n == nil {
			if ce := w.events[ev.id]; ce != nil {
				w.retry(ce)
			}
			return
		}
		w.runEvent(n, ev)
	case evStateLand:
		w.stateLand(ev.op)
	case evStateReply:
		w.stateReply(ev.op, ev.unknown, ev.refused)
	case evIdle:
		if n := w.live(ev.node, ev.life); n != nil {
			w.idle(n, ev)
		}
	case evSockClose:
		if n := w.live(ev.node, ev.life); n != nil {
			w.closeSocket(n, ev.actor, ev.sock, "client")
		}
	case evTimer:
		if n := w.live(ev.node, ev.life); n != nil && n.timerAt == ev.at {
			w.step(n, ownership.Tick{})
		}
	case evSweep:
		if n := w.live(ev.node, ev.life); n != nil {
			w.step(n, ownership.Sweep{})
			w.after(n.core.Config().SweepPeriod, evSweep{node: n.id, life: n.life})
		}
	case evLand:
		w.land(ev.p)
	case evReply:
		w.deliver(ev.p, ev.unknown, ev.refused)
	case evCrash:
		if w.chaos() {
			if n := w.pickNode(nil); n != nil {
				w.Stats.Crashes++
				w.crash(n)
				w.after(w.uniform(time.Second, 20*time.Second), evRestart{node: n.id, life: n.life})
			}
			w.after(w.exp(w.P.CrashEvery), evCrash{})
		}
	case evStop:
		if w.chaos() {
			if n := w.pickNode(nil); n != nil && !n.stopping {
				w.Stats.Stops++
				w.stopNode(n)
			}
			w.after(w.exp(w.P.StopEvery), evStop{})
		}
	case evStopNode:
		if n := w.live(ev.node, ev.life); n != nil {
			w.stopNode(n)
		}
	case evDrain:
		if w.chaos() {
			// As an operator does, a node is drained while another serves
			// (a drain with no live peer is stuck and serves: it would not
			// end while every node drains).
			if n := w.pickNode(nil); n != nil && !n.draining && !n.stopping && w.servingPeers(n) > 0 {
				w.Stats.Drains++
				n.draining, n.drainAt = true, w.now
				w.truth.drainStarted(n.inst, w.now)
				w.note("drain", n, "")
				w.step(n, ownership.Drain{})
			}
			w.after(w.exp(w.P.DrainEvery), evDrain{})
		}
	case evMove:
		if w.chaos() {
			w.randomMove()
			w.after(w.exp(w.P.MoveEvery), evMove{})
		}
	case evCut:
		if w.chaos() {
			a, b := w.rng.IntN(len(w.nodes)), w.rng.IntN(len(w.nodes))
			if a != b && !w.cut[linkKey(a, b)] {
				w.Stats.Cuts++
				w.cut[linkKey(a, b)] = true
				w.note("cut", nil, "%s-%s", w.nodes[a].name, w.nodes[b].name)
				w.after(w.uniform(time.Second, 10*time.Second), evHealLink{a: a, b: b})
			}
			w.after(w.exp(w.P.CutEvery), evCut{})
		}
	case evBlackout:
		if w.chaos() {
			if n := w.pickNode(nil); n != nil && w.now >= n.blackoutUntil {
				w.Stats.Blackouts++
				n.blackoutUntil = w.now + w.uniform(4*time.Second, 14*time.Second)
				n.blackoutLands = w.chance(0.5)
				w.note("blackout", n, "until %v lands=%v", n.blackoutUntil, n.blackoutLands)
			}
			w.after(w.exp(w.P.BlackoutEvery), evBlackout{})
		}
	case evHealLink:
		delete(w.cut, linkKey(ev.a, ev.b))
		w.note("heal-link", nil, "%s-%s", w.nodes[ev.a].name, w.nodes[ev.b].name)
	case evRestart:
		n := w.nodes[ev.node]
		if !n.up && n.life == ev.life {
			w.startNode(n)
		}
	case evHeal:
		w.heal()
	case evPoll:
		if n := w.live(ev.node, ev.life); n != nil {
			w.poll(n)
		}

	case evEnded:
		if n := w.live(ev.node, ev.life); n != nil {
			w.note("ended", n, "%s g%d", ev.actor, ev.gen)
			w.step(n, ownership.Idle{Actor: ev.actor, Gen: ev.gen})
		}
	default:
		panic(fmt.Sprintf("sim: unknown event %T", ev))
	}
}

func (w *World) stopNode(n *node) {
	if n.stopping {
		return
	}
	n.stopping = true
	w.note("stop", n, "")
	w.step(n, ownership.Stop{})
}

// randomMove moves a room held or parked on some node to another node.
func (w *World) randomMove() {
	n := w.pickNode(nil)
	if n == nil || n.draining || n.stopping {
		return
	}
	for _, i := range w.rng.Perm(len(w.rooms)) {
		a := w.rooms[i]
		_, live := n.core.Live(a)
		_, parked := n.core.Parked(a)
		if !live && !parked {
			continue
		}
		t := w.pickNode(n)
		if t == nil {
			return
		}
		w.Stats.Moves++
		w.truth.moved(n.inst, a)
		w.note("move", n, "%s -> %s", a, t.name)
		w.step(n, ownership.Move{Actor: a, Target: t.name})
		return
	}
}

// heal ends the chaos: no more faults, every link back, every node up.
func (w *World) heal() {
	w.healed, w.healAt = true, w.now
	w.note("heal", nil, "")
	for k := range w.cut {
		delete(w.cut, k)
	}
	for _, n := range w.nodes {
		n.blackoutUntil = 0
	}
	for _, n := range w.nodes {
		if !n.up {
			w.after(w.uniform(0, time.Second), evRestart{node: n.id, life: n.life})
		}
	}
}
