package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// instance is one resident actor: a proto.actor actor whose mailbox
// serialises the actor's events. Events run one at a time on the working
// state, which includes the writes of earlier events whose commit has not
// landed yet; their responses wait at the output gate until it has. At most
// one commit is in flight: the writes of every event that ran meanwhile go
// out together in the next one (group commit).
type instance struct {
	h     *Host
	actor ownership.Actor
	class Class
	ended *atomic.Bool // see resident.ended
	// per is the class's per-actor handler when the class is an
	// ActorFactory, made at the first event and closed when the actor
	// stops.
	per ActorClass

	// Invariant: when loaded, state is the working state of the hold at
	// gen: the object at etag in the bucket (stamped with gen by the
	// acquisition's seal or a fence here, then this instance's commits),
	// plus the writes of the events after version durable.
	loaded bool
	gen    ownership.Generation
	etag   ownership.ETag
	state  stateObject

	version   uint64     // events with writes applied to state
	durable   uint64     // the version the bucket holds
	inflight  *commitJob // the commit in flight, if any
	waiting   []waiter   // responses held at the output gate, in order
	committed uint64     // count of commits written, for metrics and tests
}

// waiter is an event that ran and waits for the commit of the writes it
// may have seen (version upto) before its response goes out.
type waiter struct {
	m    *eventMsg
	r    result
	upto uint64
}

// commitJob is one commit in flight: the state as of version, encoded.
type commitJob struct {
	version uint64
	seq     uint64
	done    chan commitResult // buffered: the writer never blocks
}

type commitResult struct {
	etag ownership.ETag
	err  error
}

// commitDoneMsg tells the instance its commit in flight has an answer.
type commitDoneMsg struct{ job *commitJob }

func (in *instance) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *eventMsg:
		in.event(ctx, msg)
	case *commitDoneMsg:
		if in.inflight == msg.job {
			in.committedAt(ctx, <-msg.job.done)
		}
	case *actor.Restarting:
		// A panic reached the supervisor, which restarts this instance: the
		// producer hands back this same value. What waits at the gate is
		// answered 503 (a commit in flight is waited for first, so that it
		// cannot race the next load); the next event reloads.
		in.settleEnding(ctx, false)
		in.drop()
		in.closePer()
	case *actor.Stopped:
		// Events that ran are committed and released before the instance
		// goes: a drain or a stop finishes them.
		in.settleEnding(ctx, true)
		in.closePer()
	}
}

// settleEnding settles an instance that restarts or stops. A panic while it
// does (the output gate's owner failing again) must not leave an event
// unanswered or the instance half-stopped: every waiting event is failed.
func (in *instance) settleEnding(ctx actor.Context, flush bool) {
	defer func() {
		if p := recover(); p != nil {
			in.log().Error("panic while the instance ends; its waiting events fail", slog.Any("panic", p))
			in.inflight = nil
			in.failWaiting(ctx, in.h.unavailable(in.actor, "actor failed"))
		}
	}()
	in.settle(ctx, flush)
}

// closePer closes the per-actor handler, if any.
func (in *instance) closePer() {
	if in.per != nil {
		in.per.Close()
		in.per = nil
	}
}

// drop forgets the resident state: the next event reloads it. Nothing may
// wait at the gate or be in flight.
func (in *instance) drop() {
	in.loaded, in.gen, in.etag, in.state = false, 0, "", stateObject{}
	in.version, in.durable = 0, 0
}

func (in *instance) log() *slog.Logger {
	return in.h.log.With(slog.String("class", in.actor.Class), slog.String("name", in.actor.Name))
}

// answer sends an event's result. Done goes before the reply: the director
// counts the event finished before its caller can send the next one, so
// that what it decides (idle timer, eviction) follows the order callers see.
//
// The reply never blocks: if the event was answered already (the
// director answers the event whose panic reached it), this answer is
// dropped.
func (in *instance) answer(ctx actor.Context, m *eventMsg, r result) {
	ctx.Send(ctx.Parent(), &doneMsg{actor: in.actor, pid: ctx.Self(), id: m.id})
	select {
	case m.reply <- r:
	default:
	}
}

// eventValues is what the event's context carries for SocketsOf and Call.
type eventValues struct {
	socks eventSockets // owner nil: the node serves no sockets
	call  eventCall
}

type eventValuesKey struct{}

func (in *instance) event(ctx actor.Context, m *eventMsg) {
	if in.ended.Load() {
		in.answer(ctx, m, result{err: in.h.notRun(in.actor, "hold ended")})
		return
	}
	if in.loaded && m.gen < in.gen {
		in.answer(ctx, m, result{err: in.h.notRun(in.actor, fmt.Sprintf("stale grant at generation %d, resident at %d", m.gen, in.gen))})
		return
	}
	// Bucket calls outlive a client that went away: a commit cut short
	// would only have an unknown outcome.
	ioCtx := context.WithoutCancel(m.ctx)
	if !in.loaded || m.gen != in.gen {
		in.settle(ctx, true) // a later grant: finish the old hold's events first
		in.drop()
		// The grant may have ended before its event got here: the actor
		// went idle between the grant and the event (the director's idle
		// timer came first), and its hold was parked or released. Such
		// an event must not run: its writes would land and its output be
		// withheld. Refused before it runs, it is delivered again.
		if !in.h.cfg.Owner.MayAct(in.actor, m.gen) {
			in.answer(ctx, m, result{err: in.h.notRun(in.actor, "hold no longer live")})
			return
		}
		if err := in.load(ioCtx, m.gen); err != nil {
			in.drop()
			in.answer(ctx, m, result{err: err})
			return
		}
	}
	t := newTxn(in.state.KV, in.h.cfg.MaxState)
	// What SocketsOf and Call reach through the event's context: one value.
	ev := &eventValues{
		socks: eventSockets{owner: in.h.cfg.Sockets, actor: in.actor},
		call:  eventCall{in: in, actx: ctx, t: t, outer: CallChain(m.ctx)},
	}
	gen := in.gen
	resp, err := in.run(context.WithValue(m.ctx, eventValuesKey{}, ev), m, t)
	if !in.loaded || in.gen != gen {
		// A commit before one of the event's calls failed: the working
		// state was dropped, and the event fails with it.
		in.answer(ctx, m, result{err: in.h.unavailable(in.actor, "commit before a call did not land")})
		return
	}
	var r result
	switch {
	case err != nil:
		r = result{resp: in.failed(err)}
	default:
		if t.dirty() {
			in.state.KV = t.result()
			in.version++
		}
		r = result{resp: resp, out: ev.socks.out}
	}
	r.woke = m.spawned
	in.waiting = append(in.waiting, waiter{m: m, r: r, upto: in.version})
	in.pump(ctx)
}

// pump starts a commit when writes wait and none is in flight, and
// releases what the durable version covers.
func (in *instance) pump(ctx actor.Context) {
	if in.inflight == nil && in.version > in.durable {
		in.startCommit(ctx)
	}
	in.release(ctx)
}

// startCommit writes the working state with If-Match on the version this
// hold last saw, in the background; the answer comes back as a
// commitDoneMsg through the mailbox.
func (in *instance) startCommit(ctx actor.Context) {
	next := stateObject{StateHeader: ownership.StateHeader{Gen: in.gen, Seq: in.state.Seq + 1}, KV: in.state.KV}
	body, key, etag := encodeState(next), StateKey(in.actor), in.etag
	job := &commitJob{version: in.version, seq: next.Seq, done: make(chan commitResult, 1)}
	in.inflight = job
	in.committed++
	self, root, bucket, timeout := ctx.Self(), in.h.cfg.System.Root, in.h.cfg.Bucket, in.h.cfg.IOTimeout
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		cond := ownership.IfMatch(etag)
		if etag == "" {
			cond = ownership.IfAbsent() // the actor's first commit
		}
		etag, err := bucket.Put(cctx, key, body, cond)
		cancel()
		job.done <- commitResult{etag: etag, err: err}
		root.Send(self, &commitDoneMsg{job: job})
	}()
}

// committedAt takes the answer of the commit in flight.
func (in *instance) committedAt(ctx actor.Context, res commitResult) {
	job := in.inflight
	in.inflight = nil
	if !in.loaded {
		return // dropped meanwhile (the gate closed): the next event reloads
	}
	if res.err != nil {
		outcome := ownership.OutcomeOf(res.err)
		in.log().Warn("actor commit did not land", slog.Uint64("gen", uint64(in.gen)),
			slog.String("outcome", outcome.String()), slog.Any("err", res.err))
		// Every event that ran since the durable version saw writes that
		// may never land: they all fail, and the state is reloaded.
		in.failWaiting(ctx, in.h.unavailable(in.actor, "commit "+outcome.String()))
		in.drop()
		return
	}
	in.etag, in.state.Seq, in.durable = res.etag, job.seq, job.version
	in.pump(ctx)
}

// release answers the waiting events whose writes (and every write they
// could have seen) are durable, if the hold may still act.
func (in *instance) release(ctx actor.Context) {
	n := 0
	for n < len(in.waiting) && in.waiting[n].upto <= in.durable {
		n++
	}
	if n == 0 {
		return
	}
	// The output gate: the writes are durable; the responses go out only
	// if the hold is still live under a valid lease now. (Asked before the
	// waiting list changes: should it panic, the restart answers them all.)
	if !in.h.cfg.Owner.MayAct(in.actor, in.gen) {
		in.failWaiting(ctx, in.h.unavailable(in.actor, "hold no longer live or node lease not valid"))
		in.drop()
		return
	}
	ready := in.waiting[:n]
	in.waiting = append([]waiter(nil), in.waiting[n:]...)
	for _, w := range ready {
		if len(w.r.out) > 0 {
			flushSockets(in.h.cfg.Sockets, in.actor, w.r.out, in.log)
		}
		in.answer(ctx, w.m, done(w.r))
	}
}

func done(r result) result {
	if r.err != nil {
		return r
	}
	if r.resp == nil {
		r.resp = &Response{}
	}
	if r.resp.Status == 0 {
		r.resp.Status = http.StatusOK
	}
	return r
}

// failWaiting answers every waiting event with err.
func (in *instance) failWaiting(ctx actor.Context, err error) {
	for _, w := range in.waiting {
		in.answer(ctx, w.m, result{err: err})
	}
	in.waiting = nil
}

// settle waits for the commit in flight and answers every waiting event:
// with flush, what is not yet written is committed (synchronously) and
// released through the gate; without, it fails. Afterwards nothing waits
// and nothing is in flight.
func (in *instance) settle(ctx actor.Context, flush bool) {
	for in.inflight != nil {
		res := <-in.inflight.done
		if flush {
			in.committedAt(ctx, res) // releases, and may start the next commit
			continue
		}
		in.inflight = nil
	}
	if len(in.waiting) > 0 {
		in.failWaiting(ctx, in.h.unavailable(in.actor, "actor restarted"))
	}
}

// run calls the class. A panic becomes an error: the event's writes are
// discarded, and the working state is intact (Storage hands the class
// copies, never the state's own slices).
func (in *instance) run(ctx context.Context, m *eventMsg, t *txn) (resp *Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			in.log().Error("actor panicked", slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			resp, err = nil, fmt.Errorf("actor panicked: %v", p)
		}
	}()
	c := in.class
	if f, ok := c.(ActorFactory); ok {
		if in.per == nil {
			in.per = f.NewActor(in.actor)
		}
		c = in.per
	}
	if m.sock != nil {
		if sc, ok := c.(SocketClass); ok {
			return nil, sc.HandleSocket(ctx, m.sock, t)
		}
		return nil, nil // a class without socket events: dropped
	}
	if resp, err = c.Handle(ctx, m.req, t); err == nil && resp == nil {
		err = errNoResponse
	}
	return resp, err
}

// errNoResponse fails a request event whose handler returned neither a
// response nor an error, as a wasm guest's handler that returns nil does.
var errNoResponse = errors.New("the class's Handle returned no response and no error")

// failed answers an event whose handler failed; its writes are discarded.
func (in *instance) failed(err error) *Response {
	if errors.Is(err, ErrLimit) {
		return Text(http.StatusRequestEntityTooLarge, err.Error()+"\n")
	}
	in.log().Warn("actor event failed", slog.Any("err", err))
	return Text(http.StatusInternalServerError, "actor error\n")
}

// load reads the state object for the hold at gen. The acquisition sealed
// it with gen before the hold existed (see ownership/seal.go), so it is
// normally read as is. An object stamped with a later generation means this
// hold was superseded: it ends. One stamped earlier was not sealed (a hold
// granted without the ownership core, in tests and tools): it is fenced here,
// rewritten stamped with gen, so no older hold's write can land after this.
func (in *instance) load(ctx context.Context, gen ownership.Generation) error {
	key := StateKey(in.actor)
	rctx, cancel := context.WithTimeout(ctx, in.h.cfg.IOTimeout)
	obj, err := in.h.cfg.Bucket.Get(rctx, key)
	cancel()
	var st stateObject
	var cond ownership.Condition
	switch ownership.OutcomeOf(err) {
	case ownership.Landed:
		if st, err = decodeState(obj.Body); err != nil {
			return in.damaged(key, err)
		}
		verdict, h := ownership.JudgeState(true, st.StateHeader, gen)
		switch verdict {
		case ownership.StateSuperseded:
			in.log().Warn("actor hold superseded: its state is sealed by a later hold",
				slog.Uint64("gen", uint64(gen)), slog.Uint64("state_gen", uint64(st.Gen)))
			in.h.cfg.Owner.HoldEnded(in.actor, gen, "superseded")
			return in.h.notRun(in.actor, fmt.Sprintf("state sealed at generation %d, hold at %d: superseded", st.Gen, gen))
		case ownership.StateUse:
			in.loaded, in.gen, in.etag, in.state = true, gen, obj.ETag, st
			return nil
		}
		st.StateHeader, cond = h, ownership.IfMatch(obj.ETag) // StateFence
	case ownership.Damaged:
		return in.damaged(key, err)
	case ownership.NotFound:
		// A new actor: its first commit creates the object, If-None-Match.
		// (The core seals only actors that had a record, and so a hold.)
		_, h := ownership.JudgeState(false, ownership.StateHeader{}, gen)
		in.loaded, in.gen, in.etag, in.state = true, gen, "", stateObject{StateHeader: h, KV: map[string][]byte{}}
		return nil
	default:
		in.log().Warn("actor state read failed", slog.String("key", key), slog.Any("err", err))
		return in.h.notRun(in.actor, "state read failed")
	}
	wctx, cancel := context.WithTimeout(ctx, in.h.cfg.IOTimeout)
	etag, err := in.h.cfg.Bucket.Put(wctx, key, encodeState(st), cond)
	cancel()
	if err != nil {
		in.log().Warn("actor fence write did not land", slog.String("key", key),
			slog.Uint64("gen", uint64(gen)), slog.String("outcome", ownership.OutcomeOf(err).String()), slog.Any("err", err))
		return in.h.notRun(in.actor, "fence write "+ownership.OutcomeOf(err).String())
	}
	in.loaded, in.gen, in.etag, in.state = true, gen, etag, st
	return nil
}

// damaged fails an event whose actor's state object, at key, is damaged.
// The hold stays live and nothing is written: the object is left as it is
// for a person to restore, and the next event reads it again (one read,
// the same answer, until then). The owner counts it and logs it once per
// key.
func (in *instance) damaged(key string, err error) error {
	in.h.cfg.Owner.DamageFound(key, err)
	return &DamagedError{Actor: in.actor, Key: key, Err: err}
}
