package actorhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/internal/eventctx"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
)

// residentActor is the proto.actor actor of one resident actor: its mailbox
// serialises the actor's events. Events run one at a time on the working
// state, which includes the writes of earlier events whose commit has not
// landed yet; their responses wait at the output gate until it has. At most
// one commit is in flight: the writes of every event that ran meanwhile go
// out together in the next one (group commit).
type residentActor struct {
	h     *Host
	actor ownership.Actor
	class actors.Class
	// classSeen is the Host's switch count (SwitchNow) class was taken at.
	classSeen uint64
	// dialCheck: the next event reads the records of the actor's outbound
	// sockets first (set at each load; dial.go).
	dialCheck bool
	ended     *atomic.Bool // see residentEntry.ended
	// per is the class's Resident for this residency when the class is a
	// ResidentClass, made at the first event and closed when the actor
	// stops being resident.
	per actors.Resident
	// sql is the actor's SQL connection (sql.go), opened at its first SQL
	// call and closed with per.
	sql actorstore.SQL
	// room is the residency's room actor (rooms.go), once the rooms'
	// actor gave it (roomAsked: asked for; roomQueue: what was released
	// meanwhile, to hand it next).
	room      *actor.PID
	roomAsked bool
	roomQueue []carried

	// Invariant: when loaded, state is the working state of the hold at
	// gen: the object at etag in the bucket (stamped with gen by the
	// acquisition's seal or a seal here, then this residency's commits),
	// plus the writes of the events after version durable.
	loaded bool
	gen    ownership.Generation
	etag   ownership.ETag
	state  *actorstore.State
	// sealTaken is the generation whose seal's copy of the state a load
	// took: a load again under it (after a failed commit dropped the
	// state) reads the bucket, as the copy may be older than what the
	// failed commit wrote.
	sealTaken ownership.Generation
	// unsettled is the generation of a hold with a commit that may still
	// land (its outcome stayed unknown): that hold's next load fences the
	// state before it reads it (ownership.JudgeReload), so that nothing
	// it decides from the read is undone by the commit landing after.
	unsettled ownership.Generation

	// loading is the load of the state under way, if any (startLoad);
	// switching, a later grant's events held while the earlier hold's
	// events settle (beginSwitch).
	loading   *stateLoad
	switching *grantSwitch
	// asking is the output gate's question to the keeper while its answer
	// is on its way (release); asks numbers the questions.
	asking *mayActAsk
	asks   uint64
	// ending: the actor restarts or stops, and waits in Receive for what
	// it must (settleEnding). finishing: the director let it go
	// (finishMsg), and it settles by message before it stops itself;
	// stopAsked, it has.
	ending, finishing, stopAsked bool

	// compacting is the merge of runs under way, if any (compact.go);
	// collecting the deletes of garbage (collect).
	compacting *background[*compactedMsg]
	collecting *collection
	// undeleted is the garbage that the last head landed lists and no
	// collection has tried to delete since.
	undeleted []actorstore.RunName
	// stopping: the actor got actor.Stopping, and starts no background
	// work (see background).
	stopping bool
	// stalling: the commit waits for that merge (see stalled); settling:
	// the actor is settling its events, and no commit waits.
	stalling, settling bool

	// index is the alarm index's entries of the alarms the events since
	// the last commit set: the next commit writes them before its head.
	index []string

	version  uint64     // events with writes applied to state
	durable  uint64     // the version the bucket holds
	inflight *commitJob // the commit in flight, if any
	waiting  []waiter   // responses held at the output gate, in order
	// lastFailure is the outcome of the last commit that did not land.
	lastFailure ownership.Outcome
	// timed counts the timed event keys this residency kept (remember).
	timed int
}

// waiter is an event that ran and waits for the commit of the writes it
// may have seen (version upto) before its response goes out. wrote: upto
// is the version of its own writes; earlier: part of it took effect before
// its end (ownership.EventEnd).
type waiter struct {
	m       *eventMsg
	r       result
	upto    uint64
	wrote   bool
	earlier bool
	gated   ownership.Gated // release's verdict, while it decides
	// early: a commit's goroutine answers it when the commit lands
	// (commitJob.early); its result is final, and the actor reads nothing
	// of it after the commit started, since the caller may own it by then.
	early bool
}

// releasedByLanding says whether the gate releases w once the commit that
// carries its writes lands, whatever else holds then: it took effect
// (ownership.Gate releases it without asking whether the hold may act),
// and its answer carries no socket output and accepts no WebSocket, which
// go out only while the hold may act.
func (w *waiter) releasedByLanding() bool {
	return (w.wrote || w.earlier) && len(w.r.out) == 0 && (w.r.resp == nil || w.r.resp.Accept == nil)
}

// commitJob is one commit in flight: the state as of version, encoded.
type commitJob struct {
	version uint64
	seq     uint64
	head    actorstore.Head
	body    []byte               // the state object written (resolve compares it)
	garbage []actorstore.RunName // what the head lists as garbage
	done    chan commitResult    // buffered: the writer never blocks
	// early are the first waiting events, carried by this commit, that
	// its landing releases whatever else holds (releasedByLanding): the
	// commit's goroutine answers them as soon as it lands, before its
	// answer goes back to the actor's mailbox, which saves them that
	// hand-off. Their results are final (done) when the job starts. The
	// actor, which takes the landing only after those answers, leaves
	// them to the goroutine; should the commit not land, the actor
	// answers them by the gate's rule (answerEvent keeps the first answer
	// of an event, whoever gives it).
	early []waiter
}

type commitResult struct {
	etag ownership.ETag
	err  error
	// headSent: the head's write was sent (the runs before it landed), so
	// err is the head's; otherwise nothing the events wrote can land.
	headSent bool
}

// outcome is what became of the commit, for the output gate: a head never
// sent did not land.
func (res commitResult) outcome() ownership.Outcome {
	if res.err != nil && !res.headSent {
		return ownership.Failed
	}
	return ownership.OutcomeOf(res.err)
}

// mayActAsk is a question to the keeper the output gate waits for by
// message: may the hold at gen act now? through is the durable version
// when it was asked: the answer releases the events that version covers.
type mayActAsk struct {
	tag     uint64
	gen     ownership.Generation
	through uint64
}

// grantSwitch holds the events of a later grant while the actor finishes
// the earlier hold's events (their commits and their release, each by
// message) and then asks the keeper whether the new hold may act (tag,
// while the answer is on its way).
type grantSwitch struct {
	stash   []*eventMsg
	settled bool
	tag     uint64
}

// collection is the deletes of garbage under way (collect): the names it
// deletes, and those whose delete landed.
type collection struct {
	names []actorstore.RunName
	*background[[]actorstore.RunName]
}

// collectedMsg brings the deletes of garbage back (collect).
type collectedMsg struct{ c *collection }

// commitDoneMsg tells the resident actor its commit in flight has an answer.
type commitDoneMsg struct{ job *commitJob }

// finishMsg tells a resident actor that the director let it go (idle,
// evicted, its hold ended, the node stopping): it finishes the events that
// ran, and stops (advanceFinish).
type finishMsg struct{}

func (ra *residentActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *eventMsg:
		ra.event(ctx, msg)
		// Here rather than at the end of event: a commit's encoding then
		// runs without event's frame under it, and a resident actor's
		// goroutine (fresh for each run of its mailbox) stays within the
		// stack it starts with instead of growing it at every commit.
		ra.pump(ctx)
	case *commitDoneMsg:
		if ra.inflight == msg.job {
			ra.committedAt(ctx, <-msg.job.done)
			ra.advanceSwitch(ctx)
			ra.advanceFinish(ctx)
		}
	case *keeper.MayActAnswer:
		ra.mayActAnswered(ctx, msg)
		ra.advanceFinish(ctx)
	case *roomMsg:
		ra.roomGiven(ctx, msg.pid)
	case *loadedMsg:
		if ra.loading == msg.l {
			if ra.finishing {
				ra.endLoad(ctx, "actor stopped") // it has ended: no wait
			} else {
				ra.loadDone(ctx, msg.l.result)
				ra.pump(ctx)
			}
			ra.advanceFinish(ctx)
		}
	case *compactedMsg:
		ra.compacted(ctx, msg)
		ra.advanceFinish(ctx)
	case *collectedMsg:
		ra.collected(ctx, msg.c)
		ra.advanceFinish(ctx)
	case *actor.Started:
		ra.advanceFinish(ctx) // a restart while it finished: go on
	case finishMsg:
		ra.finishing, ra.settling = true, true // settling: no merge starts
		if ra.loading != nil {
			ra.loading.cancel()
		}
		if ra.compacting != nil {
			ra.compacting.cancel()
		}
		ra.advanceFinish(ctx)
	case *actor.Restarting:
		// A panic reached the supervisor, which restarts this actor: the
		// producer hands back this same value. What waits at the gate is
		// answered 503 (a commit in flight is waited for first, so that it
		// cannot race the next load); the next event reloads.
		ra.endLoad(ctx, "actor restarted")
		ra.endSwitch(ctx, "actor restarted")
		ra.settleEnding(ctx, false)
		ra.drop()
		ra.closePer()
		ra.sql.Close()
	case *actor.Stopping:
		// From now on a message to this actor would be a dead letter: its
		// background work sends none, and is waited for at Stopped.
		ra.stopping = true
		if ra.compacting != nil {
			ra.compacting.stopping()
		}
		if ra.collecting != nil {
			ra.collecting.stopping()
		}
		if ra.loading != nil {
			ra.loading.stopping()
		}
	case *actor.Stopped:
		// Events that ran are committed and released before the actor
		// leaves memory: a drain or a stop finishes them. A merge under
		// way is ended first: if it was done, the last commit lists it.
		if t := ra.compacting; t != nil {
			t.cancel()
			ra.compacted(ctx, t.wait())
		}
		ra.endCollect(ctx)
		ra.endLoad(ctx, "actor stopped")
		ra.endSwitch(ctx, "actor stopped")
		ra.settleEnding(ctx, true)
		ra.roomLast(ctx) // before anything else can fail
		ra.collect(ctx)  // what the last head lists, if its deletes did not run
		ra.closePer()
		ra.sql.Close()
	}
}

// settleEnding settles a resident actor that restarts or stops. It is the
// one place a resident actor waits in Receive for its commit in flight and
// for the keeper: proto.actor delivers nothing after Stopped, and a restart
// must not let the next load race a commit of the hold before. A panic
// while it does (the keeper's MayAct at the output gate failing again) must
// not leave an event unanswered or the actor half-stopped: every waiting
// event is failed.
func (ra *residentActor) settleEnding(ctx actor.Context, flush bool) {
	ra.ending, ra.asking = true, nil // an answer on its way is not waited for
	defer func() {
		ra.ending = false
	}()
	defer func() {
		if p := recover(); p != nil {
			ra.log().Error("panic while the resident actor ends; its waiting events fail", slog.Any("panic", p))
			through := ra.durable
			if ra.inflight != nil {
				through = ra.inflight.version // abandoned: it may still land
			}
			ra.inflight = nil
			ra.gateAll(ctx, through, ownership.Unknown, "actor failed")
			ra.mayLand(ownership.Unknown)
		}
	}()
	ra.settle(ctx, flush)
}

// closePer closes the per-actor handler, if any.
func (ra *residentActor) closePer() {
	if ra.per != nil {
		ra.per.Close()
		ra.per = nil
	}
}

// drop forgets the resident state: the next event reloads it. Nothing may
// wait at the gate or be in flight.
func (ra *residentActor) drop() {
	ra.loaded, ra.gen, ra.etag, ra.state = false, 0, "", nil
	ra.version, ra.durable, ra.undeleted = 0, 0, nil
	ra.asking, ra.index = nil, nil // nothing waits at the gate
	if ra.compacting != nil {
		ra.compacting.cancel() // its result, if any, finds the state dropped
	}
}

func (ra *residentActor) log() *slog.Logger {
	return ra.h.log.With(slog.String("class", ra.actor.Class), slog.String("name", ra.actor.Name))
}

// answer sends an event's result. Done goes before the reply: the director
// counts the event finished before its caller can send the next one, so
// that what it decides (idle timer, eviction) follows the order callers see.
//
// The reply never blocks: if the event was answered already (the
// director answers the event whose panic reached it), this answer is
// dropped.
func (ra *residentActor) answer(ctx actor.Context, m *eventMsg, r result) {
	answerEvent(ctx, ctx.Parent(), ctx.Self(), ra.actor, m, r)
}

// answerEvent answers m with r, once: the first answer of an event wins
// (an event released early by its commit's goroutine, see commitJob.early,
// may be answered again by the actor's restart), and only the first is
// counted done. s sends to the director (parent) for the resident actor
// self.
func answerEvent(s actor.SenderContext, parent, self *actor.PID, a ownership.Actor, m *eventMsg, r result) {
	if !m.answered.CompareAndSwap(answerOpen, answerGiven) {
		return
	}
	sendAnswer(s, parent, self, a, m, r)
}

// sendAnswer counts m done at the director (parent) and gives its caller
// r: the one answer of m, which the caller claimed.
func sendAnswer(s actor.SenderContext, parent, self *actor.PID, a ownership.Actor, m *eventMsg, r result) {
	// Counted done before its caller can send the next event (see
	// answer).
	s.Send(parent, &doneMsg{actor: a, pid: self, id: m.id, key: m.keyName()})
	m.reply <- r // buffered for one answer, and this is the one
}

func (ra *residentActor) event(ctx actor.Context, m *eventMsg) {
	if ra.ended.Load() || ra.finishing {
		ra.answer(ctx, m, result{err: ra.h.notRun(ra.actor, "hold ended")})
		return
	}
	if ra.loaded && m.gen < ra.gen {
		ra.answer(ctx, m, result{err: ra.h.notRun(ra.actor, fmt.Sprintf("stale grant at generation %d, resident at %d", m.gen, ra.gen))})
		return
	}
	if ra.held(m) {
		return
	}
	if n := ra.h.switches.Load(); n != ra.classSeen {
		// A deploy with --now: the class in the registry when the event
		// was sent is taken at this boundary between events.
		if ra.h.switchDue(ra.actor.Class, ra.classSeen) && m.class != nil {
			ra.closePer()
			ra.class = m.class
		}
		ra.classSeen = n
	}
	if !ra.loaded || m.gen != ra.gen {
		ra.switching = &grantSwitch{stash: []*eventMsg{m}}
		ra.advanceSwitch(ctx)
		return
	}
	// Bucket calls outlive a client that went away: a commit cut short
	// would only have an unknown outcome.
	ioCtx := context.WithoutCancel(m.ctx)
	t := actorstore.NewEventTxn(ioCtx, ra.state, ra.h.cfg.MaxState)
	if m.key != nil && !m.key.Fresh && ra.replay(ctx, m, t) {
		return
	}
	if ra.dialCheck {
		ra.dialCheck = false
		ra.dialsGone(t)
	}
	// What ActorOf, SocketsOf and Call reach through the event's context:
	// one value, kept in the event's message (one allocation fewer).
	ev := &m.values
	*ev = eventValues{
		actor: ra.actor,
		socks: eventSockets{owner: ra.h.sockets, actor: ra.actor},
		call:  eventCall{ra: ra, actx: ctx, t: t, outer: CallChain(m.ctx), m: m},
	}
	gen := ra.gen
	resp, err := ra.run(context.WithValue(m.ctx, eventctx.Key{}, ev), m, t)
	if !ra.loaded || ra.gen != gen {
		// A commit before one of the event's calls failed: the working
		// state was dropped, and the event fails with it: refused, unless
		// what it did before took effect or the commit may still land.
		c := &ev.call
		ra.answerGated(ctx, m, ownership.EventEnd{Wrote: c.wroteAtFailure, Earlier: c.earlier, Commit: ra.lastFailure},
			"commit before a call did not land")
		return
	}
	if t.Fault() != nil {
		// A read of the event's storage failed (t keeps the first fault,
		// whether the class returned it, panicked with it, or swallowed
		// it): the event fails. The actor's SQL connection may have been
		// cut short in the middle of a statement: the next SQL call opens
		// a fresh one. Nothing of the event is kept, and its answer
		// reveals nothing: it goes out at once (unknown if a call it made
		// before took effect).
		ra.sql.Close()
		if ev.call.earlier {
			ra.answer(ctx, m, result{err: unknownOutcome(ra.actor, "a storage read failed after the event called another actor")})
			return
		}
		ra.answer(ctx, m, result{err: ra.readFailed(t.Fault())})
		return
	}
	var r result
	rolledBack := false
	switch {
	case err != nil:
		// (rb is declared here: taken by address, it moves to the heap,
		// which only an event that failed pays for.)
		var rb rollback
		if rolledBack = errors.As(err, &rb); rolledBack {
			r = result{resp: ra.rolledBack(m, rb)}
		} else {
			r = result{resp: ra.failed(err)}
		}
		t.Discard()
		if a := m.alarm; a != nil && a.rec.Name != "" {
			ra.alarmFailed(a, t, err) // its retry, or its end, is the event's write
			r = result{}
		}
	default:
		r = result{resp: resp, out: ev.socks.out}
		if ev.alarmsSet > 0 {
			ra.h.alarms.set.Add(ev.alarmsSet) // one counter for every actor: touched only when it counts
		}
	}
	if m.key != nil {
		tookEffect := t.Dirty() || ev.call.earlier || len(r.out) > 0
		if err := ra.remember(m, t, r, tookEffect || (m.key.Always && (err == nil || rolledBack)), ev.call.marked); err != nil {
			// Nothing of the event is kept without its key.
			t.Discard()
			r = result{resp: ra.failed(err)}
		}
	}
	ra.indexAlarms(t)
	wrote := false
	if t.Dirty() {
		ra.version++
		ra.state.Apply(t, ra.version)
		wrote = true
	}
	r.woke = m.spawned
	m.stage.Store(stageGated)
	ra.waiting = append(ra.waiting, waiter{m: m, r: r, upto: ra.version, wrote: wrote, earlier: ev.call.earlier})
}

// indexAlarms takes the alarm index's entries of the alarms the event's
// writes so far set: the next commit writes them before its head, so
// that no alarm lands without its entry. It runs wherever the event's
// writes join the working state: at its end, and at a commit point in
// its middle (commitForCall), after which the writes are no longer the
// event's to list.
func (ra *residentActor) indexAlarms(t *actorstore.Txn) {
	for _, a := range t.AlarmsSet() {
		ra.index = append(ra.index, actorstore.IndexKey(ra.actor, a))
	}
}

// replay answers an event whose key the actor remembers, from what it
// remembers, and reports whether it did: the first answer, as a read is
// answered (once what it read is durable, if the hold may still act);
// 422 when the key was first used with another request; 500 when the
// first took effect in part and did not end (it is not run again).
func (ra *residentActor) replay(ctx actor.Context, m *eventMsg, t *actorstore.Txn) bool {
	e, ok, err := t.LedgerLookup(m.key.ledger())
	switch {
	case t.Fault() != nil:
		ra.answer(ctx, m, result{err: ra.readFailed(t.Fault())})
		return true
	case err != nil:
		ra.answer(ctx, m, result{err: ra.damaged(actorstore.StateKey(ra.actor), fmt.Errorf("%w: %w", ownership.ErrDamaged, err))})
		return true
	case !ok:
		m.key.absent = true
		return false
	}
	var resp *actors.Response
	var rerr error
	switch {
	case e.Mark:
		// A node's key: the event took effect, and its answer was not kept.
		rerr = &OutcomeUnknownError{Actor: ra.actor, Reason: "an earlier try of the event took effect, and a node's key keeps no answer", Ran: true}
	case e.Sum != m.key.sum:
		resp = actors.Text(http.StatusUnprocessableEntity, "this "+IdempotencyHeader+" was first used with another request (method, path, query or body)\n")
	case e.Partial:
		resp = actors.Text(http.StatusInternalServerError, "an earlier request with this "+IdempotencyHeader+
			" took effect in part (it called another actor or sent an outbound request) and did not finish; it is not run again\n")
	default:
		resp = &actors.Response{Status: e.Status, Header: e.Header, Body: e.Body}
		if resp.Header == nil {
			resp.Header = http.Header{}
		}
		resp.Header.Set(ReplayedHeader, "true")
		if e.NoBody {
			resp.Header.Set(KeptHeader, "no-body")
		}
	}
	m.stage.Store(stageGated)
	ra.waiting = append(ra.waiting, waiter{m: m, r: result{resp: resp, err: rerr, woke: m.spawned}, upto: ra.version})
	return true
}

// remember keeps the event's key, with its answer, in its writes when keep
// says so and the event has an answer a retry can be given (not a socket
// event, nor an accepted WebSocket).
func (ra *residentActor) remember(m *eventMsg, t *actorstore.Txn, r result, keep, marked bool) error {
	if !keep || r.resp == nil || r.resp.Accept != nil {
		return nil
	}
	status := r.resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	e := actorstore.LedgerEntry{Sum: m.key.sum, Status: status, Header: r.resp.Header.Clone(), Body: r.resp.Body}
	now := time.Now()
	// Absent if the event looked (replay) and marked nothing since (a call).
	if err := t.LedgerRecord(m.key.ledger(), &e, now, ra.h.cfg.MaxKeys, m.key.absent && !marked); err != nil {
		return err
	}
	if m.key.timed() {
		// Timed keys are ended in passes, one every timedPass of them.
		if ra.timed++; ra.timed%timedPass == 0 {
			return t.ExpireTimed(now)
		}
	}
	return nil
}

// timedPass is how many timed keys an actor keeps between two passes that
// end those whose time is over (expireTimed).
const timedPass = 32

// pump starts a commit when writes wait and none is in flight, and
// releases what the durable version covers.
func (ra *residentActor) pump(ctx actor.Context) {
	// Released first: the commit's goroutine answers the events in front
	// of the gate that its landing releases (startCommit), so what the
	// durable version releases leaves the front before it starts.
	ra.release(ctx)
	if ra.inflight == nil && ra.version > ra.durable && !ra.stalled() {
		ra.startCommit(ctx)
	}
}

// MaxRuns is how many runs an actor lists before its commits wait for the
// merge under way instead of flushing one more run. Merges keep an actor
// at about log(size / 1 KiB) / log 3 runs (13 at 1 GiB), but a node
// runs few at once (Config.Merges): an actor written faster than the
// bucket takes its merges would pile up runs, and every read after its
// wake touches each one. So past MaxRuns, with a merge under way, a
// commit that would flush waits, and the events that ran since wait with
// it at the output gate: the actor's clients slow down to what the
// merges keep up with. The memory table goes on growing meanwhile, up to
// maxStalledMem, past which the commit flushes all the same. A merge's
// result, and an actor that stops or moves, end the wait.
const MaxRuns = 16

// maxStalledMem bounds the memory table of an actor whose commit waits
// for a merge.
const maxStalledMem = 4 << 20

// stalled reports whether the commit of what waits must wait for the
// merge under way (see MaxRuns), and counts each wait once.
func (ra *residentActor) stalled() bool {
	s := ra.state
	stall := !ra.settling && ra.compacting != nil && s.Stalls(MaxRuns, maxStalledMem)
	if stall && !ra.stalling {
		ra.h.reads.Stalls.Add(1)
	}
	ra.stalling = stall
	return stall
}

// startCommit writes the working state's head with If-Match on the version
// this hold last saw, in the background, after the run it flushes, if
// any; the answer comes back as a commitDoneMsg through the mailbox.
func (ra *residentActor) startCommit(ctx actor.Context) {
	seq := ra.state.Seq + 1
	hd, err := ra.state.EncodeHead(ra.gen, ra.version)
	job := &commitJob{version: ra.version, seq: seq, head: hd, garbage: ra.state.Garbage(), done: make(chan commitResult, 1)}
	ra.inflight = job
	if ra.asking == nil && !ra.roomed() {
		// The events in front of the output gate that this commit
		// carries and its landing alone releases (none waits for an
		// answer of the keeper's: those in front stay in front). Not
		// once the residency has a room actor: its answers would
		// overtake the output of the events before them (rooms.go).
		n := 0
		for n < len(ra.waiting) {
			w := &ra.waiting[n]
			if w.upto <= ra.durable || w.upto > job.version || !w.releasedByLanding() {
				break
			}
			w.r, w.early = done(w.r), true
			n++
		}
		// The job shares their slots with the waiting list: the actor
		// changes a waiter in place only in its gated field (verdicts),
		// and takes the list apart by copying what is left of it.
		job.early = ra.waiting[:n:n]
	}
	index := ra.index
	ra.index = nil
	self, parent, root, bucket, timeout := ctx.Self(), ctx.Parent(), ra.h.cfg.System.Root, ra.h.cfg.Bucket, ra.h.cfg.IOTimeout
	if err != nil {
		job.done <- commitResult{err: err}
		root.Send(self, &commitDoneMsg{job: job})
		return
	}
	gen := ra.gen
	body, key, etag, a := ownership.EncodeState(ownership.StateHeader{Gen: gen, Seq: seq}, hd.Payload()), actorstore.StateKey(ra.actor), ra.etag, ra.actor
	job.body = body
	runs, reads := ra.h.runs(), &ra.h.reads
	ra.h.goroutines.Go(func() {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var res commitResult
		finished := false // false in a panic: nothing is answered as landed
		defer func() {
			// The early answers first, then the landing to the actor: in
			// the other order the HTTP benchmarks lost 4 to 5% (the
			// actor, woken by the landing, ran beside the answers on two
			// cores); in this one a lone caller's next event may reach
			// the actor before the landing does, and waits for it there.
			if finished && res.err == nil {
				for i := range job.early {
					w := &job.early[i]
					answerEvent(root, parent, self, a, w.m, w.r)
				}
			}
			job.done <- res
			root.Send(self, &commitDoneMsg{job: job})
		}()
		// The alarm index's entries first: no alarm is in a state that
		// landed without its entry. Then the run: the head that lists it
		// must never land without it. So too the manifests.
		for _, k := range index {
			if _, res.err = bucket.Put(cctx, k, nil, ownership.Always()); res.err != nil {
				res.err = fmt.Errorf("alarm index entry %s: %w", k, res.err)
				return
			}
		}
		res.err = hd.PutRuns(cctx, bucket, runs, a)
		if res.err == nil {
			cond := ownership.IfMatch(etag)
			if etag == "" {
				cond = ownership.IfAbsent() // the actor's first commit
			}
			reads.HeadWrites.Add(1)
			reads.HeadBytes.Add(int64(len(body)))
			res.headSent = true
			res.etag, res.err = bucket.Put(cctx, key, body, cond)
		}
		if res.err != nil && res.outcome() == ownership.Unknown {
			res = ra.resolve(job, res, gen, etag)
		}
		finished = true
	})
}

// collect deletes, in the background, the garbage that the last head
// landed lists (undeleted): run objects no head of this hold lists any
// more. The event's answer does not wait for it (a merge of a large actor
// leaves a hundred parts). What is deleted leaves the state's garbage, and
// the next head no longer names it; what is not stays listed, and the
// next landing tries again. One collection runs at a time; when it is
// back, the next takes what landed meanwhile.
func (ra *residentActor) collect(ctx actor.Context) {
	if len(ra.undeleted) == 0 || ra.collecting != nil || !ra.loaded {
		return
	}
	names, bucket, a, timeout := ra.undeleted, ra.h.cfg.Bucket, ra.actor, ra.h.cfg.IOTimeout
	ra.undeleted = nil
	if ra.stopping {
		// The last commits of a stop, which waits for the deletes.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		ra.state.Collected(actorstore.DeleteRuns(ctx, bucket, a, names))
		return
	}
	c := &collection{names: names}
	c.background = goBackground(ctx, ra.h.cfg.System.Root, func(ctx context.Context) []actorstore.RunName {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return actorstore.DeleteRuns(ctx, bucket, a, names)
	}, func(*background[[]actorstore.RunName]) any { return &collectedMsg{c} })
	ra.collecting = c
}

// collected takes the deletes of a collection, and starts the next.
func (ra *residentActor) collected(ctx actor.Context, c *collection) {
	if c != ra.collecting {
		return
	}
	ra.collecting = nil
	if ra.loaded {
		ra.state.Collected(c.result)
	}
	ra.collect(ctx)
}

// endCollect waits for the collection under way, if any, and takes it.
func (ra *residentActor) endCollect(ctx actor.Context) {
	if c := ra.collecting; c != nil {
		c.wait()
		ra.collected(ctx, c)
	}
}

// mayLand notes a commit of the hold that ended with outcome: one that
// may still land leaves the hold unsettled (see unsettled).
func (ra *residentActor) mayLand(outcome ownership.Outcome) {
	if outcome == ownership.Unknown || outcome == ownership.BucketDamaged {
		ra.unsettled = ra.gen
	}
}

// committedAt takes the answer of the commit in flight.
func (ra *residentActor) committedAt(ctx actor.Context, res commitResult) {
	job := ra.inflight
	ra.inflight = nil
	if !ra.loaded {
		return // dropped meanwhile (the gate closed): the next event reloads
	}
	if res.err != nil {
		outcome := res.outcome()
		ra.log().Warn("actor commit did not land", slog.Uint64("gen", uint64(ra.gen)),
			slog.String("outcome", outcome.String()), slog.Any("err", res.err))
		// Every event that ran since the durable version saw writes that
		// did not land: none is released. Those whose own writes the
		// commit carried have an unknown outcome if it may still land; the
		// rest are refused. The state is reloaded.
		ra.lastFailure = outcome
		ra.gateAll(ctx, job.version, outcome, "commit "+outcome.String())
		ra.mayLand(outcome)
		ra.drop()
		return
	}
	ra.etag, ra.durable = res.etag, job.version
	ra.state.Landed(job.head, job.seq)
	// The garbage this head lists, less what a collection deletes now.
	ra.undeleted = job.garbage
	if c := ra.collecting; c != nil {
		ra.undeleted = slices.DeleteFunc(slices.Clone(ra.undeleted), func(g actorstore.RunName) bool { return slices.Contains(c.names, g) })
	}
	ra.collect(ctx)
	job.head.OpenFlushed(ra.h.runs(), ra.actor)
	ra.pump(ctx)
	ra.maybeCompact(ctx)
}

// resolve finds out what became of the commit job, which had no answer
// (res): it reads the state object again and, by ownership.JudgeLostCommit,
// takes the commit for landed if the object is its own, or writes the
// object again as it was, on the version the commit was conditioned on
// (base, the hold at gen's), so that the commit can never land, and takes
// it for refused once that landed. What cannot be told stays unknown. It
// runs on the commit's goroutine, before its answer goes back, for at
// most two reads and a write, each bounded by the I/O timeout: a bucket
// that answers late is the usual cause, and its answer turns "outcome
// unknown" into a success or a refusal for every event that waited.
func (ra *residentActor) resolve(job *commitJob, res commitResult, gen ownership.Generation, base ownership.ETag) commitResult {
	key, b, timeout := actorstore.StateKey(ra.actor), ra.h.cfg.Bucket, ra.h.cfg.IOTimeout
	read := func() (ownership.LostCommit, ownership.Object, []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		obj, err := b.Get(ctx, key)
		ra.h.reads.Heads.Add(1)
		switch ownership.OutcomeOf(err) {
		case ownership.Landed:
			_, payload, err := ownership.DecodeState(obj.Body)
			if err != nil {
				return ownership.LostUnknown, obj, nil
			}
			return ownership.JudgeLostCommit(true, obj.Body, obj.ETag, job.body, base), obj, payload
		case ownership.NotFound:
			return ownership.JudgeLostCommit(false, nil, "", job.body, base), obj, nil
		}
		return ownership.LostUnknown, obj, nil
	}
	verdict, obj, payload := read()
	switch verdict {
	case ownership.LostLanded:
		ra.log().Info("actor commit without an answer had landed", slog.Uint64("gen", uint64(gen)))
		return commitResult{etag: obj.ETag, headSent: true}
	case ownership.LostUnknown:
		return res
	}
	cond := ownership.IfMatch(obj.ETag)
	if base == "" {
		// A first commit: its seal is the empty state, created.
		hd, err := actorstore.NewState(ownership.StateHeader{Gen: gen}).EncodeHead(gen, 0)
		if err != nil {
			return res
		}
		payload, cond = hd.Payload(), ownership.IfAbsent()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	seal := ownership.EncodeState(ownership.StateHeader{Gen: gen, Seq: job.seq + 1}, payload)
	ra.h.reads.HeadWrites.Add(1)
	ra.h.reads.HeadBytes.Add(int64(len(seal)))
	_, err := b.Put(ctx, key, seal, cond)
	cancel()
	switch ownership.OutcomeOf(err) {
	case ownership.Landed:
		ra.log().Info("actor commit without an answer sealed out: it cannot land", slog.Uint64("gen", uint64(gen)))
		return commitResult{err: fmt.Errorf("commit without an answer, sealed out by a rewrite of the state it was conditioned on: %w", ownership.ErrPrecondition), headSent: true}
	case ownership.Refused, ownership.NotFound:
		// Something was written since the read: the commit itself, late?
		if verdict, obj, _ = read(); verdict == ownership.LostLanded {
			return commitResult{etag: obj.ETag, headSent: true}
		}
	}
	return res
}

// release answers the waiting events whose writes (and every write they
// could have seen) are durable, by the output gate's rule
// (ownership.Gate): an event that took effect is released; one that only
// read is released if its hold may still act now, and refused otherwise.
// Socket output goes out only while the hold may act: under a later hold
// it could overtake that hold's own. When the gate needs the keeper's
// verdict and the keeper's table of live holds cannot give it at once,
// the question goes by message, and the answer releases them
// (mayActAnswered); the actor goes on with its mailbox meanwhile.
func (ra *residentActor) release(ctx actor.Context) {
	if ra.asking != nil && !ra.ending {
		return // the answer on its way releases them
	}
	n := ra.ready(ra.durable)
	if n == 0 {
		return
	}
	// MayAct asked at most once, and only if a verdict needs it.
	k := ra.h.cfg.Keeper
	var may, asked, ask bool
	mayAct := func() bool {
		if !asked {
			asked = true
			if ra.ending {
				may = k.MayAct(ra.actor, ra.gen)
				return may
			}
			var known bool
			if may, known = k.MayActNow(ra.actor, ra.gen); !known {
				ask = true // by message: the verdicts are given again then
			}
		}
		return may
	}
	ra.verdicts(n, mayAct)
	if ask {
		ra.asks++
		ra.asking = &mayActAsk{tag: ra.asks, gen: ra.gen, through: ra.durable}
		k.RequestMayAct(ra.actor, ra.gen, ctx.Self(), ra.asks)
		return
	}
	ra.answerReady(ctx, n, may)
}

// ready counts the waiting events whose writes the version through covers.
func (ra *residentActor) ready(through uint64) int {
	n := 0
	for n < len(ra.waiting) && ra.waiting[n].upto <= through {
		n++
	}
	return n
}

// verdicts gives the first n waiting events the gate's verdict, with
// mayAct the hold's. They are given before the waiting list changes:
// should mayAct panic, the restart answers them all.
func (ra *residentActor) verdicts(n int, mayAct func() bool) {
	for i := range ra.waiting[:n] {
		w := &ra.waiting[i]
		w.gated = ownership.Gate(ownership.EventEnd{Wrote: w.wrote, Earlier: w.earlier, Commit: ownership.Landed, MayAct: mayAct})
		if w.gated != ownership.GateRelease || w.early {
			continue // an early one has no socket output and accepts nothing
		}
		if len(w.r.out) > 0 {
			mayAct()
		}
		if w.r.resp != nil && w.r.resp.Accept != nil && !mayAct() {
			// A WebSocket is accepted only where the actor is held: this
			// event took effect, and its socket cannot be opened.
			w.gated = ownership.GateUnknown
		}
	}
}

// answerReady answers the first n waiting events by their verdicts; may
// is the hold's, for their socket output. Those released are answered
// here, unless one of them has socket output to send or the residency
// has a room actor already: then they are carried to it (rooms.go), which
// sends the output and answers them in this order.
func (ra *residentActor) answerReady(ctx actor.Context, n int, may bool) {
	ready := ra.waiting[:n]
	if n < len(ra.waiting) {
		// A commit in flight may share the slots behind them (its early
		// answers, startCommit): what is left is copied out.
		ra.waiting = append([]waiter(nil), ra.waiting[n:]...)
	} else {
		// Nothing is left, so no commit in flight shares a slot (an early
		// answer's event is ready only once its commit's landing is back,
		// after the commit's goroutine read it): the list starts over in
		// the same array, its slots cleared once answered.
		ra.waiting = ra.waiting[:0]
		defer clear(ready)
	}
	var out []carried
	at := 0
	defer func() {
		if p := recover(); p != nil {
			// Out of the waiting list, the ready events would be left to
			// a supervisor's stop, which answers them as not run: a write
			// that landed must not be, as a retry would run it again.
			// Each is answered by its verdict, without its socket output,
			// before the panic goes on.
			for _, c := range out {
				ra.answerAnyway(ctx, c.m, done(c.r))
			}
			for _, w := range ready[at:] {
				if w.gated == ownership.GateRelease {
					ra.answerAnyway(ctx, w.m, done(w.r))
				} else {
					ra.answer(ctx, w.m, result{err: ra.h.unavailable(ra.actor, "actor failed")})
				}
			}
			panic(p)
		}
	}()
	for i, w := range ready {
		at = i
		switch w.gated {
		case ownership.GateUnknown:
			ra.answer(ctx, w.m, result{err: unknownOutcome(ra.actor, "the event took effect, but its hold ended before its WebSocket could be accepted")})
			continue
		case ownership.GateRefuse:
			ra.answer(ctx, w.m, result{err: ra.h.notRun(ra.actor, "hold no longer live or node lease not valid")})
			continue
		}
		if w.early {
			continue // its commit landed, and its goroutine answered it
		}
		r := w.r
		if !may {
			r.out = nil // under a later hold it could overtake that hold's own
		}
		if len(r.out) > 0 || len(out) > 0 || ra.roomed() {
			out = append(out, carried{m: w.m, r: r})
			continue
		}
		ra.answer(ctx, w.m, done(r))
	}
	at = len(ready)
	if len(out) > 0 {
		ra.carry(ctx, out)
	}
}

// answerAnyway answers m with r, whether or not it was carried to a room
// actor already: what a panic leaves.
func (ra *residentActor) answerAnyway(ctx actor.Context, m *eventMsg, r result) {
	if !giveCarried(ctx, ctx.Parent(), ctx.Self(), ra.actor, m, r) {
		ra.answer(ctx, m, r)
	}
}

// gateAll answers every waiting event when what the actor wrote will not
// all land: those the durable version covers are released (their socket
// output not sent), those whose writes the commit of version through
// carried get that commit's outcome, and the rest were never sent.
// Nothing waits afterwards.
func (ra *residentActor) gateAll(ctx actor.Context, through uint64, outcome ownership.Outcome, reason string) {
	never := func() bool { return false }
	// Released in a residency with a room actor: carried to it, after the
	// output of the events released before (rooms.go), without their own.
	var out []carried
	defer func() {
		if len(out) > 0 {
			ra.carry(ctx, out)
		}
	}()
	for _, w := range ra.waiting {
		o := ownership.Failed
		switch {
		case w.upto <= ra.durable:
			o = ownership.Landed
		case w.upto <= through:
			o = outcome
		}
		switch ownership.Gate(ownership.EventEnd{Wrote: w.wrote, Earlier: w.earlier, Commit: o, MayAct: never}) {
		case ownership.GateRelease:
			if w.early {
				ra.answer(ctx, w.m, w.r)
				continue
			}
			if ra.roomed() {
				r := w.r
				r.out = nil
				out = append(out, carried{m: w.m, r: r})
				continue
			}
			ra.answer(ctx, w.m, done(w.r))
		case ownership.GateUnknown:
			ra.answer(ctx, w.m, result{err: unknownOutcome(ra.actor, reason)})
		default:
			ra.answer(ctx, w.m, result{err: ra.h.unavailable(ra.actor, reason)})
		}
	}
	ra.waiting = nil
}

// answerGated answers one event that did not reach the gate (a commit
// before its call failed) by the gate's rule.
func (ra *residentActor) answerGated(ctx actor.Context, m *eventMsg, e ownership.EventEnd, reason string) {
	e.MayAct = func() bool { return false }
	switch ownership.Gate(e) {
	case ownership.GateUnknown:
		ra.answer(ctx, m, result{err: unknownOutcome(ra.actor, reason)})
	default:
		ra.answer(ctx, m, result{err: ra.h.unavailable(ra.actor, reason)})
	}
}

func done(r result) result {
	if r.err != nil {
		return r
	}
	if r.resp == nil {
		r.resp = &actors.Response{}
	}
	if r.resp.Status == 0 {
		r.resp.Status = http.StatusOK
	}
	return r
}

// settle waits for the commit in flight and answers every waiting event:
// with flush, what is not yet written is committed (synchronously) and
// released through the gate; without, it fails. Afterwards nothing waits
// and nothing is in flight.
func (ra *residentActor) settle(ctx actor.Context, flush bool) {
	if flush {
		// What a merge held back is committed now (see stalled).
		ra.settling = true
		defer func() { ra.settling = false }()
		ra.pump(ctx)
	}
	through, outcome := ra.durable, ownership.Failed
	for ra.inflight != nil {
		job := ra.inflight
		res := <-job.done
		if flush {
			ra.committedAt(ctx, res) // releases, and may start the next commit
			continue
		}
		// Not flushed: what this commit made durable is released all the
		// same, and nothing more is committed.
		ra.inflight = nil
		if outcome = res.outcome(); outcome == ownership.Landed {
			ra.durable = job.version
		}
		ra.mayLand(outcome)
		through = job.version
	}
	if len(ra.waiting) > 0 {
		ra.gateAll(ctx, through, outcome, "actor restarted")
	}
}

// run calls the class. A panic becomes an error: the event's writes are
// discarded, and the working state is intact (Storage hands the class
// copies, never the state's own slices).
func (ra *residentActor) run(ctx context.Context, m *eventMsg, t *actorstore.Txn) (resp *actors.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			if f, ok := p.(actorstore.ReadFault); ok {
				// A storage read failed under the class (t.fault has it):
				// the event fails, as a commit that did not land fails it,
				// and the class's code is not at fault.
				resp, err = nil, f.Unwrap()
				return
			}
			ra.log().Error("actor panicked", slog.Any("panic", p), slog.String("at", panicFrames()))
			resp, err = nil, fmt.Errorf("actor panicked: %v", p)
		}
	}()
	var c actors.Handler = ra.class
	if f, ok := ra.class.(actors.ResidentClass); ok {
		if ra.per == nil {
			ra.per = f.NewResident(ra.actor)
		}
		c = ra.per
	}
	if m.alarm != nil {
		return nil, ra.runAlarm(ctx, c, m.alarm, t)
	}
	if m.sock != nil {
		ev := m.sock
		if ev.Socket.Dialed() && ev.Kind != actors.SocketMessage {
			stamp := m.dialStamp
			if stamp == 0 && ra.h.sockets != nil {
				stamp = ra.h.sockets.Stamp()
			}
			e, ok, err := dialEnded(t, stamp, ev)
			if err != nil || !ok {
				return nil, err // !ok: the actor was told of this close already
			}
			ev = e
		}
		if sc, ok := c.(actors.SocketHandler); ok {
			return nil, sc.HandleSocket(ctx, ev, t)
		}
		return nil, nil // a class without socket events: dropped
	}
	if resp, err = c.Handle(ctx, m.req, t); err == nil && resp == nil {
		err = errNoResponse
	}
	return resp, err
}

// readFailed is the error of an event whose storage read failed: a
// damaged run is reported as damage (and counted), anything else as the
// actor being unavailable for now.
func (ra *residentActor) readFailed(err error) error {
	if errors.Is(err, ownership.ErrDamaged) {
		if ra.heldNoMore(ra.gen) {
			return ra.h.unavailable(ra.actor, "its hold ended while it read its storage")
		}
		return ra.damaged(actorstore.StateKey(ra.actor), err)
	}
	ra.log().Warn("actor storage read failed", slog.Any("err", err))
	return ra.h.unavailable(ra.actor, "storage read failed: "+ownership.OutcomeOf(err).String())
}

// errNoResponse fails a request event whose handler returned neither a
// response nor an error, as a wasm guest's handler that returns nil does.
var errNoResponse = errors.New("the class's Handle returned no response and no error")

// ErrorIDHeader carries the id of a failed event's 500, the error_id of
// its log line, so that a client's report finds the node's record of it.
const ErrorIDHeader = "Wasmkeep-Error-Id"

// failed answers an event whose handler failed; its writes are discarded.
// The failure is counted by class; a 500 names an id that its log line
// carries too (the error itself stays in the log: it may tell what the
// client must not read; Config.ErrorsInAnswers adds it to the 500).
func (ra *residentActor) failed(err error) *actors.Response {
	if s := ra.h.cfg.Supervision; s != nil {
		s.EventFailed(ra.actor.Class)
	}
	if errors.Is(err, actors.ErrLimit) {
		return actors.Text(http.StatusRequestEntityTooLarge, err.Error()+"\n")
	}
	var b [6]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ra.log().Warn("actor event failed", slog.String("error_id", id), slog.Any("err", err))
	body := "actor error (id " + id + ": the node's log has it as error_id=" + id + ")\n"
	if ra.h.cfg.ErrorsInAnswers {
		body += err.Error() + "\n"
	}
	resp := actors.Text(http.StatusInternalServerError, body)
	resp.Header.Set(ErrorIDHeader, id)
	return resp
}

// rolledBack answers an event whose class rolled it back: its writes and
// socket output are discarded, like a failed event's, and it answers the
// response the class chose. A socket event has no response to answer.
func (ra *residentActor) rolledBack(m *eventMsg, rb rollback) *actors.Response {
	resp := rb.RollbackResponse()
	switch {
	case m.sock != nil:
		return nil
	case resp == nil:
		return ra.failed(errors.New("the class rolled back its event with no response"))
	case resp.Accept != nil:
		return ra.failed(errors.New("the class rolled back its event with a response that accepts a WebSocket"))
	}
	return resp
}

// rollback is the error actors.Rollback returns, found in an event's
// error chain.
type rollback interface {
	error
	RollbackResponse() *actors.Response
}

// loaded is what a load of the state gives (load): the working state of
// the hold at gen, or why there is none.
type loaded struct {
	gen   ownership.Generation
	etag  ownership.ETag
	state *actorstore.State
	// sealTaken: the load took the seal's copy (see residentActor.sealTaken).
	sealTaken bool
	err       error
}

// load reads the state object for the hold at gen. The acquisition sealed
// it with gen before the hold existed (see ownership/seal.go), so it is
// normally read as is, and the seal's own copy (sealed, when the grant
// carried it for gen) is taken without a read unless taken is gen already
// (a load again under it, after a failed commit dropped the state). An
// object stamped with a later generation means this hold was superseded:
// it ends. One stamped earlier was not sealed (a hold granted without the
// ownership core, in tests and tools): it is sealed here, rewritten
// stamped with gen, so no older hold's write can land after this. With
// pending, a commit of this hold may still land: the object is sealed so
// too, or created empty if there is none (ownership.JudgeReload).
//
// It reads only what does not change while it runs (the actor, the Host),
// so it runs on a goroutine of its own (startLoad), and its result is the
// actor's from the message that brings it back.
func (ra *residentActor) load(ctx context.Context, gen ownership.Generation, sealed *ownership.Sealed, taken ownership.Generation, pending bool) loaded {
	key := actorstore.StateKey(ra.actor)
	var obj ownership.Object
	var err error
	res := loaded{gen: gen}
	if sealed != nil && sealed.Gen == gen && taken != gen {
		obj, res.sealTaken = ownership.Object{Body: sealed.Body, ETag: sealed.ETag}, true
	} else {
		rctx, cancel := context.WithTimeout(ctx, ra.h.cfg.IOTimeout)
		ra.h.reads.Heads.Add(1)
		obj, err = ra.h.cfg.Bucket.Get(rctx, key)
		cancel()
	}
	failed := func(err error) loaded { res.err = err; return res }
	var st *actorstore.State
	var payload []byte
	var cond ownership.Condition
	switch ownership.OutcomeOf(err) {
	case ownership.Landed:
		if st, payload, err = actorstore.DecodeStateObject(obj.Body); err != nil {
			return failed(ra.damaged(key, err))
		}
		verdict, h := ownership.JudgeReload(true, st.StateHeader, gen, pending)
		switch verdict {
		case ownership.StateSuperseded:
			ra.log().Warn("actor hold superseded: its state is sealed by a later hold",
				slog.Uint64("gen", uint64(gen)), slog.Uint64("state_gen", uint64(st.Gen)))
			ra.h.cfg.Keeper.HoldEnded(ra.actor, gen, "superseded")
			return failed(ra.h.notRun(ra.actor, fmt.Sprintf("state sealed at generation %d, hold at %d: superseded", st.Gen, gen)))
		case ownership.StateUse:
			return ra.opened(ctx, key, res, obj.ETag, st)
		}
		st.StateHeader, cond = h, ownership.IfMatch(obj.ETag) // StateFence
	case ownership.Damaged:
		return failed(ra.damaged(key, err))
	case ownership.NotFound:
		// A new actor: its first commit creates the object, If-None-Match.
		// (The core seals only actors that had a record, and so a hold.)
		verdict, h := ownership.JudgeReload(false, ownership.StateHeader{}, gen, pending)
		st = actorstore.NewState(h)
		if verdict == ownership.StateNew {
			res.state = st
			return res
		}
		// A first commit that may still land: the object is created
		// empty, so that it cannot.
		hd, err := st.EncodeHead(gen, 0)
		if err != nil {
			return failed(err)
		}
		payload, cond = hd.Payload(), ownership.IfAbsent()
	default:
		ra.log().Warn("actor state read failed", slog.String("key", key), slog.Any("err", err))
		return failed(ra.h.notRun(ra.actor, "state read failed"))
	}
	wctx, cancel := context.WithTimeout(ctx, ra.h.cfg.IOTimeout)
	seal := ownership.EncodeState(st.StateHeader, payload)
	ra.h.reads.HeadWrites.Add(1)
	ra.h.reads.HeadBytes.Add(int64(len(seal)))
	etag, err := ra.h.cfg.Bucket.Put(wctx, key, seal, cond)
	cancel()
	if err != nil {
		ra.log().Warn("actor seal did not land", slog.String("key", key),
			slog.Uint64("gen", uint64(gen)), slog.String("outcome", ownership.OutcomeOf(err).String()), slog.Any("err", err))
		return failed(ra.h.notRun(ra.actor, "seal "+ownership.OutcomeOf(err).String()))
	}
	return ra.opened(ctx, key, res, etag, st)
}

// opened readies the state st, just read from key at etag, for the hold
// of res: it reads the manifests its head lists, then gives its runs
// readers.
func (ra *residentActor) opened(ctx context.Context, key string, res loaded, etag ownership.ETag, st *actorstore.State) loaded {
	o := ra.h.runs()
	if err := st.LoadManifests(ctx, ra.actor, o); err != nil {
		if errors.Is(err, ownership.ErrDamaged) {
			if ra.heldNoMore(res.gen) {
				res.err = ra.h.notRun(ra.actor, "its hold ended while it read its storage")
			} else {
				res.err = ra.damaged(key, err)
			}
			return res
		}
		ra.log().Warn("actor state read failed", slog.String("key", key), slog.Any("err", err))
		res.err = ra.h.notRun(ra.actor, "state read failed")
		return res
	}
	st.OpenRuns(ra.actor, o)
	res.etag, res.state = etag, st
	return res
}

// stateLoad is a load of the actor's state under way, on a goroutine of
// its own: a Receive does not wait for the bucket. The events that arrive
// meanwhile wait in stash, in order, and run once it ends.
type stateLoad struct {
	*background[loaded]
	stash []*eventMsg
}

// loadedMsg brings a load's result back (startLoad).
type loadedMsg struct{ l *stateLoad }

// startLoad reads the state for m's grant in the background; m runs once
// it is read (loadDone).
func (ra *residentActor) startLoad(ctx actor.Context, m *eventMsg) {
	gen, sealed, taken, pending := m.gen, m.sealed, ra.sealTaken, ra.unsettled == m.gen
	// Bucket calls outlive a client that went away, as a commit does.
	base := context.WithoutCancel(m.ctx)
	l := &stateLoad{stash: []*eventMsg{m}}
	l.background = goBackground(ctx, ra.h.cfg.System.Root, func(cctx context.Context) loaded {
		// The background's context ends only when the actor stops.
		lctx, cancel := context.WithCancel(base)
		defer context.AfterFunc(cctx, cancel)()
		defer cancel()
		return ra.load(lctx, gen, sealed, taken, pending)
	}, func(*background[loaded]) any { return &loadedMsg{l: l} })
	ra.loading = l
}

// loadDone takes a load's result: the state is the actor's, and the
// events that waited for it run in turn (one may start another load: the
// rest then wait for that one). A load that failed fails the event that
// started it, as it would have run first; the others are taken again, the
// next of them loading afresh.
func (ra *residentActor) loadDone(ctx actor.Context, res loaded) {
	stash := ra.loading.stash
	ra.loading = nil
	if res.err != nil {
		ra.drop()
		ra.answer(ctx, stash[0], result{err: res.err})
		stash = stash[1:]
	} else {
		ra.loaded, ra.gen, ra.etag, ra.state = true, res.gen, res.etag, res.state
		if res.sealTaken {
			ra.sealTaken = res.gen
		}
		if ra.unsettled == res.gen {
			ra.unsettled = 0 // the load sealed the state again: nothing of the hold's can land after it
		}
		ra.dialCheck = true // the first event reads the records of outbound sockets (dial.go)
	}
	for _, m := range stash {
		ra.event(ctx, m) // held again if one starts another load
	}
}

// held keeps m for later if the actor reads its state or switches grants:
// it runs, in its turn, when that ends (loadDone, switched), whatever its
// grant.
func (ra *residentActor) held(m *eventMsg) bool {
	switch {
	case ra.switching != nil:
		ra.switching.stash = append(ra.switching.stash, m)
	case ra.loading != nil:
		ra.loading.stash = append(ra.loading.stash, m)
	default:
		return false
	}
	return true
}

// advanceSwitch takes a grant switch (an event of a later grant than the
// state's, or of a state not read) as far as it can go without waiting:
// the earlier hold's events are finished first (what is not written is
// committed, and released through the gate), each commit and the gate's
// question to the keeper coming back by message (committedAt,
// mayActAnswered call it again); then the keeper is asked whether the new
// grant may act. The grant may have ended before its event got here: the
// actor went idle between the grant and the event (the director's idle
// timer came first), and its hold was parked or released. Such an event
// must not run: its writes would land and its output be withheld. Refused
// before it runs, it is delivered again.
func (ra *residentActor) advanceSwitch(ctx actor.Context) {
	s := ra.switching
	if s == nil || s.tag != 0 {
		return
	}
	if !s.settled {
		ra.settling = true // what a merge held back is committed now (see stalled)
		ra.pump(ctx)
		if ra.inflight != nil || ra.asking != nil {
			return
		}
		ra.settling = false
		if len(ra.waiting) > 0 {
			ra.gateAll(ctx, ra.durable, ownership.Failed, "actor restarted")
		}
		ra.drop()
		s.settled = true
	}
	gen := s.stash[0].gen
	may, known := ra.h.cfg.Keeper.MayActNow(ra.actor, gen)
	if !known {
		ra.asks++
		s.tag = ra.asks
		ra.h.cfg.Keeper.RequestMayAct(ra.actor, gen, ctx.Self(), s.tag)
		return
	}
	ra.switched(ctx, may)
}

// switched ends a grant switch with the keeper's verdict on the new
// grant: its first event reads the state, or is refused; the others are
// taken again in order.
func (ra *residentActor) switched(ctx actor.Context, may bool) {
	stash := ra.switching.stash
	ra.switching = nil
	if may {
		ra.startLoad(ctx, stash[0])
	} else {
		ra.answer(ctx, stash[0], result{err: ra.h.notRun(ra.actor, "hold no longer live")})
	}
	for _, m := range stash[1:] {
		ra.event(ctx, m)
	}
}

// advanceFinish takes a finishing actor (finishMsg) as far as it can go
// without waiting: a read of its state and a merge under way, both cut
// short, are waited for by message; the events that waited for the read
// are refused (none ran), and so are a grant switch's; what ran is
// committed and released through the gate, each commit and question to
// the keeper coming back by message; the garbage the last head lists is
// deleted; then the actor stops itself, and Stopped finds nothing left to
// wait for.
func (ra *residentActor) advanceFinish(ctx actor.Context) {
	if !ra.finishing || ra.stopAsked || ra.loading != nil || ra.compacting != nil {
		return
	}
	ra.endSwitch(ctx, "actor stopped")
	ra.settling = true
	ra.pump(ctx)
	if ra.inflight != nil || ra.asking != nil {
		return
	}
	ra.collect(ctx)
	if ra.collecting != nil {
		return
	}
	ra.stopAsked = true
	ctx.Stop(ctx.Self())
}

// endSwitch ends a grant switch as the actor restarts or stops: none of
// its events ran, so each is refused and delivered again.
func (ra *residentActor) endSwitch(ctx actor.Context, why string) {
	s := ra.switching
	if s == nil {
		return
	}
	ra.switching, ra.settling = nil, false
	for _, m := range s.stash {
		ra.answer(ctx, m, result{err: ra.h.notRun(ra.actor, why)})
	}
}

// mayActAnswered takes the keeper's answer to a question of the gate
// (release) or of a grant switch. An answer nobody waits for any more (the
// hold's events were settled otherwise) is dropped.
func (ra *residentActor) mayActAnswered(ctx actor.Context, m *keeper.MayActAnswer) {
	if s := ra.switching; s != nil && s.tag != 0 && s.tag == m.Tag {
		ra.switched(ctx, m.May)
		ra.pump(ctx)
		return
	}
	q := ra.asking
	if q == nil || q.tag != m.Tag {
		return
	}
	ra.asking = nil
	if ra.loaded && ra.gen == q.gen {
		n := ra.ready(q.through)
		ra.verdicts(n, func() bool { return m.May })
		ra.answerReady(ctx, n, m.May)
		ra.release(ctx) // what became durable since it was asked
	}
	ra.advanceSwitch(ctx)
}

// endLoad ends a load under way as the actor restarts or stops: it is cut
// short and waited for (a seal it writes may be in flight), and the events
// that waited for it are refused: none ran, so each is delivered again.
func (ra *residentActor) endLoad(ctx actor.Context, why string) {
	l := ra.loading
	if l == nil {
		return
	}
	ra.loading = nil
	l.stopping()
	l.cancel()
	l.wait()
	for _, m := range l.stash {
		ra.answer(ctx, m, result{err: ra.h.notRun(ra.actor, why)})
	}
}

// damaged fails an event whose actor's state object, at key, is damaged.
// The hold stays live and nothing is written: the object is left as it is
// for a person to restore, and the next event reads it again (one read,
// the same answer, until then). The keeper counts it and logs it once per
// key.
// heldNoMore judges damage found in what the head of the hold at gen
// lists (a run or a manifest missing, or failing its checksum): once the
// hold has ended it is no damage, and heldNoMore says so: the event is
// refused as not served here, which a retry elsewhere cures. A later holder merges
// runs and deletes those its own head no longer lists, and a node that
// lost the actor without knowing it yet (stopped, then fenced) may still
// read by the head it loaded; the hold that has ended cannot vouch for
// what it read, and the holder after it, reading the head that is
// current, finds real damage. Asked after the read failed: if the hold
// may still act, no later holder existed when it read.
func (ra *residentActor) heldNoMore(gen ownership.Generation) bool {
	if ra.h.cfg.Keeper.MayAct(ra.actor, gen) {
		return false
	}
	ra.log().Info("a read of the actor's storage failed after its hold ended: not damage", slog.Uint64("gen", uint64(gen)))
	return true
}

func (ra *residentActor) damaged(key string, err error) error {
	ra.h.cfg.Keeper.DamageFound(key, err)
	return &actorstore.DamagedError{Actor: ra.actor, Key: key, Err: err}
}

// panicFrames is where the class panicked, for its log line: the frames
// from the panic up to the actor's call of the class, innermost first, as
// "function file:line" joined by " < " on one line (a stack of many lines
// would be one escaped line in the log anyway). Called from the deferred
// function that recovered.
func panicFrames() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	var out []string
	inPanic := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			inPanic = true
		case strings.HasSuffix(f.Function, ".(*residentActor).run"):
			more = false
		case inPanic && !strings.HasPrefix(f.Function, "runtime."):
			out = append(out, fmt.Sprintf("%s %s:%d", f.Function, filepath.Base(f.File), f.Line))
		}
		if !more {
			break
		}
	}
	if len(out) == 0 {
		return "unknown"
	}
	return strings.Join(out, " < ")
}
