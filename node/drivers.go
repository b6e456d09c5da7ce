package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
)

// The sweeper, drainer and mover are drivers: each owns the timer or the
// trigger of its pass, asks the keeper for the Core's decision (an input),
// carries out the effects the Core routes to it (closing sockets, the take
// call), and reports its progress (the tree's progress column). No protocol
// decision is made here: the Core decides what a pass reads, releases and
// closes. A driver's Receive never waits: socket closes and take calls run
// on goroutines of their own and come back as messages. What a driver
// counts lives in a state value shared by its incarnations, so a restart
// (after a panic) resumes where the last one stood.

// driverKeeper is what the drivers ask of the keeper (keeper.Keeper has it).
type driverKeeper interface {
	Sweep()
	Drain()
	Undrain()
	Move(a ownership.Actor, target ownership.NodeID)
	Moved(a ownership.Actor)
	RequestStatus(replyTo *actor.PID)
}

// roomCloser closes sockets (sockets.Owner has it). Its calls write close
// frames, so drivers make them on goroutines of their own.
type roomCloser interface {
	CloseActor(a ownership.Actor, code int, reason string) int
	CloseAll(code int, reason string) int
}

// closeMsg carries a CloseSockets effect to the driver it belongs to.
type closeMsg struct{ c ownership.CloseSockets }

func closeSockets(sockets roomCloser, c ownership.CloseSockets) {
	if sockets == nil {
		return
	}
	if c.All {
		go sockets.CloseAll(c.Code, c.Reason)
		return
	}
	go sockets.CloseActor(c.Actor, c.Code, c.Reason)
}

// ---- sweeper ----

// sweepState is what the sweeper's incarnations share.
type sweepState struct {
	mu     sync.Mutex
	passes int
	closed int
	last   time.Time
}

func (s *sweepState) progress() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.passes == 0 {
		return "no pass yet"
	}
	return fmt.Sprintf("%d passes, %d rooms closed, last %s ago", s.passes, s.closed, time.Since(s.last).Truncate(time.Second))
}

type sweepTick struct{}

// sweeper sends the keeper a Sweep every period and closes the sockets of
// the rooms the pass finds held elsewhere.
type sweeper struct {
	st      *sweepState
	k       driverKeeper
	sockets roomCloser
	period  time.Duration
	timer   *time.Timer
}

func (s *sweeper) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.arm(ctx)
	case *actor.Restarting, *actor.Stopping:
		if s.timer != nil {
			s.timer.Stop()
		}
	case sweepTick:
		s.st.mu.Lock()
		s.st.passes++
		s.st.last = time.Now()
		s.st.mu.Unlock()
		s.k.Sweep()
		s.arm(ctx)
	case *closeMsg:
		s.st.mu.Lock()
		s.st.closed++
		s.st.mu.Unlock()
		closeSockets(s.sockets, m.c)
	}
}

func (s *sweeper) arm(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.timer = time.AfterFunc(s.period, func() { root.Send(self, sweepTick{}) })
}

// ---- drainer ----

// drainState is what the drainer's incarnations share, and what Drain's
// callers wait on.
type drainState struct {
	mu      sync.Mutex
	state   string // serving, draining, drained
	why     string
	since   time.Time
	took    time.Duration // from since to drained
	stuck   bool          // draining with no live peer to take the actors
	status  ownership.Status
	waiters []chan struct{}
}

func (d *drainState) progress() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.state {
	case "draining":
		s := fmt.Sprintf("draining (%s) for %s: %d held, %d parked, %d pending", d.why,
			time.Since(d.since).Truncate(time.Second), d.status.Live, d.status.Parked, d.status.Pending+d.status.Unresolved)
		if d.stuck {
			s += "; stuck: no live peer, serving meanwhile"
		}
		return s
	case "drained":
		return fmt.Sprintf("drained (%s) in %s, %s ago", d.why, d.took.Round(time.Millisecond), time.Since(d.since.Add(d.took)).Truncate(time.Second))
	}
	return "serving"
}

// drained marks the drain done and wakes its waiters.
func (d *drainState) drained() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state == "drained" {
		return
	}
	d.state, d.took = "drained", time.Since(d.since)
	for _, w := range d.waiters {
		close(w)
	}
	d.waiters = nil
}

type (
	drainMsg   struct{ why string }
	undrainMsg struct{}
	// drainSeenMsg: the Core began or took back a drain (one asked for in
	// the bucket, say): the drainer follows it.
	drainSeenMsg  struct{ c ownership.DrainChanged }
	drainedMsg    struct{}
	drainWaitMsg  struct{ done chan struct{} }
	drainPollTick struct{}
)

// drainer starts the node's drain when asked (Node.Drain), follows it by
// asking the keeper's status every poll, says when it is stuck (no live
// peer), closes the sockets the drain closes, and wakes Drain's callers once
// the Core says it is drained.
type drainer struct {
	st      *drainState
	k       driverKeeper
	sockets roomCloser
	poll    time.Duration
	log     *slog.Logger
	timer   *time.Timer
}

func (d *drainer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// A restart resumes a drain under way: the status says.
		d.k.RequestStatus(ctx.Self())
	case *actor.Restarting, *actor.Stopping:
		if d.timer != nil {
			d.timer.Stop()
		}
	case *drainMsg:
		d.st.mu.Lock()
		start := d.st.state == "serving"
		if start {
			d.st.state, d.st.why, d.st.since = "draining", m.why, time.Now()
		}
		d.st.mu.Unlock()
		if start {
			d.log.Info("drain requested", slog.String("why", m.why))
			d.k.Drain()
			d.k.RequestStatus(ctx.Self())
		}
	case *undrainMsg:
		d.st.mu.Lock()
		was := d.st.state
		d.st.state, d.st.stuck = "serving", false
		d.st.mu.Unlock()
		if was != "serving" {
			d.log.Info("drain taken back")
		}
		d.k.Undrain()
	case *drainSeenMsg:
		d.st.mu.Lock()
		start := m.c.Draining && d.st.state == "serving"
		switch {
		case start:
			d.st.state, d.st.why, d.st.since = "draining", m.c.Why, time.Now()
		case !m.c.Draining:
			d.st.state, d.st.stuck = "serving", false
		}
		d.st.mu.Unlock()
		if start {
			d.k.RequestStatus(ctx.Self())
		}
	case *drainWaitMsg:
		d.st.mu.Lock()
		if d.st.state == "drained" {
			close(m.done)
		} else {
			d.st.waiters = append(d.st.waiters, m.done)
		}
		d.st.mu.Unlock()
	case *drainedMsg:
		d.st.drained()
	case *keeper.StatusAnswer:
		d.observe(ctx, m)
	case drainPollTick:
		d.k.RequestStatus(ctx.Self())
	case *closeMsg:
		closeSockets(d.sockets, m.c)
	}
}

// observe takes a status answer: progress, a drain found under way after a
// restart, a drain stuck for want of a live peer, a drain done.
func (d *drainer) observe(ctx actor.Context, m *keeper.StatusAnswer) {
	s := m.Status
	d.st.mu.Lock()
	d.st.status = s
	if s.Draining && d.st.state == "serving" {
		d.st.state, d.st.why, d.st.since = "draining", "resumed", time.Now()
	}
	if !s.Draining && !m.Ended && d.st.state != "serving" {
		d.st.state = "serving" // taken back (Undrain)
	}
	draining := d.st.state == "draining"
	d.st.stuck = draining && s.DrainStuck // the keeper logs it
	d.st.mu.Unlock()
	if !draining {
		return
	}
	if m.Ended || s.Drained {
		d.st.drained()
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	d.timer = time.AfterFunc(d.poll, func() { root.Send(self, drainPollTick{}) })
}

// ---- mover ----

// TakeFunc asks the node t names to take its actor (the last step of a
// move). It is called on a goroutine of its own.
type TakeFunc func(ctx context.Context, t ownership.Take) error

// ErrMoveRefused is matched by a move refused before it began.
var ErrMoveRefused = errors.New("move refused")

// moveState is what the mover's incarnations share.
type moveState struct {
	mu                   sync.Mutex
	asked, taken, failed int
	pending              map[ownership.Actor]*pendingMove
	// requests: the key of the bucket's move request a move under way
	// came from; handled: the request keys read or being acted on.
	requests map[ownership.Actor]string
	handled  map[string]bool
}

// pendingMove is a move under way: take is nil until its release landed.
// One whose release never lands (the record moved on: another node woke
// the actor) is forgotten after moveForget.
type pendingMove struct {
	take  *ownership.Take
	since time.Time
}

// moveForget is how long a move waits for its release before the mover
// stops counting it: past the Core's two-minute look (Config.MoveLook).
const moveForget = 3 * time.Minute

// pruneLocked forgets the moves whose release never landed.
func (s *moveState) pruneLocked(now time.Time) {
	for a, p := range s.pending {
		if p.take == nil && now.Sub(p.since) > moveForget {
			delete(s.pending, a)
			delete(s.requests, a) // its request stays handled: not asked again
			s.failed++
		}
	}
}

// released records that a move's release landed (the Core's Take): from
// now on a restart of the mover sends the take call again. It is called on
// the keeper's goroutine (a hook), before the take message is sent.
func (s *moveState) released(t ownership.Take) {
	s.mu.Lock()
	s.pending[t.Actor] = &pendingMove{take: &t, since: time.Now()}
	s.mu.Unlock()
}

func (s *moveState) progress() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(time.Now())
	return fmt.Sprintf("%d moves asked, %d taken, %d failed, %d under way", s.asked, s.taken, s.failed, len(s.pending))
}

type (
	// moveMsg asks for a move; reply gets nil once the keeper has the
	// move, or why it was refused.
	moveMsg struct {
		actor  ownership.Actor
		target ownership.NodeID
		reply  chan error // nil for a request from the bucket
		key    string     // the request's key, for one from the bucket
	}
	// moveRequestsMsg: the Core found move requests for this node.
	moveRequestsMsg struct{ keys []string }
	// requestReadMsg: a move request was read (or could not be).
	requestReadMsg struct {
		key string
		req cluster.MoveRequest
		err error
	}
	// takenHereMsg: this node took an actor a request asked it to.
	takenHereMsg struct {
		key string
		a   ownership.Actor
		err error
	}
	takeMsg struct {
		t       ownership.Take
		attempt int
	}
	takeDoneMsg struct {
		t       ownership.Take
		attempt int
		err     error
	}
)

// takeAttempts bounds the take calls of one move; takeTimeout bounds one.
const (
	takeAttempts = 5
	takeTimeout  = 10 * time.Second
)

// mover checks a move against the node's view of its peers, hands it to
// the keeper, and, once the Core says the release landed (Take), sends the
// target its take call, retrying with backoff.
type mover struct {
	st      *moveState
	k       driverKeeper
	sockets roomCloser
	take    TakeFunc
	log     *slog.Logger
	asks    []*moveMsg // waiting for a status answer
	// For the move requests in the bucket (cluster move): the bucket, this
	// node, and how it takes an actor itself (actorhost.Host.Take).
	bucket   ownership.Bucket
	self     ownership.NodeID
	takeHere func(ctx context.Context, a ownership.Actor) error
}

func (mv *mover) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *moveMsg:
		mv.asks = append(mv.asks, m)
		if len(mv.asks) == 1 {
			mv.k.RequestStatus(ctx.Self())
		}
	case *keeper.StatusAnswer:
		asks := mv.asks
		mv.asks = nil
		for _, a := range asks {
			err := mv.begin(m, a)
			if a.reply != nil {
				a.reply <- err
			}
			if a.key == "" {
				continue
			}
			if err != nil {
				mv.log.Warn("move request refused", slog.String("key", a.key), slog.String("err", err.Error()))
				mv.finishRequest(a.key)
				continue
			}
			mv.st.mu.Lock()
			mv.st.requests[a.actor] = a.key
			mv.st.mu.Unlock()
		}
	case *moveRequestsMsg:
		mv.readRequests(ctx, m.keys)
	case *requestReadMsg:
		mv.requestRead(ctx, m)
	case *takenHereMsg:
		if m.err != nil {
			mv.log.Warn("move request: could not take the actor here", slog.String("class", m.a.Class), slog.String("name", m.a.Name),
				slog.String("err", m.err.Error()))
		} else {
			mv.log.Info("took an actor a move request placed here", slog.String("class", m.a.Class), slog.String("name", m.a.Name))
		}
		mv.finishRequest(m.key)
	case *actor.Started:
		// A restart resumes the take calls of the moves whose release
		// landed: the one that failed may have been among them.
		mv.st.mu.Lock()
		var again []ownership.Take
		for _, p := range mv.st.pending {
			if p.take != nil {
				again = append(again, *p.take)
			}
		}
		mv.st.mu.Unlock()
		for _, t := range again {
			mv.call(ctx, t, 0)
		}
	case *takeMsg:
		mv.call(ctx, m.t, m.attempt)
	case *takeDoneMsg:
		mv.done(ctx, m)
	case *closeMsg:
		closeSockets(mv.sockets, m.c)
	case *actor.Restarting, *actor.Stopping:
		for _, a := range mv.asks {
			if a.reply != nil {
				a.reply <- fmt.Errorf("%w: the mover stopped", ErrMoveRefused)
			} else {
				mv.forgetRequest(a.key) // read again when listed again
			}
		}
		mv.asks = nil
	}
}

// begin refuses a move to a node that is not a live peer, and hands the
// rest to the keeper.
func (mv *mover) begin(st *keeper.StatusAnswer, m *moveMsg) error {
	if st.Ended {
		return fmt.Errorf("%w: this node is not serving", ErrMoveRefused)
	}
	if why := ownership.MoveRefusal(st.Status, m.target); why != "" {
		return fmt.Errorf("%w: %s", ErrMoveRefused, why)
	}
	mv.st.mu.Lock()
	mv.st.asked++
	mv.st.pruneLocked(time.Now())
	mv.st.pending[m.actor] = &pendingMove{since: time.Now()}
	mv.st.mu.Unlock()
	mv.log.Info("move", slog.String("class", m.actor.Class), slog.String("name", m.actor.Name), slog.String("to", string(m.target)))
	mv.k.Move(m.actor, m.target)
	return nil
}

func (mv *mover) call(ctx actor.Context, t ownership.Take, attempt int) {
	self, root, take := ctx.Self(), ctx.ActorSystem().Root, mv.take

	go func() {
		err := errors.New("no take call configured")
		if take != nil {
			cctx, cancel := context.WithTimeout(context.Background(), takeTimeout)
			err = take(cctx, t)
			cancel()
		}
		root.Send(self, &takeDoneMsg{t: t, attempt: attempt, err: err})
	}()
}

func (mv *mover) done(ctx actor.Context, m *takeDoneMsg) {
	a := m.t.Actor
	if m.err == nil {
		mv.st.mu.Lock()
		mv.st.taken++
		delete(mv.st.pending, a)
		key := mv.st.requests[a]
		delete(mv.st.requests, a)
		mv.st.mu.Unlock()
		mv.log.Info("moved", slog.String("class", a.Class), slog.String("name", a.Name), slog.String("to", string(m.t.Target)))
		mv.k.Moved(a) // the record names the target now: route by it
		mv.finishRequest(key)
		return
	}
	if m.attempt+1 < takeAttempts {
		delay := time.Duration(100<<m.attempt) * time.Millisecond
		self, root := ctx.Self(), ctx.ActorSystem().Root
		time.AfterFunc(delay, func() { root.Send(self, &takeMsg{t: m.t, attempt: m.attempt + 1}) })
		return
	}
	// The record is free: the actor's next event acquires it wherever it
	// lands. The move failed only to place it.
	mv.st.mu.Lock()
	mv.st.failed++
	delete(mv.st.pending, a)
	key := mv.st.requests[a]
	delete(mv.st.requests, a)
	mv.st.mu.Unlock()
	mv.finishRequest(key)
	mv.log.Warn("move: the target did not take the actor; its next event acquires it where it lands",
		slog.String("class", a.Class), slog.String("name", a.Name), slog.String("to", string(m.t.Target)),
		slog.Int("attempts", takeAttempts), slog.String("err", m.err.Error()))
}

// readRequests reads the move requests not yet handled, each on a
// goroutine of its own.
func (mv *mover) readRequests(ctx actor.Context, keys []string) {
	if mv.bucket == nil {
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	for _, key := range keys {
		mv.st.mu.Lock()
		seen := mv.st.handled[key]
		mv.st.handled[key] = true
		mv.st.mu.Unlock()
		if seen {
			continue
		}
		go func() {
			rctx, cancel := context.WithTimeout(context.Background(), takeTimeout)
			defer cancel()
			m := &requestReadMsg{key: key}
			obj, err := mv.bucket.Get(rctx, key)
			if err == nil {
				err = json.Unmarshal(obj.Body, &m.req)
			}
			m.err = err
			root.Send(self, m)
		}()
	}
}

// requestRead acts on a move request: this node takes the actor when it is
// the target (nobody held the actor), and moves it otherwise.
func (mv *mover) requestRead(ctx actor.Context, m *requestReadMsg) {
	if errors.Is(m.err, ownership.ErrNotFound) {
		mv.forgetRequest(m.key)
		return
	}
	if m.err != nil {
		mv.log.Warn("move request unreadable: deleted", slog.String("key", m.key), slog.String("err", m.err.Error()))
		mv.finishRequest(m.key)
		return
	}
	a := m.req.Actor()
	if m.req.Target == mv.self {
		self, root, take := ctx.Self(), ctx.ActorSystem().Root, mv.takeHere
		go func() {
			err := errors.New("no way to take an actor here")
			if take != nil {
				tctx, cancel := context.WithTimeout(context.Background(), takeTimeout)
				err = take(tctx, a)
				cancel()
			}
			root.Send(self, &takenHereMsg{key: m.key, a: a, err: err})
		}()
		return
	}
	mv.asks = append(mv.asks, &moveMsg{actor: a, target: m.req.Target, key: m.key})
	if len(mv.asks) == 1 {
		mv.k.RequestStatus(ctx.Self())
	}
}

// finishRequest deletes a move request that was acted on (or could not
// be), on a goroutine of its own.
func (mv *mover) finishRequest(key string) {
	if key == "" || mv.bucket == nil {
		return
	}
	go func() {
		dctx, cancel := context.WithTimeout(context.Background(), takeTimeout)
		defer cancel()
		if err := mv.bucket.Delete(dctx, key, ownership.Always()); err != nil {
			mv.log.Warn("move request not deleted; it is read again at the next listing", slog.String("key", key), slog.String("err", err.Error()))
			mv.forgetRequest(key)
		}
	}()
}

// forgetRequest lets a request be read again when it is listed again.
func (mv *mover) forgetRequest(key string) {
	mv.st.mu.Lock()
	delete(mv.st.handled, key)
	mv.st.mu.Unlock()
}
