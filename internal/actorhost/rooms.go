package actorhost

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// The socket output of resident actors goes out through actors of their
// rooms: once a residency of an actor has released an event with socket
// output, its released events are carried (carry) to a room actor, one per
// residency, which sends their output to the sockets (flushSockets) and
// then answers them, in the order the resident actor released them. The
// resident actor goes on with its next event meanwhile; the socket writes
// run beside it.
//
// Order, as when the resident actor sent the output itself:
//   - an event's output goes out before its answer, so a WebSocket the
//     event accepts (after its answer, package ingress) never receives the
//     event's own broadcast, nor that of an event released before it;
//   - one residency's events reach the sockets in the order they were
//     released: once a residency has a room actor, every event it releases
//     goes through it, with output or not;
//   - one residency's room actor ends (roomsActor, on the resident actor's
//     Terminated) only after everything its resident actor carried: the
//     end goes to it as a message after them. The next residency of the
//     actor starts after the director counted every event of the last one
//     done, and the room actor counts an event done only once its output
//     is out; a supervisor's stop of a resident actor is the exception (the
//     director starts the next residency at once, and the room actor of
//     the one before may still be sending).
//
// Nothing carried is lost: the director leaves an event that a room actor
// carries to it (answerCarried), even when its resident actor stopped; a
// room actor that panics answers what it carries first (the events took
// effect) and is restarted by roomsActor with its mailbox; HibernateAll
// waits for every room actor to end.

// carried is one released event handed to a room actor: its answer, with
// the socket output to send first (r.out; none when the hold may not act).
type carried struct {
	m *eventMsg
	r result
}

type (
	// carryMsg, from a resident actor to the rooms' actor, asks for a room
	// actor for the resident actor's residency (the first of its carried
	// events) or hands it the events it carried while it waited for one
	// (last: the resident actor stops and waits for no answer).
	carryMsg struct {
		actor    ownership.Actor
		resident *actor.PID
		events   []carried
		last     bool
	}
	// roomMsg: the PID of the resident actor's room actor.
	roomMsg struct{ pid *actor.PID }
	// outputMsg: released events, to send and answer in order.
	outputMsg struct{ events []carried }
	// roomEndMsg: the room actor's resident actor has terminated, and
	// nothing comes after this.
	roomEndMsg struct{}
	// residentGoneMsg: a resident actor with a room actor terminated. Sent
	// by the rooms' actor to itself, so that it comes after the carryMsg
	// the resident actor sent before its end (Terminated would overtake
	// them).
	residentGoneMsg struct{ id string }
	// roomsIdleMsg: close done once no room actor is left (HibernateAll).
	roomsIdleMsg struct{ done chan struct{} }
	// roomsCountMsg: how many room actors there are.
	roomsCountMsg struct{ reply chan int }
)

// carry hands the events released now to the residency's room actor,
// asking for one first if the residency has none. Each event's answer is
// left to it (answerCarried); one answered already (a supervisor's stop) is
// passed over.
func (ra *residentActor) carry(ctx actor.Context, events []carried) {
	kept := events[:0]
	for _, c := range events {
		if c.m.answered.CompareAndSwap(answerOpen, answerCarried) {
			kept = append(kept, c)
		}
	}
	switch {
	case len(kept) == 0:
	case ra.room != nil:
		ctx.Send(ra.room, &outputMsg{events: kept})
	case ra.roomAsked:
		ra.roomQueue = append(ra.roomQueue, kept...)
	default:
		ra.roomAsked = true
		ctx.Send(ra.h.rooms, &carryMsg{actor: ra.actor, resident: ctx.Self(), events: kept})
	}
}

// roomed says whether the residency hands its released events to a room
// actor.
func (ra *residentActor) roomed() bool { return ra.room != nil || ra.roomAsked }

// roomGiven takes the room actor's PID: what was released while it was
// asked for goes to it now, after the first events, which the rooms' actor
// handed it.
func (ra *residentActor) roomGiven(ctx actor.Context, pid *actor.PID) {
	ra.room = pid
	if len(ra.roomQueue) > 0 {
		ctx.Send(pid, &outputMsg{events: ra.roomQueue})
		ra.roomQueue = nil
	}
}

// roomLast hands the rooms' actor, as the resident actor stops, what it
// released while it waited for its room actor's PID, which will not reach
// it now.
func (ra *residentActor) roomLast(ctx actor.Context) {
	if ra.room == nil && len(ra.roomQueue) > 0 {
		ctx.Send(ra.h.rooms, &carryMsg{actor: ra.actor, resident: ctx.Self(), events: ra.roomQueue, last: true})
		ra.roomQueue = nil
	}
}

// roomsActor is the supervisor of the room actors (the node's tree shows
// it as "rooms", under the role sockets): it spawns one for each residency
// that asks, and ends it once its resident actor has terminated. It
// restarts a room actor that failed, at once and always: a room actor
// keeps nothing but its mailbox, which a restart keeps.
type roomsActor struct {
	h *Host
	// rooms: the room actors by their resident actor's PID id; residents,
	// the other way.
	rooms     map[string]*actor.PID
	residents map[string]string
	waiters   []chan struct{}
}

func (rs *roomsActor) Receive(ctx actor.Context) {
	defer func() {
		if p := recover(); p != nil {
			// Contained: a restart would stop every room actor with what
			// its mailbox holds. What this message carried is answered
			// without its output (it took effect).
			rs.h.log.Error("panic in the rooms' actor; what it handled is answered without its socket output", slog.Any("panic", p))
			if m, ok := ctx.Message().(*carryMsg); ok {
				for _, c := range m.events {
					if c.m.answered.CompareAndSwap(answerCarried, answerGiven) {
						sendAnswer(ctx, rs.h.pid, m.resident, m.actor, c.m, done(c.r))
					}
				}
			}
		}
	}()
	switch m := ctx.Message().(type) {
	case *carryMsg:
		pid := rs.rooms[m.resident.Id]
		if pid == nil {
			room := &roomActor{h: rs.h, actor: m.actor, resident: m.resident}
			pid = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return room }, rs.h.mailboxes()))
			rs.rooms[m.resident.Id] = pid
			rs.residents[pid.Id] = m.resident.Id
			ctx.Watch(m.resident) // a resident actor gone already: Terminated at once
			if !m.last {
				ctx.Send(m.resident, &roomMsg{pid: pid})
			}
		}
		ctx.Send(pid, &outputMsg{events: m.events})
	case *actor.Terminated:
		if _, ok := rs.rooms[m.Who.Id]; ok {
			ctx.Send(ctx.Self(), &residentGoneMsg{id: m.Who.Id})
			return
		}
		if resident, ok := rs.residents[m.Who.Id]; ok {
			// A room actor ended. Its own end, after its resident actor's,
			// only: a failure restarts it.
			delete(rs.residents, m.Who.Id)
			if pid := rs.rooms[resident]; pid != nil && pid.Id == m.Who.Id {
				delete(rs.rooms, resident)
			}
			rs.idle()
		}
	case *residentGoneMsg:
		if pid := rs.rooms[m.id]; pid != nil {
			delete(rs.rooms, m.id)
			ctx.Send(pid, &roomEndMsg{})
		}
	case *roomsIdleMsg:
		rs.waiters = append(rs.waiters, m.done)
		rs.idle()
	case *roomsCountMsg:
		m.reply <- len(rs.residents)
	}
}

// idle wakes HibernateAll's callers once no room actor is left.
func (rs *roomsActor) idle() {
	if len(rs.residents) > 0 {
		return
	}
	for _, w := range rs.waiters {
		close(w)
	}
	rs.waiters = nil
}

// roomActor carries out the socket output of one residency of one actor,
// and answers its events (see the top of this file).
type roomActor struct {
	h        *Host
	actor    ownership.Actor
	resident *actor.PID
}

func (r *roomActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *outputMsg:
		r.output(ctx, m.events)
	case *roomEndMsg:
		ctx.Stop(ctx.Self())
	}
}

// output sends each event's socket output, then answers it. Should it
// panic, the events not yet answered are answered without the rest of
// their output (they took effect) before the panic reaches roomsActor.
func (r *roomActor) output(ctx actor.Context, events []carried) {
	if r.h.roomHold != nil {
		r.h.roomHold()
	}
	at := 0
	defer func() {
		if p := recover(); p != nil {
			r.log().Error("panic while a room actor sends its events' socket output; they are answered without it", slog.Any("panic", p))
			for _, c := range events[at:] {
				r.answer(ctx, c)
			}
			panic(p)
		}
	}()
	for i, c := range events {
		at = i
		if len(c.r.out) > 0 {
			flushSockets(r.h.cfg.Sockets, r.actor, c.r.out, r.log)
		}
		at = i + 1
		r.answer(ctx, c)
	}
}

func (r *roomActor) answer(ctx actor.Context, c carried) {
	if c.m.answered.CompareAndSwap(answerCarried, answerGiven) {
		sendAnswer(ctx, r.h.pid, r.resident, r.actor, c.m, done(c.r))
	}
}

func (r *roomActor) log() *slog.Logger {
	return r.h.log.With(slog.String("class", r.actor.Class), slog.String("name", r.actor.Name))
}
