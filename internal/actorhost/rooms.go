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
//     goes through it, with output or not (a restart's settling too, in
//     gateAll), and no write is answered at its commit's landing
//     (startCommit); the rooms' actor sends a new room actor its first
//     events before it tells the resident actor its PID;
//   - one residency's room actor ends (roomsActor, on the resident actor's
//     Terminated) only after everything its resident actor carried: the
//     end goes to it as a message after them. A resident actor that stops
//     hands over its last events (roomLast) after proto.actor dropped it
//     from its registry, so its Terminated may come first: what it carries
//     once its room actor was told to end waits for a room actor of its
//     own;
//   - one actor has one room actor at a time: what a later residency
//     carries waits in roomsActor until the room actor before has ended,
//     so the actor's residencies reach its sockets in order, even when a
//     supervisor stopped a resident actor and the director spawned the
//     next at once.
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
	// roomMsg: the PID of the resident actor's room actor. It may find the
	// resident actor stopped: not worth a dead letter's log line.
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
	residentGoneMsg struct {
		actor ownership.Actor
		id    string
	}
	// roomsIdleMsg: close done once no room actor is left (HibernateAll).
	roomsIdleMsg struct{ done chan struct{} }
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

func (*roomMsg) IgnoreDeadLetterLogging() {}

// roomsActor is the supervisor of the room actors (the node's tree shows
// it as "rooms", under the role sockets): it spawns one for each residency
// that asks, and ends it once its resident actor has terminated. One actor
// has one room actor at a time: a later residency's waits, with what it
// carried, until the one before has ended, so that the actor's output goes
// out in the order its residencies released it even when a supervisor
// stopped a resident actor and the director spawned the next at once. It
// restarts a room actor that failed, at once and always: a room actor keeps
// nothing but its mailbox, which a restart keeps.
type roomsActor struct {
	h      *Host
	actors map[ownership.Actor]*roomEntry
	// pids: the actor of each room actor and resident actor in actors, by
	// PID id.
	pids    map[string]ownership.Actor
	waiters []chan struct{}
	// replay: what later residencies carried, being handed on now that
	// the room actor before ended.
	replay []*carryMsg
}

// roomEntry is one actor's room actor, for the residency of resident.
type roomEntry struct {
	room, resident *actor.PID
	ending         bool // its resident actor terminated: roomEndMsg sent
	// next: what later residencies carried, waiting for this one's end.
	next []*carryMsg
}

func (rs *roomsActor) Receive(ctx actor.Context) {
	defer func() {
		if p := recover(); p != nil {
			// Contained: a restart would stop every room actor with what
			// its mailbox holds. What this message carried is answered
			// without its output (it took effect).
			rs.h.log.Error("panic in the rooms' actor; what it handled is answered without its socket output", slog.Any("panic", p))
			lost := rs.replay
			rs.replay = nil
			if m, ok := ctx.Message().(*carryMsg); ok {
				lost = append(lost, m)
			}
			for _, m := range lost {
				for _, c := range m.events {
					giveCarried(ctx, rs.h.director, m.resident, m.actor, c.m, done(c.r))
				}
			}
		}
	}()
	switch m := ctx.Message().(type) {
	case *carryMsg:
		rs.carry(ctx, m)
	case *actor.Terminated:
		a, ok := rs.pids[m.Who.Id]
		if !ok {
			return
		}
		e := rs.actors[a]
		if e.resident.Id == m.Who.Id {
			ctx.Send(ctx.Self(), &residentGoneMsg{actor: a, id: m.Who.Id})
			return
		}
		// The room actor ended (after its resident actor: a failure
		// restarts it). The next residency's room actor may start.
		delete(rs.pids, e.room.Id)
		delete(rs.pids, e.resident.Id)
		delete(rs.actors, a)
		rs.h.roomActors.Add(-1)
		rs.replay = e.next
		for len(rs.replay) > 0 {
			next := rs.replay[0]
			rs.replay = rs.replay[1:]
			rs.carry(ctx, next)
		}
		rs.idle()
	case *residentGoneMsg:
		if e := rs.actors[m.actor]; e != nil && e.resident.Id == m.id && !e.ending {
			e.ending = true
			ctx.Send(e.room, &roomEndMsg{})
		}
	case *roomsIdleMsg:
		rs.waiters = append(rs.waiters, m.done)
		rs.idle()
	}
}

// carry hands what a resident actor carried to its room actor, spawning it
// if the actor has none, or keeps it for later if the actor's room actor
// is another residency's.
func (rs *roomsActor) carry(ctx actor.Context, m *carryMsg) {
	e := rs.actors[m.actor]
	switch {
	case e == nil:
		room := &roomActor{h: rs.h, actor: m.actor, resident: m.resident}
		e = &roomEntry{resident: m.resident,
			room: ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return room }, rs.h.mailboxes()))}
		rs.actors[m.actor] = e
		rs.pids[e.room.Id], rs.pids[e.resident.Id] = m.actor, m.actor
		rs.h.roomActors.Add(1)
		ctx.Watch(m.resident) // a resident actor gone already: Terminated at once
		// The first events before the PID: once the resident actor has it,
		// it sends the room actor the next ones itself.
		ctx.Send(e.room, &outputMsg{events: m.events})
		if !m.last {
			ctx.Send(m.resident, &roomMsg{pid: e.room})
		}
	case e.ending || e.resident.Id != m.resident.Id:
		// Another residency's room actor, or this one's told to end: a
		// resident actor that stops sends its last events (roomLast) after
		// the registry dropped it, so its Terminated may come first. They
		// go to a room actor of their own once this one has ended.
		e.next = append(e.next, m)
	default:
		ctx.Send(e.room, &outputMsg{events: m.events})
	}
}

// idle wakes HibernateAll's callers once no room actor is left.
func (rs *roomsActor) idle() {
	if len(rs.actors) > 0 {
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
			flushSockets(r.h.sockets, r.actor, c.r.out, r.log)
		}
		at = i + 1
		r.answer(ctx, c)
	}
}

func (r *roomActor) answer(ctx actor.Context, c carried) {
	giveCarried(ctx, r.h.director, r.resident, r.actor, c.m, done(c.r))
}

// giveCarried answers m, carried to a room actor, with r, as answerEvent
// answers an event no one carries: it reports whether m was carried and
// unanswered, and so answered now.
func giveCarried(s actor.SenderContext, director, resident *actor.PID, a ownership.Actor, m *eventMsg, r result) bool {
	if !m.answered.CompareAndSwap(answerCarried, answerGiven) {
		return false
	}
	sendAnswer(s, director, resident, a, m, r)
	return true
}

func (r *roomActor) log() *slog.Logger {
	return r.h.log.With(slog.String("class", r.actor.Class), slog.String("name", r.actor.Name))
}
