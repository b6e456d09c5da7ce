package wasmhost

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// Class isolation. The resident actors of a class share a few guests
// (Config.SharedGuests), each serving many of them, so that a resident
// actor costs the guest's object for it rather than a guest of its own (a
// megabyte and more for a Go guest).
//
//   - Placement: an actor is placed at its first event on the shared guest
//     with the fewest actors placed, and stays there while it is
//     resident, across the guests that replace a discarded one. One
//     exception keeps calls from waiting forever: an event whose guest is
//     held by an event that waits for it through actor calls (an actor of
//     its call chain) moves its actor to another, or to one started past
//     the pool's size when every other is held so too.
//   - Locking: one event at a time runs on a shared guest, which its token
//     (slot.sem) guards; an actor's events are serialised by its mailbox
//     already, and the events of different actors on one guest wait for its
//     token in turn.
//   - Framing: every call names its actor by id (actorRef), and the host
//     functions act for that event's actor alone (abi.go: eventOf), so the
//     guest cannot reach another actor's storage or sockets. When an actor
//     leaves memory, the guest that knows it is told through
//     wasmkeep_on_leave, at once if no event holds it, else as the holder
//     lets go, and before any later event.
//   - Failure: a failure discards the guest and with it the objects of
//     every actor placed there (counted); their state is in storage, and
//     their next events run on a fresh guest, which meets them as new.

// classPool is the shared guests of a class and the actors placed on them.
// Lock order: classPool.mu, then a slot's mu.
type classPool struct {
	m      *Module
	closed atomic.Bool
	mu     sync.Mutex
	slots  []*slot // made at the first placement: size slots, then extras
}

func newClassPool(m *Module) *classPool { return &classPool{m: m} }

// slot is one shared guest, started at the first event placed there and
// again after one was discarded.
type slot struct {
	p     *classPool
	extra bool          // started past the pool's size for a call chain
	sem   chan struct{} // the token: held while a goroutine uses w
	w     *wasm         // guarded by the token; nil: none started

	// holder is the actor whose event holds the token (nil: none, or a
	// leave notice or a trim), lastUse the step of the trim clock at the
	// last event: atomics, so that an event takes no lock but the token.
	holder  atomic.Pointer[ownership.Actor]
	lastUse atomic.Uint64

	mu      sync.Mutex
	gen     uint64       // generation of the guest; changed (token and mu held) when one is discarded
	placed  int          // resident actors placed here
	pending []*actorRef  // actors that left memory, for the guest to be told
	npend   atomic.Int32 // len(pending), read without mu
}

func (p *classPool) newSlot(extra bool) *slot {
	return &slot{p: p, extra: extra, sem: make(chan struct{}, 1), gen: 1}
}

// member is the Resident of one actor of a class in class isolation: its
// place on a shared guest for its residency. Like a Guest, it is called
// from one goroutine at a time.
type member struct {
	p      *classPool
	actor  ownership.Actor
	ref    *actorRef
	s      *slot  // where the actor is placed; nil before its first event
	seen   uint64 // generation of s's guest that met the actor; 0: none
	closed bool
}

func (p *classPool) newMember(a ownership.Actor) *member {
	m := p.m
	return &member{p: p, actor: a, ref: m.r.newActorRef(m.class, a.Name, m.log, true)}
}

// Handle implements actors.Class for the actor, on its shared guest;
// see Guest.Handle. An error that wraps ErrTimeout or ErrGuest discarded
// the shared guest.
func (a *member) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if a.closed || a.p.closed.Load() {
		return nil, ErrClosed
	}
	return a.p.m.handleOn(ctx, a, a.ref, req, st)
}

// HandleSocket implements actors.SocketHandler; see Guest.HandleSocket.
func (a *member) HandleSocket(ctx context.Context, sev *actors.SocketEvent, st actors.Storage) error {
	if a.closed || a.p.closed.Load() {
		return ErrClosed
	}
	return a.p.m.handleSocketOn(ctx, a, a.ref, sev, st)
}

// HandleAlarm implements actors.AlarmHandler; see Guest.HandleAlarm.
func (a *member) HandleAlarm(ctx context.Context, al actors.Alarm, st actors.Storage) error {
	if a.closed || a.p.closed.Load() {
		return ErrClosed
	}
	return a.p.m.handleAlarmOn(ctx, a, a.ref, al, st)
}

// run implements runner: it runs ev on the actor's shared guest once it
// holds its token, starting the guest if none is, within the event timeout
// (which starts once the token is held). Any error of the guest discards
// it.
func (a *member) run(ctx context.Context, what string, kind eventKind, ev *event) (int32, error) {
	s, err := a.acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrWait, what, err)
	}
	defer s.unlock()
	if a.p.closed.Load() {
		return 0, ErrClosed
	}
	if s.npend.Load() > 0 {
		s.flush()
	}
	r := a.p.m.r
	cctx := r.bound(ctx, ev)
	defer r.unbound(ev)
	if s.w == nil {
		w, err := a.p.m.startWasm(cctx, false)
		if err != nil {
			return 0, s.fail(ctx, cctx, a.ref, "start", err)
		}
		s.w = w
		r.metrics.shared.WithLabelValues(a.p.m.class).Inc()
	}
	a.seen = s.gen
	ev.actor = a.ref // a move while it waited gave the actor a new id
	code, err := s.w.exec(kind, ev)
	if err != nil {
		return 0, s.fail(ctx, cctx, a.ref, what, err)
	}
	a.p.m.logOut(s.w.out, a.ref)
	return code, nil
}

// acquire places the actor if it has no place yet, and waits for the
// token of its shared guest. An event that waits for the token of one held
// by an actor of its call chain would wait forever (that actor waits for
// this event): the actor moves.
func (a *member) acquire(ctx context.Context) (*slot, error) {
	chain := actorhost.CallChain(ctx)
	if a.s == nil {
		a.s = a.p.place(chain)
	}
	for {
		s := a.s
		select {
		case s.sem <- struct{}{}:
			s.hold(&a.actor)
			return s, nil
		default:
		}
		// The holder of a call chain's actor held the token since before
		// this event was sent, so one look settles it.
		if len(chain) > 0 && s.heldBy(chain) {
			a.move(chain)
			continue
		}
		select {
		case s.sem <- struct{}{}:
			s.hold(&a.actor)
			return s, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// move places the actor elsewhere than on its shared guest, which an actor
// of chain holds; that guest is told the actor left when its holder lets
// go.
func (a *member) move(chain []ownership.Actor) {
	old := a.s
	old.mu.Lock()
	old.placed--
	if a.seen == old.gen {
		old.addPending(a.ref)
	}
	old.mu.Unlock()
	// A new id: the old guest is told the old one left, and never
	// meets it again.
	m := a.p.m
	a.s, a.seen, a.ref = a.p.place(chain), 0, m.r.newActorRef(m.class, a.actor.Name, m.log, true)
	a.ref.logger().Debug("actor moved to another shared guest: its own is held by an event waiting for it")
}

// Close implements actors.Resident: the actor left memory. Its shared
// guest, if it met the actor, is told.
func (a *member) Close() {
	if a.closed {
		return
	}
	a.closed = true
	s := a.s
	if s == nil {
		return
	}
	s.mu.Lock()
	s.placed--
	tell := a.seen == s.gen
	if tell {
		s.addPending(a.ref)
	}
	s.mu.Unlock()
	if tell {
		s.tryFlush()
	}
}

// place returns the slot for an actor whose event's call chain is chain:
// the one of the pool's size with the fewest actors placed, among those
// not held by an actor of chain; else the extra one with the fewest; else
// a new extra one. The actor is counted placed there.
func (p *classPool) place(chain []ownership.Actor) *slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.slots == nil {
		p.slots = make([]*slot, max(p.m.r.cfg.SharedGuests, 1))
		for i := range p.slots {
			p.slots[i] = p.newSlot(false)
		}
	}
	var best *slot
	bestN := 0
	for _, extras := range []bool{false, true} {
		for _, s := range p.slots {
			if s.extra != extras {
				continue
			}
			s.mu.Lock()
			n := s.placed
			s.mu.Unlock()
			blocked := s.heldBy(chain)
			if !blocked && (best == nil || n < bestN) {
				best, bestN = s, n
			}
		}
		if best != nil {
			break
		}
	}
	if best == nil {
		best = p.newSlot(true)
		p.slots = append(p.slots, best)
	}
	best.mu.Lock()
	best.placed++
	best.mu.Unlock()
	return best
}

// hold records whose event holds the token, just taken.
func (s *slot) hold(a *ownership.Actor) {
	s.holder.Store(a)
	if step := s.p.m.r.step.Load(); s.lastUse.Load() != step {
		s.lastUse.Store(step)
	}
}

// heldBy reports whether an actor of chain holds the token.
func (s *slot) heldBy(chain []ownership.Actor) bool {
	h := s.holder.Load()
	return h != nil && slices.Contains(chain, *h)
}

// addPending queues the leave of ref for the guest. s.mu must be
// held.
func (s *slot) addPending(ref *actorRef) {
	s.pending = append(s.pending, ref)
	s.npend.Store(int32(len(s.pending)))
}

// unlock gives the token back, then tells the guest of the actors
// that left meanwhile, unless another goroutine took the token first (it
// does so then). A leave queued while the token was held is seen either
// here, after the token is back, or by its Close, which takes the token.
func (s *slot) unlock() {
	for {
		s.holder.Store(nil)
		<-s.sem
		if s.npend.Load() == 0 {
			return
		}
		select {
		case s.sem <- struct{}{}:
			s.flush()
		default:
			return
		}
	}
}

// tryFlush tells the guest of the actors that left, if no event holds its
// token; else its holder does as it lets go.
func (s *slot) tryFlush() {
	select {
	case s.sem <- struct{}{}:
		s.flush()
		s.unlock()
	default:
	}
}

// flush calls wasmkeep_on_leave for each actor that left, each call
// within the event timeout. The token must be held. A failure discards
// the guest, and with it what it held of every actor.
func (s *slot) flush() {
	s.mu.Lock()
	left := s.pending
	s.pending = nil
	s.npend.Store(0)
	s.mu.Unlock()
	m := s.p.m
	if s.w == nil || !m.onLeave || s.p.closed.Load() || m.r.isClosed() {
		return
	}
	leave := s.w.export(&s.w.leave, exportOnLeave)
	ctx := context.Background()
	for _, ref := range left {
		ev := &event{actor: ref, leave: true}
		cctx := m.r.bound(ctx, ev)
		code, err := s.w.call(leave, ev)
		if err == nil && code != wire.OK {
			err = fmt.Errorf("returned code %d", code)
		}
		if err != nil {
			_ = s.fail(ctx, cctx, ref, "leave", err)
		}
		m.r.unbound(ev)
		if err != nil {
			return
		}
	}
}

// fail discards the guest after its error in an event of the actor ref,
// counts it with the actors whose objects it drops, and says why. The token
// must be held. ctx is the caller's context, cctx the one bounded by the
// event timeout.
func (s *slot) fail(ctx, cctx context.Context, ref *actorRef, what string, err error) error {
	var out string
	if s.w != nil {
		out = s.w.out.take()
		err = s.p.m.atMemoryLimit(s.w, err, out)
	}
	dropped := s.discard(context.WithoutCancel(ctx))
	s.p.m.failed(dropped)
	ref.logger().Warn("shared guest discarded", append(failAttrs(what, err, out), slog.Int("actors_dropped", dropped))...)
	return eventError(ctx, cctx, what, err)
}

// discard closes the guest, if any, and starts a new generation: the actors
// placed here meet the next guest as new. It returns how many were placed.
// The token must be held.
func (s *slot) discard(ctx context.Context) int {
	if s.w != nil {
		s.w.close(ctx)
		s.w = nil
		s.p.m.r.metrics.shared.WithLabelValues(s.p.m.class).Dec()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.pending = nil
	s.npend.Store(0)
	return s.placed
}

// counts returns how many shared guests are started and how many
// actors are placed.
func (p *classPool) counts() (started, placed int) {
	p.mu.Lock()
	slots := slices.Clone(p.slots)
	p.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		placed += s.placed
		s.mu.Unlock()
		select {
		case s.sem <- struct{}{}:
			if s.w != nil {
				started++
			}
			s.unlock()
		default:
			started++ // held: an event runs there
		}
	}
	return started, placed
}

// trim closes the shared guests on which no actor has been placed for idle
// whole steps of the trim clock (since before step-idle), their memory
// unmapped rather than kept, so that an idle class costs nothing; the next
// event placed there starts a fresh one.
func (p *classPool) trim(step, idle uint64) {
	p.mu.Lock()
	slots := slices.Clone(p.slots)
	p.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		unused := s.placed == 0 && s.lastUse.Load()+idle < step
		s.mu.Unlock()
		if !unused {
			continue
		}
		select {
		case s.sem <- struct{}{}:
		default:
			continue
		}
		s.mu.Lock()
		unused = s.placed == 0 // an actor may have been placed meanwhile
		s.mu.Unlock()
		if unused && s.w != nil {
			dropOnFree(s.w.mem)
			s.discard(context.Background())
		}
		s.unlock()
	}
}

// close closes the shared guests, after the events that hold them; no event
// runs on them after it.
func (p *classPool) close(ctx context.Context) {
	p.closed.Store(true)
	p.mu.Lock()
	slots := slices.Clone(p.slots)
	p.mu.Unlock()
	for _, s := range slots {
		s.sem <- struct{}{}
		if s.w != nil {
			s.discard(ctx)
		}
		s.unlock()
	}
}
