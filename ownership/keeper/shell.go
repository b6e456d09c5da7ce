package keeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Messages the actor receives. Only the Keeper's methods, the timer and the
// bucket goroutines send them, always through Keeper.post.
type (
	inputMsg   struct{ in ownership.Input }
	replyMsg   struct{ r ownership.Reply }
	tickMsg    struct{}
	acquireMsg struct{ w *waiter }
	mayActMsg  struct {
		actor ownership.Actor
		gen   ownership.Generation
		ch    chan bool  // for MayAct
		pid   *actor.PID // for RequestMayAct
		tag   uint64
	}
	// statusMsg: the answer goes to ch, or as a *StatusAnswer to pid.
	statusMsg struct {
		ch  chan ownership.Status
		pid *actor.PID
	}
)

// waiter is one acquisition waiting for its Decision.
type waiter struct {
	actor ownership.Actor
	// For Acquire: the answer goes to ch (buffered, so delivery never
	// blocks), unless the caller gave up first; state settles that race.
	ch    chan Decision
	state atomic.Uint32
	// For RequestAcquire: the answer goes to pid as an *AcquireAnswer.
	pid *actor.PID
	tag uint64
}

const (
	waiting uint32 = iota
	delivered
	abandoned
)

// abandon marks the waiter given up; false means its answer is (or is
// about to be) in ch.
func (w *waiter) abandon() bool { return w.state.CompareAndSwap(waiting, abandoned) }

// deliver hands d to whoever waits, on the actor's goroutine. A grant
// nobody waits for any more goes to Hooks.Abandoned, so that the node can
// end a hold no event runs under.
func (w *waiter) deliver(ctx actor.Context, d Decision, hooks Hooks) {
	if w.pid != nil {
		ctx.Send(w.pid, &AcquireAnswer{Actor: w.actor, Tag: w.tag, Decision: d})
		return
	}
	if w.state.CompareAndSwap(waiting, delivered) {
		w.ch <- d
		return
	}
	if d.Verdict == Granted {
		hooks.Abandoned(w.actor, d.Gen)
	}
}

// shell is the actor. All its fields are touched only by Receive, on the
// actor's goroutine, except those of k that Keeper documents.
type shell struct {
	k       *Keeper
	core    *ownership.Core
	node    ownership.NodeID
	inst    ownership.InstanceID
	bucket  ownership.Bucket
	clock   func() time.Time
	attempt time.Duration
	// heartbeat bounds the time between two steps (see rearm).
	heartbeat time.Duration
	log       *slog.Logger
	hooks     Hooks
	metrics   *metrics

	// last is the latest time stepped: the Core panics if time goes back,
	// and a wall clock may step back.
	last time.Time
	// base is the parent of every bucket call's context; cancelled when
	// the keeper ends, so that no call outlives it by much.
	base   context.Context
	cancel context.CancelFunc

	timer  *time.Timer
	wantAt time.Time // when the timer is set for: the last SetTimer's time, or a heartbeat
	armed  bool      // the timer will fire (as far as the actor knows)

	nextRef uint64
	waiting map[uint64]*waiter

	started   bool
	tookLease bool
	ended     bool
	stopped   bool
}

func newShell(k *Keeper, core *ownership.Core, cfg Config, log *slog.Logger, m *metrics) *shell {
	base, cancel := context.WithCancel(context.Background())
	return &shell{
		k:         k,
		core:      core,
		node:      cfg.Core.Node,
		inst:      cfg.Core.Instance,
		bucket:    cfg.Bucket,
		clock:     cfg.Clock,
		attempt:   cfg.Core.AttemptTimeout,
		heartbeat: cfg.Core.LeasePeriod / 2,
		log:       log,
		hooks:     NopHooks{}, // until Begin's
		metrics:   m,
		base:      base,
		cancel:    cancel,
		waiting:   map[uint64]*waiter{},
	}
}

// Receive handles one message. It never waits for I/O, and it never lets a
// panic escape: proto.actor would restart the actor and lose the message
// that panicked, and the Core's state after a panic cannot be trusted, so
// a panic ends the keeper instead (see fail).
func (s *shell) Receive(ctx actor.Context) {
	msg := ctx.Message()
	defer func() {
		if r := recover(); r != nil {
			s.fail(ctx, fmt.Sprintf("panic while handling %T: %v", msg, r), r, debug.Stack(), true)
		}
	}()
	switch m := msg.(type) {
	case *actor.Started:
		// The Core starts at Begin (beginMsg), once the node has made
		// what the hooks reach.
	case *beginMsg:
		if s.started || s.ended {
			return
		}
		s.started, s.hooks = true, m.hooks
		s.step(ctx, ownership.Start{})
	case *actor.Restarting:
		// Unreachable while Receive recovers every panic; should it happen,
		// the message that failed is lost, and so is the Core's consistency.
		s.fail(ctx, "the ownership actor was restarted", nil, nil, true)
	case *actor.Stopping:
		if !s.ended {
			// Stopped from outside (Stop drops what is queued): the Core
			// cannot go on, and the node must not act on its holds.
			s.fail(ctx, "the ownership actor was stopped from outside", nil, nil, false)
		}
	case *actor.Stopped:
		if !s.stopped {
			s.stopped = true
			close(s.k.stopped)
		}
	case *inputMsg:
		if !s.ended {
			s.step(ctx, m.in)
		}
		s.k.fast.taken(m.in) // after the step: its effects are the Core's now
	case *replyMsg:
		if !s.ended {
			s.step(ctx, m.r)
		}
	case *tickMsg:
		s.armed = false
		if !s.ended {
			s.step(ctx, ownership.Tick{})
		}
	case *acquireMsg:
		if s.ended {
			m.w.deliver(ctx, s.k.stoppedDecision(m.w.actor), s.hooks)
			return
		}
		s.nextRef++
		s.waiting[s.nextRef] = m.w
		s.step(ctx, ownership.Acquire{Actor: m.w.actor, Ref: s.nextRef})
	case *mayActMsg:
		may := !s.ended && s.core.MayAct(m.actor, m.gen, s.now())
		if m.pid != nil {
			ctx.Send(m.pid, &MayActAnswer{Actor: m.actor, Gen: m.gen, Tag: m.tag, May: may})
		} else {
			m.ch <- may
		}
	case *statusMsg:
		st := s.k.final
		if !s.ended {
			st = s.core.Status(s.now())
		}
		if m.pid != nil {
			ctx.Send(m.pid, &StatusAnswer{Status: st, Ended: s.ended})
		} else {
			m.ch <- st
		}
	}
}

// now reads the clock, never going back.
func (s *shell) now() time.Time {
	t := s.clock()
	if t.Before(s.last) {
		t = s.last
	}
	s.last = t
	return t
}

// step feeds one input to the Core and carries out its effects in order.
func (s *shell) step(ctx actor.Context, in ownership.Input) {
	now := s.now()
	effects := s.core.Step(now, in)
	a, pure := pureGrant(in, effects)
	if !pure && !pureReport(in, effects) {
		s.k.fast.clear(false) // before any effect: see fastHolds
	}
	for _, e := range effects {
		s.apply(ctx, now, e)
		if s.ended {
			return // Exit is the Core's last effect
		}
	}
	if pure {
		if gen, until, ok := s.core.Serving(a, now); ok {
			s.k.fast.put(a, gen, until)
		}
	}
	if !s.armed {
		s.rearm(now)
	}
}

// rearm sets the timer again after a step that left it unset.
//
// Invariant: the Core asks for a Tick only when its next deadline changes.
// If the timer fired before that deadline on our clock (a Clock that runs
// behind the runtime's timers, or a tick from a timer already reset), the
// Core will not ask again: keep waiting for it. If the deadline has passed
// and the Core asked for nothing new, tick it anyway after a heartbeat: a
// Tick is always allowed (the Core does what is due), and a Core that
// reports no deadline while one is hidden behind a due one it cannot act on
// would otherwise not notice, say, its lease lapsing until the next input.
func (s *shell) rearm(now time.Time) {
	at := s.wantAt
	if !now.Before(at) {
		at = now.Add(s.heartbeat)
	}
	s.arm(now, at)
}

func (s *shell) apply(ctx actor.Context, now time.Time, e ownership.Effect) {
	switch e := e.(type) {
	case ownership.Request:
		s.run(e)
	case ownership.Grant:
		s.answer(ctx, e.Ref, e.Actor, grantDecision(e))
	case ownership.Route:
		s.answer(ctx, e.Ref, e.Actor, routeDecision(e))
	case ownership.Refuse:
		s.answer(ctx, e.Ref, e.Actor, refuseDecision(e))
	case ownership.StopActing:
		s.hooks.StopActing(e)
	case ownership.CloseSockets:
		s.hooks.CloseSockets(e)
	case ownership.SetTimer:
		s.arm(now, e.At)
	case ownership.Count:
		s.metrics.count(e)
	case ownership.SetGauge:
		s.metrics.set(e)
	case ownership.Observe:
		s.metrics.observe(e)
	case ownership.LeaseChanged:
		// Invariant: the Core's first LeaseChanged is the one it emits on
		// taking the lease.
		if !s.tookLease {
			s.tookLease = true
			close(s.k.taken)
		}
		s.hooks.LeaseChanged(e)
	case ownership.Report:
		s.report(e)
	case ownership.Take:
		s.hooks.Take(e)
	case ownership.Drained:
		s.hooks.Drained()
	case ownership.DrainChanged:
		s.hooks.DrainChanged(e)
	case ownership.MoveRequests:
		s.hooks.MoveRequests(e)
	case ownership.Exit:
		var err error
		if e.Clean {
			s.log.Info("ownership keeper stopped cleanly", slog.String("reason", e.Reason))
		} else {
			err = &ExitError{Node: s.node, Reason: e.Reason}
			s.log.Warn("ownership keeper ended", slog.String("reason", e.Reason))
		}
		s.end(ctx, e, err, true)
	default:
		panic(fmt.Sprintf("ownership keeper: unknown effect %T", e))
	}
}

func (s *shell) answer(ctx actor.Context, ref uint64, a ownership.Actor, d Decision) {
	w := s.waiting[ref]
	if w == nil {
		// The Core answers every Acquire exactly once; a second answer is
		// its bug, and the first one stands.
		s.log.Error("ownership core answered an acquisition twice, or one it was not asked",
			slog.Uint64("ref", ref), slog.String("actor", a.String()), slog.String("decision", d.String()))
		return
	}
	delete(s.waiting, ref)
	w.deliver(ctx, d, s.hooks)
}

// arm sets the one timer to deliver a Tick at at.
func (s *shell) arm(now, at time.Time) {
	s.wantAt = at
	d := at.Sub(now)
	if d < 0 {
		// The Core never asks for a time before its step's now; the shell's
		// clock has moved on since. Tick at once.
		d = 0
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(d, func() { s.k.post(&tickMsg{}) })
	} else {
		s.timer.Reset(d)
	}
	s.armed = true
}

func (s *shell) report(r ownership.Report) {
	level := slog.LevelWarn
	attrs := make([]slog.Attr, 0, 3)
	switch r.Level {
	case "info":
		level = slog.LevelInfo
	case "warn":
	case "error":
		level = slog.LevelError
	default:
		attrs = append(attrs, slog.String("core_level", r.Level))
	}
	if r.Key != "" {
		attrs = append(attrs, slog.String("key", r.Key))
	}
	if r.Err != nil {
		attrs = append(attrs, slog.String("error", r.Err.Error()))
	}
	s.log.LogAttrs(context.Background(), level, r.Msg, attrs...)
}

// run starts one bucket call in its own goroutine; its reply comes back as
// a message.
func (s *shell) run(req ownership.Request) {
	s.k.requests.Add(1)
	ctx, cancel := context.WithTimeout(s.base, s.attempt)
	go func() {
		defer s.k.requests.Done()
		defer cancel()
		s.k.post(&replyMsg{r: s.call(ctx, req)})
	}()
}

// call runs one bucket call and makes its Reply. It runs on a bucket
// goroutine: it touches nothing of the shell but what is immutable or safe
// for concurrent use.
func (s *shell) call(ctx context.Context, req ownership.Request) (r ownership.Reply) {
	start := s.clock()
	defer func() {
		if p := recover(); p != nil {
			// A store that panics broke its contract; the call may have
			// done anything, so its outcome is unknown.
			s.log.Error("bucket call panicked", slog.String("op", req.Op.String()), slog.String("key", req.Key),
				slog.String("panic", fmt.Sprint(p)), slog.String("stack", string(debug.Stack())))
			r = ownership.Reply{ID: req.ID, Outcome: ownership.Unknown,
				Err: fmt.Errorf("%w: bucket %s %q panicked: %v", ownership.ErrUnknownOutcome, req.Op, req.Key, p)}
		}
		s.metrics.request(req.Op, r.Outcome, s.clock().Sub(start).Seconds())
	}()
	r = Execute(ctx, s.bucket, req)
	err := r.Err
	if r.Outcome == ownership.Failed &&
		(ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The call ran out of time or was cancelled, and the store did not
		// say what became of it: a write may have been sent, and may land.
		err = fmt.Errorf("%w: %w", ownership.ErrUnknownOutcome, err)
		r.Outcome = ownership.Unknown
	}
	r.Err = err
	return r
}

// fail ends the keeper for a reason of its own: a panic, a restart, a stop
// from outside. Nothing more is released or written: the node's lease is
// no longer renewed, so peers fence it once its record has stood still for
// ttl + grace, and the fence frees every record it held. Until then no
// other node can take them, which is the safe side.
func (s *shell) fail(ctx actor.Context, reason string, p any, stack []byte, poison bool) {
	if s.ended {
		s.log.Error("ownership keeper: failure after the end", slog.String("reason", reason),
			slog.String("stack", string(stack)))
		return
	}
	attrs := []slog.Attr{slog.String("reason", reason)}
	if stack != nil {
		attrs = append(attrs, slog.String("stack", string(stack)))
	}
	s.log.LogAttrs(context.Background(), slog.LevelError,
		"ownership keeper broke; ending it without releasing anything (peers fence this node once its lease stands still)", attrs...)
	s.safeHook("CloseSockets", func() {
		s.hooks.CloseSockets(ownership.CloseSockets{All: true, Code: ownership.CloseServiceRestart, Reason: "ownership keeper broke"})
	})
	s.end(ctx, ownership.Exit{Clean: false, Reason: reason},
		&ExitError{Node: s.node, Reason: reason, Broke: true, Panic: p, Stack: stack}, poison)
}

// end shuts the gate, answers every acquisition still waiting, tells the
// node, and lets the actor stop once the messages already admitted have
// been answered (poison drains the mailbox; Stop would drop them).
func (s *shell) end(ctx actor.Context, exit ownership.Exit, err error, poison bool) {
	s.ended = true
	s.k.fast.clear(true)
	s.cancel()
	if s.timer != nil {
		s.timer.Stop()
	}
	final := s.finalStatus()

	s.k.gate.Lock()
	s.k.closed, s.k.final, s.k.reason, s.k.err = true, final, exit.Reason, err
	s.k.gate.Unlock()

	refs := make([]uint64, 0, len(s.waiting))
	for ref := range s.waiting {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		w := s.waiting[ref]
		s.safeHook("answer", func() { w.deliver(ctx, s.k.stoppedDecision(w.actor), s.hooks) })
	}
	s.waiting = nil

	s.safeHook("Exit", func() { s.hooks.Exit(exit) })
	go s.k.finish()
	if poison {
		ctx.Poison(ctx.Self())
	}
}

// finalStatus is the status Status reports after the end. After a panic
// the Core may panic again; then a bare status says what is known.
func (s *shell) finalStatus() (st ownership.Status) {
	defer func() {
		if recover() != nil {
			st = ownership.Status{Node: s.node, Instance: s.inst, Phase: "exited"}
		}
	}()
	st = s.core.Status(s.now())
	st.Phase = "exited" // also after a stop from outside or a panic, which the Core never saw
	st.LeaseValid = false
	return st
}

// safeHook calls a hook while the keeper ends: a panic there is logged, so
// that the end still completes.
func (s *shell) safeHook(name string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("ownership keeper: hook panicked while ending", slog.String("hook", name),
				slog.String("panic", fmt.Sprint(r)), slog.String("stack", string(debug.Stack())))
		}
	}()
	fn()
}

// finish closes done once the actor has stopped and no bucket call is left.
func (k *Keeper) finish() {
	<-k.stopped
	k.requests.Wait()
	close(k.done)
}
