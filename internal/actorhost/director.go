package actorhost

import (
	"container/list"
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Messages to the director.
type (
	eventMsg struct {
		ctx   context.Context
		actor ownership.Actor
		class actors.Class
		gen   ownership.Generation
		// sealed: the state as the grant's acquisition sealed it, or nil
		// (see ownership.Sealed); the hold's first load takes it.
		sealed *ownership.Sealed
		req    *actors.Request
		sock   *actors.SocketEvent // instead of req: a socket event
		// dialStamp: sock is the close of an outbound socket of that
		// socket owner, found gone at a wake (dial.go); 0 for any other.
		dialStamp uint64
		alarm     *alarmEvent // instead of req: an alarm's delivery
		// key: the request's event key (keys.go), if it has one.
		key   *keyedEvent
		reply chan result
		id    uint64 // set by the director: names the event until it is done
		// spawned: the director spawned the actor's proto.actor actor for
		// this event (the actor was not resident: the event woke it).
		spawned bool
		// stage is how far the event got (stageRunning, stageCalled,
		// stageGated): what a panic that escapes its actor leaves to
		// answer (director.HandleFailure). Set on the actor's goroutine,
		// read on the director's.
		stage atomic.Int32
		// answered: whether the event's caller has its answer
		// (answerOpen, answerGiven) or its room actor will give it
		// (answerCarried, rooms.go). It leaves answerOpen once, by
		// whichever goroutine answers or carries the event first.
		answered atomic.Uint32
		// values: what the event's context carries while it runs, set by
		// its resident actor (event).
		values eventValues
	}
	// doneMsg: a resident actor finished one event (key: its event key's
	// name, if it had one).
	doneMsg struct {
		actor ownership.Actor
		pid   *actor.PID
		id    uint64
		key   string
	}
	// idleMsg: the idle timer armed after event seq fired.
	idleMsg struct {
		actor ownership.Actor
		seq   uint64
	}
	// mergingMsg: a resident actor started a merge of its runs (on), or
	// has its result back. While it merges, its idle timer does not stop
	// it, so that a big actor that goes quiet still finishes the merges
	// its writes called for, instead of leaving them to its next wake:
	// the timer is armed again when the merge is back. An eviction past
	// MaxResident, a stop or a drain stops it all the same (the merge is
	// cancelled, and what it wrote swept later).
	mergingMsg struct {
		actor ownership.Actor
		pid   *actor.PID
		on    bool
	}
	stopActingMsg struct {
		actor ownership.Actor
		gen   ownership.Generation
	}
	// adoptMsg: make a resident here under the hold at gen without an
	// event (a move's target took it); its idle timer runs from now.
	adoptMsg struct {
		actor ownership.Actor
		class actors.Class
		gen   ownership.Generation
	}
	abandonedMsg struct {
		actor ownership.Actor
		gen   ownership.Generation
	}
	closeMsg struct {
		idle bool
		done chan struct{} // closed once no resident actor is left
	}
	countMsg struct {
		reply   chan int
		byClass chan map[string]int
	}
	// mergesMsg: close done once no resident actor merges its runs.
	mergesMsg struct{ done chan struct{} }
)

// keyedEvent is an event's key, with the fingerprint of its request (sum)
// and whether the key was looked up and found to keep nothing (absent):
// apart from eventMsg, which every event allocates and few with a key.
type keyedEvent struct {
	EventKey
	sum    [32]byte
	absent bool
}

// tryAnswer gives the event's caller r unless the event has its answer
// already, and reports whether it did: the first answer of an event is the
// one its caller gets, whoever gives it (the resident actor, its commit's
// goroutine, the director when the actor failed or stopped).
func (m *eventMsg) tryAnswer(r result) bool {
	if !m.answered.CompareAndSwap(answerOpen, answerGiven) {
		return false
	}
	m.reply <- r // buffered for one answer, and this is the one
	return true
}

// The states of eventMsg.answered.
const (
	answerOpen uint32 = iota
	answerGiven
	// answerCarried: released, its answer handed with its socket output
	// to its room actor (carry), which gives it once the output is out; no
	// one else answers it.
	answerCarried
)

// keyName is the name of the event's key, or "" without one.
func (m *eventMsg) keyName() string {
	if m.key == nil {
		return ""
	}
	return m.key.name()
}

// The stages of an event (eventMsg.stage).
const (
	stageRunning int32 = iota // it runs, or has not yet
	stageCalled               // it sent a call: part of it may have taken effect
	stageGated                // it waits at the output gate (residentActor.waiting)
)

type result struct {
	resp *actors.Response
	err  error
	out  []socketOp // socket sends and closes, carried out with the output
	woke bool       // the event found the actor not resident
}

// residentEntry is the director's view of one resident actor.
type residentEntry struct {
	pid     *actor.PID
	gen     ownership.Generation // highest generation an event was sent with
	pending int                  // events sent and not done
	// replies: the events sent and not done, by event id: answered here
	// if the actor stops without answering them (its supervisor stopped
	// it).
	replies map[uint64]*eventMsg
	seq     uint64 // events sent so far; names the idle timer
	merging bool   // see mergingMsg
	timer   *time.Timer
	elem    *list.Element // in lru; front is most recent
	// ended is set when the hold ended (StopActing, a lost lease): events
	// still queued in the actor's mailbox then fail without touching the
	// bucket. It is the one thing the director and the actor share.
	ended *atomic.Bool
	// keys: the names of the event keys of the events sent and not done.
	keys map[string]struct{}
}

// director owns the resident set. It never blocks: it only sends.
type director struct {
	h        *Host
	entries  map[ownership.Actor]*residentEntry
	byPID    map[string]ownership.Actor // the resident actors by PID id
	lru      *list.List                 // of ownership.Actor
	children int                        // spawned and not yet terminated
	closed   bool
	waiters  []chan struct{}
	// confirm: resident actors stopped by StopActing, by PID id; when one
	// has terminated, the keeper is told (Keeper.Idle at the stopped
	// generation).
	confirm map[string]ended
	// mergeWaiters are closed once no resident actor merges (AwaitMerges).
	mergeWaiters []chan struct{}
}

type ended struct {
	actor ownership.Actor
	gen   ownership.Generation
}

// Receive handles one message. A panic here reaches the director's own
// supervisor (the node's tree), which restarts it: the event that failed is
// answered first (not run: it never reached its actor), and the restart
// stops every resident actor, whose Terminated this incarnation still
// handles (answering what waited for them, telling the keeper).
func (d *director) Receive(ctx actor.Context) {
	defer func() {
		if p := recover(); p != nil {
			if m, ok := ctx.Message().(*eventMsg); ok {
				m.tryAnswer(result{err: d.h.notRun(m.actor, "director failed")})
			}
			panic(p)
		}
	}()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d.release() // a restart during a stop: nothing is resident now
	case *eventMsg:
		d.event(ctx, m)
	case *doneMsg:
		d.done(ctx, m)
	case *idleMsg:
		if e := d.entries[m.actor]; e != nil && e.seq == m.seq && e.pending == 0 && !e.merging {
			d.remove(ctx, m.actor, e, "idle", true)
		}
	case *mergingMsg:
		if e := d.entries[m.actor]; e != nil && e.pid.Id == m.pid.Id {
			e.merging = m.on
			if !m.on && e.pending == 0 {
				d.armIdle(ctx, m.actor, e)
			}
		}
		d.mergesDone()
	case *mergesMsg:
		d.mergeWaiters = append(d.mergeWaiters, m.done)
		d.mergesDone()
	case *stopActingMsg:
		// The keeper releases the hold once told its resident actor has
		// ended: until then a commit of that actor may still be in flight.
		if e := d.entries[m.actor]; e != nil && e.gen <= m.gen {
			d.remove(ctx, m.actor, e, "stop acting", false)
			d.confirm[e.pid.Id] = ended{actor: m.actor, gen: m.gen}
		} else {
			d.h.cfg.Keeper.Idle(m.actor, m.gen) // that hold is not resident here
		}
	case *adoptMsg:
		d.adopt(ctx, m)
	case *abandonedMsg:
		if e := d.entries[m.actor]; e == nil || e.gen != m.gen {
			d.h.cfg.Keeper.Idle(m.actor, m.gen)
		}
	case *closeMsg:
		d.closed = true
		reason := "node exited"
		if m.idle {
			reason = "node stopping"
		}
		for d.lru.Len() > 0 {
			a := d.lru.Back().Value.(ownership.Actor)
			d.remove(ctx, a, d.entries[a], reason, m.idle)
		}
		if m.done != nil {
			d.waiters = append(d.waiters, m.done)
			d.release()
		}
	case *countMsg:
		if m.byClass != nil {
			counts := map[string]int{}
			for a := range d.entries {
				counts[a.Class]++
			}
			m.byClass <- counts
			return
		}
		m.reply <- len(d.entries)
	case *actor.Terminated:
		d.children--
		if c, ok := d.confirm[m.Who.Id]; ok {
			delete(d.confirm, m.Who.Id)
			d.h.cfg.Keeper.Idle(c.actor, c.gen)
		}
		if a, ok := d.byPID[m.Who.Id]; ok {
			// Still resident: its supervisor stopped it. Its commits are
			// durable; the next event spawns it anew. The events
			// still queued for it were dropped with it: answer their callers.
			e := d.entries[a]
			for id, m := range e.replies {
				// One answered already (a write its commit's goroutine
				// answered, say) keeps its answer.
				m.tryAnswer(result{err: d.h.notRun(a, "actor stopped by its supervisor")})
				delete(e.replies, id)
			}
			d.remove(ctx, a, e, "stopped by supervisor", true)
		}
		d.release()
	}
}

func (d *director) event(ctx actor.Context, m *eventMsg) {
	if d.closed {
		m.tryAnswer(result{err: d.h.notRun(m.actor, "node stopping")})
		return
	}
	e := d.entries[m.actor]
	if m.key != nil && e != nil {
		if _, running := e.keys[m.key.name()]; running {
			// The first event with the key has not been answered yet.
			resp := actors.Text(http.StatusConflict, "a request with this "+IdempotencyHeader+" is still running\n")
			resp.Header.Set(OutcomeHeader, "running")
			m.tryAnswer(result{resp: resp})
			return
		}
	}
	if e == nil {
		e = d.spawn(ctx, m.actor, m.class, m.gen)
		m.spawned = true
	} else {
		d.lru.MoveToFront(e.elem)
	}
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.gen = max(e.gen, m.gen)
	e.pending++
	e.seq++
	m.id = e.seq
	e.replies[m.id] = m
	if m.key != nil {
		e.keys[m.key.name()] = struct{}{}
	}
	ctx.Send(e.pid, m)
}

// spawn makes a resident: its proto.actor actor and its entry.
func (d *director) spawn(ctx actor.Context, a ownership.Actor, class actors.Class, gen ownership.Generation) *residentEntry {
	ra := &residentActor{h: d.h, actor: a, class: class, ended: new(atomic.Bool), classSeen: d.h.switches.Load()}
	opts := []actor.PropsOption{d.h.mailboxes()}
	if d.h.cfg.Supervision != nil {
		opts = append(opts, d.h.cfg.Supervision.Props(a.Class)...)
	}
	e := &residentEntry{pid: ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return ra }, opts...)), ended: ra.ended,
		replies: map[uint64]*eventMsg{}, keys: map[string]struct{}{}}
	d.byPID[e.pid.Id] = a
	e.elem = d.lru.PushFront(a)
	d.entries[a] = e
	d.children++
	if d.h.log.Enabled(context.Background(), slog.LevelDebug) {
		d.h.log.Debug("actor woke", slog.String("class", a.Class), slog.String("name", a.Name),
			slog.Uint64("gen", uint64(gen)))
	}
	d.evict(ctx)
	return e
}

// adopt makes a resident under a hold taken without an event (a move's
// target): it stays until its idle timer fires, so that the events that
// follow the move find it here.
func (d *director) adopt(ctx actor.Context, m *adoptMsg) {
	if d.closed {
		d.h.cfg.Keeper.Idle(m.actor, m.gen)
		return
	}
	e := d.entries[m.actor]
	if e == nil {
		e = d.spawn(ctx, m.actor, m.class, m.gen)
	}
	e.gen = max(e.gen, m.gen)
	if e.pending == 0 {
		d.armIdle(ctx, m.actor, e)
	}
}

// HandleFailure makes the director the supervisor of the resident actors: a
// panic that escaped a resident actor's Receive lands here, on the
// director's goroutine. The event that panicked is lost to the actor, so its
// caller is answered here and the event counted done; then the class's
// strategy (Config.Supervision) restarts or stops the actor. Without
// Config.Supervision, proto.actor's default strategy decides alone.
func (d *director) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	a, known := d.byPID[child.Id]
	if d.h.cfg.Supervision == nil || !known {
		actor.DefaultSupervisorStrategy().HandleFailure(sys, sup, child, rs, reason, message)
		return
	}
	if ev, ok := actor.UnwrapEnvelopeMessage(message).(*eventMsg); ok {
		// An event at the gate is answered by the actor's restart or stop,
		// which settles what waits there by its commit's outcome. One that
		// had not got there took no effect, unless it had sent a call.
		var err error
		switch ev.stage.Load() {
		case stageRunning:
			err = d.h.unavailable(ev.actor, "actor failed")
		case stageCalled:
			err = unknownOutcome(ev.actor, "actor failed after the event called another actor")
		}
		if err != nil {
			ev.tryAnswer(result{err: err})
		}
		if ctx, ok := sup.(actor.Context); ok {
			d.done(ctx, &doneMsg{actor: ev.actor, pid: child, id: ev.id, key: ev.keyName()})
		}
	}
	d.h.cfg.Supervision.Strategy(a.Class).HandleFailure(sys, sup, child, rs, reason, message)
}

// evict hibernates the least recently used idle actors past MaxResident.
func (d *director) evict(ctx actor.Context) {
	for el := d.lru.Back(); el != nil && len(d.entries) > d.h.cfg.MaxResident; {
		prev := el.Prev()
		a := el.Value.(ownership.Actor)
		if e := d.entries[a]; e.pending == 0 {
			d.remove(ctx, a, e, "evicted", true)
		}
		el = prev
	}
}

func (d *director) done(ctx actor.Context, m *doneMsg) {
	e := d.entries[m.actor]
	if e == nil || e.pid.Id != m.pid.Id {
		return // removed meanwhile
	}
	if _, ok := e.replies[m.id]; !ok {
		return // counted done already (a panic's event, answered by HandleFailure)
	}
	e.pending--
	delete(e.replies, m.id)
	if m.key != "" {
		delete(e.keys, m.key)
	}
	if e.pending > 0 {
		return
	}
	d.armIdle(ctx, m.actor, e)
	if len(d.entries) > d.h.cfg.MaxResident {
		d.evict(ctx)
	}
}

// armIdle starts the idle timer of a resident with no event pending: a
// message-based timer, so that the director alone decides, in its own
// mailbox order, whether the actor is still idle when it fires.
func (d *director) armIdle(ctx actor.Context, a ownership.Actor, e *residentEntry) {
	if e.timer != nil {
		e.timer.Stop()
	}
	seq, self, root := e.seq, ctx.Self(), d.h.cfg.System.Root
	e.timer = time.AfterFunc(d.h.cfg.IdleTimeout, func() { root.Send(self, &idleMsg{actor: a, seq: seq}) })
}

// remove takes a out of the resident set. The actor is told to finish
// (finishMsg): events already in its mailbox still run (and fail the
// output gate if the hold is gone), then it commits and releases what ran
// and stops, and its state is dropped. With idle, the keeper is
// told the hold is idle so that it releases or parks it.
func (d *director) remove(ctx actor.Context, a ownership.Actor, e *residentEntry, reason string, idle bool) {
	delete(d.entries, a)
	delete(d.byPID, e.pid.Id)
	defer d.mergesDone()
	d.lru.Remove(e.elem)
	if e.timer != nil {
		e.timer.Stop()
	}
	if !idle {
		e.ended.Store(true)
	}
	ctx.Send(e.pid, finishMsg{})
	if idle && e.gen > 0 {
		d.h.cfg.Keeper.Idle(a, e.gen)
	}
	d.h.log.Debug("actor hibernated", slog.String("class", a.Class), slog.String("name", a.Name),
		slog.Uint64("gen", uint64(e.gen)), slog.String("reason", reason))
	if d.h.cfg.OnHibernate != nil {
		d.h.cfg.OnHibernate(a, e.gen, reason)
	}
}

// mergesDone wakes AwaitMerges' callers once no resident actor merges.
func (d *director) mergesDone() {
	if len(d.mergeWaiters) == 0 {
		return
	}
	for _, e := range d.entries {
		if e.merging {
			return
		}
	}
	for _, w := range d.mergeWaiters {
		close(w)
	}
	d.mergeWaiters = nil
}

// release wakes HibernateAll's callers once no resident actor is left.
func (d *director) release() {
	if !d.closed || d.children > 0 {
		return
	}
	for _, w := range d.waiters {
		close(w)
	}
	d.waiters = nil
}
