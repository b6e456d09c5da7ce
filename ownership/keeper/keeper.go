package keeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Config is what a keeper runs with. Core and Bucket are required; the rest
// have defaults.
type Config struct {
	// Core configures the ownership protocol (see ownership.Config).
	Core ownership.Config
	// Bucket is the bucket the cluster shares. It must honour contexts: the
	// keeper answers a request only once its call has returned.
	Bucket ownership.Bucket
	// System is the actor system to spawn the keeper in. Nil: the keeper
	// makes its own with NewSystem(Logger).
	System *actor.ActorSystem
	// Clock gives the node's time. It must be safe for concurrent use (the
	// bucket goroutines time their calls with it) and should advance with
	// the runtime's timers, which pace the Core's ticks. Nil: time.Now.
	Clock func() time.Time
	// Logger receives the Core's reports and the keeper's own lines. Nil:
	// nothing is logged.
	Logger *slog.Logger
	// Registerer is where the keeper's metrics are registered. Nil: they
	// are kept but not exported.
	Registerer prometheus.Registerer
	// Parent, when set, spawns the keeper's actor as its child (a
	// supervisor of the node's tree). Nil: it is spawned at the system's
	// root.
	Parent Parent
}

// Parent spawns the keeper's actor under a supervisor.
type Parent interface {
	// ChildPID is the PID a child spawned under name gets.
	ChildPID(name string) *actor.PID
	// SpawnChild spawns props under name and returns its PID.
	SpawnChild(props *actor.Props, name string) (*actor.PID, error)
}

// Validate reports a configuration Start cannot run with.
func (c Config) Validate() error {
	var errs []error
	if err := c.Core.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("core: %w", err))
	}
	if c.Bucket == nil {
		errs = append(errs, errors.New("no bucket"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ownership keeper config: %w", err)
	}
	return nil
}

// ErrInvalidActor is returned for an actor whose record key cannot exist
// (ownership.ErrInvalidActor).
var ErrInvalidActor = ownership.ErrInvalidActor

// Keeper is a running ownership actor. Its methods are safe for concurrent
// use.
type Keeper struct {
	node     ownership.NodeID
	system   *actor.ActorSystem
	pid      *actor.PID
	retry    time.Duration // RetryAfter of the refusals the keeper gives itself
	stops    atomic.Int32
	requests sync.WaitGroup // bucket calls in flight
	clock    func() time.Time
	// fast answers Acquire and MayAct for live holds without the mailbox
	// (fast.go).
	fast *fastHolds

	// gate admits messages to the actor until the keeper has ended. A
	// message admitted is handled before the actor stops (it is poisoned,
	// which drains the mailbox, only once the gate is shut), so that every
	// request sent through the gate gets its answer; after that, the
	// methods answer by themselves from final and err.
	gate   sync.RWMutex
	closed bool
	final  ownership.Status
	reason string // why the keeper ended, for refusals after the end
	err    error

	taken   chan struct{} // closed when the Core has taken its lease
	stopped chan struct{} // closed when the actor has stopped
	done    chan struct{} // closed when everything has ended
}

// Start is New then Begin: it validates cfg, spawns the keeper, gives it
// hooks (nil: NopHooks) and returns once the Core has taken the node's lease (it may still have to
// wait before acting: after a take-over, a full TTL). If the Core ends
// first (a twin is live, the lease record cannot be read), Start returns
// its error. If ctx ends first, Start stops the keeper, waits for it to
// end and returns ctx's error.
func Start(ctx context.Context, cfg Config, hooks Hooks) (*Keeper, error) {
	k, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := k.Begin(ctx, hooks); err != nil {
		return nil, err
	}
	return k, nil
}

// beginMsg starts the Core of a keeper that New spawned, with the hooks
// its effects go to.
type beginMsg struct{ hooks Hooks }

// New validates cfg and spawns the keeper without starting its Core:
// until Begin it reads and writes nothing and has no hooks, so that the
// parts of a node that use the keeper (and that its hooks reach) can be
// made after it, and the hooks made of them, whole, for Begin.
// Stop ends a keeper that has not begun at once.
func New(cfg Config) (*Keeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	core, err := ownership.NewCore(cfg.Core)
	if err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	log := cfg.Logger.With(slog.String("node", string(cfg.Core.Node)))
	m, err := newMetrics(cfg.Registerer, log)
	if err != nil {
		return nil, err
	}
	k := &Keeper{
		node:    cfg.Core.Node,
		system:  cfg.System,
		retry:   cfg.Core.LeasePeriod,
		clock:   cfg.Clock,
		fast:    newFastHolds(),
		taken:   make(chan struct{}),
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
	}
	if k.system == nil {
		k.system = NewSystem(cfg.Logger)
	}
	s := newShell(k, core, cfg, log, m)
	// The producer hands out the one shell: setup is done, so a producer
	// run for a spawn that fails does nothing.
	props := actor.PropsFromProducer(func() actor.Actor { return s })
	name := "ownership-" + ownership.EscapeSegment(string(cfg.Core.Node))
	// The actor starts before SpawnNamed returns and starts bucket calls
	// whose replies come back through post: the PID must be known first.
	// Spawning by name gives exactly this PID.
	spawn := k.system.Root.SpawnNamed
	k.pid = k.system.NewLocalPID(name)
	if cfg.Parent != nil {
		spawn = cfg.Parent.SpawnChild
		k.pid = cfg.Parent.ChildPID(name)
	}
	if _, err := spawn(props, name); err != nil {
		return nil, fmt.Errorf("ownership keeper of node %s: spawn %q: %w", cfg.Core.Node, name, err)
	}
	return k, nil
}

// Begin starts the Core of a keeper New made, its effects going to hooks
// (nil: NopHooks), and returns once it has taken the node's lease, as
// Start does, with Start's errors. Call it once.
func (k *Keeper) Begin(ctx context.Context, hooks Hooks) error {
	if hooks == nil {
		hooks = NopHooks{}
	}
	k.post(&beginMsg{hooks: hooks})
	select {
	case <-k.taken:
		return nil
	case <-k.done:
		if err := k.Err(); err != nil {
			return err
		}
		return fmt.Errorf("ownership keeper of node %s: stopped before taking its lease", k.node)
	case <-ctx.Done():
		// Before the lease is taken the Core ends at once on Stop.
		k.input(ownership.Stop{})
		<-k.done
		return fmt.Errorf("ownership keeper of node %s: start: %w", k.node, ctx.Err())
	}
}

// post hands msg to the actor unless the keeper has ended.
func (k *Keeper) post(msg any) bool {
	k.gate.RLock()
	defer k.gate.RUnlock()
	if k.closed {
		return false
	}
	// Invariant: Send never blocks (the mailbox is unbounded), so the
	// actor, which takes the gate's write lock to shut it, waits for
	// nothing but these few instructions.
	k.system.Root.Send(k.pid, msg)
	return true
}

// stoppedDecision is the refusal of an acquisition of a after the end. A
// stopped node takes no actors, so it says Draining, and names the peer to
// ask as its Core last saw them (ownership.PeerFor).
func (k *Keeper) stoppedDecision(a ownership.Actor) Decision {
	k.gate.RLock()
	defer k.gate.RUnlock()
	d := Decision{Verdict: Refused, Reason: "node stopped: " + k.reason, RetryAfter: k.retry, Draining: true}
	if p, ok := ownership.PeerFor(k.final.Peers, a); ok {
		d.Peer, d.PeerAddr, d.PeerInstance = p.Node, p.Addr, p.Instance
	}
	return d
}

func validActor(a ownership.Actor) error { return ownership.ValidateActor(a) }

// Acquire asks for a live hold on a, for one event, and waits for the
// Decision. The error is ErrInvalidActor, or ctx's error when ctx ended
// first; a grant that comes after that goes to Hooks.Abandoned. After the
// keeper has ended, every acquisition is refused.
func (k *Keeper) Acquire(ctx context.Context, a ownership.Actor) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err // asking would only make a grant nobody takes
	}
	if gen, ok := k.fast.lookup(a, k.clock()); ok {
		return Decision{Verdict: Granted, Gen: gen}, nil
	}
	if err := validActor(a); err != nil {
		return Decision{}, err
	}
	w := &waiter{actor: a, ch: make(chan Decision, 1)}
	if !k.post(&acquireMsg{w: w}) {
		return k.stoppedDecision(a), nil
	}
	select {
	case d := <-w.ch:
		return d, nil
	case <-ctx.Done():
		if w.abandon() {
			return Decision{}, ctx.Err()
		}
		return <-w.ch, nil // the answer won the race; it is in the channel
	case <-k.done:
		// Only an actor stopped from outside drops an admitted message.
		if w.abandon() {
			return k.stoppedDecision(a), nil
		}
		return <-w.ch, nil
	}
}

// RequestAcquire is Acquire for code running in an actor: it returns at
// once, and replyTo receives an *AcquireAnswer carrying tag. replyTo must
// outlive the request: a grant sent to a stopped actor is lost, and its
// hold stays live until Idle or HoldEnded ends it.
func (k *Keeper) RequestAcquire(a ownership.Actor, replyTo *actor.PID, tag uint64) error {
	if err := validActor(a); err != nil {
		return err
	}
	w := &waiter{actor: a, pid: replyTo, tag: tag}
	if !k.post(&acquireMsg{w: w}) {
		k.system.Root.Send(replyTo, &AcquireAnswer{Actor: a, Tag: tag, Decision: k.stoppedDecision(a)})
	}
	return nil
}

// MayAct says whether an event granted at gen may release its output now:
// the hold is live and the lease valid. Call it when a response or a
// storage commit is about to be released, not only when work starts.
func (k *Keeper) MayAct(a ownership.Actor, gen ownership.Generation) bool {
	if _, known := k.MayActNow(a, gen); known {
		return true
	}
	ch := make(chan bool, 1)
	if !k.post(&mayActMsg{actor: a, gen: gen, ch: ch}) {
		return false
	}
	select {
	case may := <-ch:
		return may
	case <-k.done:
		return false
	}
}

// MayActNow is MayAct's answer when it needs no wait: known is true only
// when the node's table of live holds says the hold at gen may act now
// (may is then true). Otherwise ask RequestMayAct.
func (k *Keeper) MayActNow(a ownership.Actor, gen ownership.Generation) (may, known bool) {
	if g, ok := k.fast.lookup(a, k.clock()); ok && g == gen {
		return true, true
	}
	return false, false
}

// RequestMayAct is MayAct for code running in an actor: replyTo receives a
// *MayActAnswer carrying tag.
func (k *Keeper) RequestMayAct(a ownership.Actor, gen ownership.Generation, replyTo *actor.PID, tag uint64) {
	if !k.post(&mayActMsg{actor: a, gen: gen, pid: replyTo, tag: tag}) {
		k.system.Root.Send(replyTo, &MayActAnswer{Actor: a, Gen: gen, Tag: tag})
	}
}

// Status returns the Core's summary now; after the end, the last one.
func (k *Keeper) Status() ownership.Status {
	ch := make(chan ownership.Status, 1)
	if k.post(&statusMsg{ch: ch}) {
		select {
		case s := <-ch:
			return s
		case <-k.done:
		}
	}
	k.gate.RLock()
	defer k.gate.RUnlock()
	return k.final
}

// RequestStatus is Status for code running in an actor: replyTo receives
// a *StatusAnswer.
func (k *Keeper) RequestStatus(replyTo *actor.PID) {
	if !k.post(&statusMsg{pid: replyTo}) {
		k.gate.RLock()
		final := k.final
		k.gate.RUnlock()
		k.system.Root.Send(replyTo, &StatusAnswer{Status: final, Ended: true})
	}
}

// input posts an input for the Core. As far as callers can tell, it takes
// effect when posted: the fast answers it could change are forgotten first
// (see fastHolds), so that an Acquire made after Idle, say, is answered
// after the Core has taken the Idle.
func (k *Keeper) input(in ownership.Input) bool {
	counted := k.fast.forget(in)
	if k.post(&inputMsg{in: in}) {
		return true
	}
	if counted {
		k.fast.taken(in)
	}
	return false
}

// Idle says a's instance dropped out of memory while its hold at gen was
// live: the Core parks the hold if sockets are open, and releases it
// otherwise.
func (k *Keeper) Idle(a ownership.Actor, gen ownership.Generation) {
	k.input(ownership.Idle{Actor: a, Gen: gen})
}

// HoldEnded says a's live hold at gen ended some other way (a failed
// restore, a supervisor giving up): the Core releases it.
func (k *Keeper) HoldEnded(a ownership.Actor, gen ownership.Generation, reason string) {
	k.input(ownership.HoldEnded{Actor: a, Gen: gen, Reason: reason})
}

// SocketOpened counts one more open socket of a on this node.
func (k *Keeper) SocketOpened(a ownership.Actor) {
	k.input(ownership.SocketOpened{Actor: a})
}

// SocketGone counts one socket of a fewer: call it once per socket, when it
// starts closing or its slot is freed, whichever comes first.
func (k *Keeper) SocketGone(a ownership.Actor) {
	k.input(ownership.SocketGone{Actor: a})
}

// Move moves a, held or parked here, to the target node.
func (k *Keeper) Move(a ownership.Actor, target ownership.NodeID) {
	k.input(ownership.Move{Actor: a, Target: target})
}

// Undrain takes a drain back (ownership.Undrain).
func (k *Keeper) Undrain() { k.input(ownership.Undrain{}) }

// Sweep runs one pass of the sweep (ownership.Sweep). The node's
// sweeper sends it every sweep period.
func (k *Keeper) Sweep() { k.input(ownership.Sweep{}) }

// PeerUnreachable says a connection to node could not be made
// (ownership.PeerUnreachable).
func (k *Keeper) PeerUnreachable(node ownership.NodeID) {
	k.input(ownership.PeerUnreachable{Node: node})
}

// RouteFailed says an event routed to node for a was refused there before
// it ran, or could not be sent (ownership.RouteFailed).
func (k *Keeper) RouteFailed(a ownership.Actor, node ownership.NodeID) {
	k.input(ownership.RouteFailed{Actor: a, Node: node})
}

// Moved says a move's target took a (ownership.Moved).
func (k *Keeper) Moved(a ownership.Actor) { k.input(ownership.Moved{Actor: a}) }

// Drain hands this node's actors over to its peers; Hooks.Drained says when
// nothing is left.
func (k *Keeper) Drain() { k.input(ownership.Drain{}) }

// SecretsLost says the app's secrets cannot be opened here: the node
// drains.
func (k *Keeper) SecretsLost() { k.input(ownership.SecretsLost{}) }

// DamageFound says a read outside the keeper (an actor loading its state)
// found the object at key damaged (ownership.ErrDamaged; err says how). It
// is counted in wasmkeep_bucket_damaged_total and logged at Error once per
// key, with the damage the keeper's own reads find. It never blocks.
func (k *Keeper) DamageFound(key string, err error) {
	k.input(ownership.DamageFound{Key: key, Err: err})
}

// Stop stops the keeper cleanly and waits for the end; it returns Err. The
// first call sends Stop: every hold and parked record is released, then the
// lease is written released. A second call, or the end of ctx, sends
// StopNow: the lease is written released without waiting for the releases
// still pending. When ctx ends, Stop returns its error at once; Done says
// when the keeper has ended.
func (k *Keeper) Stop(ctx context.Context) error {
	if k.stops.Add(1) == 1 {
		k.input(ownership.Stop{})
	} else {
		k.input(ownership.StopNow{})
	}
	select {
	case <-k.done:
		return k.Err()
	case <-ctx.Done():
		k.stops.Add(1)
		k.input(ownership.StopNow{})
		return fmt.Errorf("ownership keeper of node %s: stop: %w (StopNow sent; Done says when it ends)", k.node, ctx.Err())
	}
}

// Done is closed once the keeper has ended: the actor has stopped and every
// bucket call it made has returned.
func (k *Keeper) Done() <-chan struct{} { return k.done }

// Err is nil until Done is closed; then nil after a clean stop, or an
// *ExitError saying why the keeper ended.
func (k *Keeper) Err() error {
	select {
	case <-k.done:
		return k.err
	default:
		return nil
	}
}
