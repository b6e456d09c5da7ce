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
// serialises the actor's events. It does its event's bucket I/O inside its
// own Receive (see the package doc): nothing else waits on its mailbox.
type instance struct {
	h     *Host
	actor ownership.Actor
	class Class
	ended *atomic.Bool // see resident.ended
	// per is the class's per-actor handler when the class is an
	// ActorFactory, made at the first event and closed when the actor
	// stops.
	per ActorClass

	// Invariant: when loaded, state is the object at etag in the bucket,
	// stamped with gen (by the acquisition's seal, or a fence here, then
	// this instance's commits).
	loaded bool
	gen    ownership.Generation
	etag   ownership.ETag
	state  stateObject
}

func (in *instance) Receive(ctx actor.Context) {
	var m *eventMsg
	switch msg := ctx.Message().(type) {
	case *eventMsg:
		m = msg
	case *actor.Restarting:
		// A panic reached the supervisor, which restarts this instance: the
		// producer hands back this same value, so forget what it held; the
		// next event fences and reloads from the bucket.
		in.drop()
		in.closePer()
		return
	case *actor.Stopped:
		in.closePer()
		return
	default:
		return
	}
	r := in.event(m)
	// Done before the reply: the director counts the event finished before
	// its caller can send the next one, so that what it decides (idle
	// timer, eviction) follows the order callers see.
	ctx.Send(ctx.Parent(), &doneMsg{actor: in.actor, pid: ctx.Self(), id: m.id})
	m.reply <- r
}

// closePer closes the per-actor handler, if any.
func (in *instance) closePer() {
	if in.per != nil {
		in.per.Close()
		in.per = nil
	}
}

// drop forgets the resident state: the next event reloads it.
func (in *instance) drop() {
	in.loaded, in.gen, in.etag, in.state = false, 0, "", stateObject{}
}

func (in *instance) log() *slog.Logger {
	return in.h.log.With(slog.String("class", in.actor.Class), slog.String("name", in.actor.Name))
}

func (in *instance) event(m *eventMsg) result {
	if in.ended.Load() {
		return result{err: in.h.unavailable(in.actor, "hold ended")}
	}
	if in.loaded && m.gen < in.gen {
		return result{err: in.h.unavailable(in.actor, fmt.Sprintf("stale grant at generation %d, resident at %d", m.gen, in.gen))}
	}
	// Bucket calls outlive a client that went away: a commit cut short
	// would only have an unknown outcome.
	ioCtx := context.WithoutCancel(m.ctx)
	if !in.loaded || m.gen != in.gen {
		in.drop()
		if err := in.load(ioCtx, m.gen); err != nil {
			in.drop()
			return result{err: err}
		}
	}
	t := newTxn(in.state.KV, in.h.cfg.MaxState)
	resp, err := in.run(m, t)
	if err != nil {
		return result{resp: in.failed(err)}
	}
	if t.dirty() {
		if err := in.commit(ioCtx, t); err != nil {
			in.drop()
			return result{err: err}
		}
	}
	// The output gate: the commit is durable; the response goes out only if
	// the hold is still live under a valid lease now.
	if !in.h.cfg.Owner.MayAct(in.actor, in.gen) {
		in.drop()
		return result{err: in.h.unavailable(in.actor, "hold no longer live or node lease not valid")}
	}
	if resp == nil {
		resp = &Response{}
	}
	if resp.Status == 0 {
		resp.Status = http.StatusOK
	}
	return result{resp: resp}
}

// run calls the class. A panic becomes an error and drops the resident
// state, which the class may have left half-changed through shared slices.
func (in *instance) run(m *eventMsg, t *txn) (resp *Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			in.log().Error("actor panicked", slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			in.drop()
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
	return c.Handle(m.ctx, m.req, t)
}

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
			in.log().Error("unreadable actor state", slog.String("key", key), slog.Any("err", err))
			return in.h.unavailable(in.actor, "unreadable state")
		}
		switch {
		case st.Gen > gen:
			in.log().Warn("actor hold superseded: its state is sealed by a later hold",
				slog.Uint64("gen", uint64(gen)), slog.Uint64("state_gen", uint64(st.Gen)))
			in.h.cfg.Owner.HoldEnded(in.actor, gen, "superseded")
			return in.h.unavailable(in.actor, fmt.Sprintf("state sealed at generation %d, hold at %d: superseded", st.Gen, gen))
		case st.Gen == gen:
			in.loaded, in.gen, in.etag, in.state = true, gen, obj.ETag, st
			return nil
		}
		cond = ownership.IfMatch(obj.ETag)
	case ownership.NotFound:
		st = stateObject{KV: map[string][]byte{}}
		cond = ownership.IfAbsent()
	default:
		in.log().Warn("actor state read failed", slog.String("key", key), slog.Any("err", err))
		return in.h.unavailable(in.actor, "state read failed")
	}
	st.Gen, st.Seq = gen, st.Seq+1
	wctx, cancel := context.WithTimeout(ctx, in.h.cfg.IOTimeout)
	etag, err := in.h.cfg.Bucket.Put(wctx, key, encodeState(st), cond)
	cancel()
	if err != nil {
		in.log().Warn("actor fence write did not land", slog.String("key", key),
			slog.Uint64("gen", uint64(gen)), slog.String("outcome", ownership.OutcomeOf(err).String()), slog.Any("err", err))
		return in.h.unavailable(in.actor, "fence write "+ownership.OutcomeOf(err).String())
	}
	in.loaded, in.gen, in.etag, in.state = true, gen, etag, st
	return nil
}

// commit writes the event's state with If-Match on the version this hold
// last saw. Refused or unknown: the caller drops the resident state.
func (in *instance) commit(ctx context.Context, t *txn) error {
	next := stateObject{StateHeader: ownership.StateHeader{Gen: in.gen, Seq: in.state.Seq + 1}, KV: t.result()}
	ctx, cancel := context.WithTimeout(ctx, in.h.cfg.IOTimeout)
	defer cancel()
	etag, err := in.h.cfg.Bucket.Put(ctx, StateKey(in.actor), encodeState(next), ownership.IfMatch(in.etag))
	if err != nil {
		outcome := ownership.OutcomeOf(err)
		in.log().Warn("actor commit did not land", slog.Uint64("gen", uint64(in.gen)),
			slog.String("outcome", outcome.String()), slog.Any("err", err))
		return in.h.unavailable(in.actor, "commit "+outcome.String())
	}
	in.etag, in.state = etag, next
	return nil
}
