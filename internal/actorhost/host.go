package actorhost

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/internal/gopool"
	"github.com/wasmkeep/wasmkeep/internal/kvrun"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// Keeper is what Host needs of the ownership keeper (keeper.Keeper has it).
type Keeper interface {
	// Acquire gives an event its hold, and waits for the decision
	// (Dispatch and Take call it; Deliver takes a hold granted already).
	Acquire(ctx context.Context, a ownership.Actor) (keeper.Decision, error)
	// MayAct says whether output of the hold at gen may be released now,
	// waiting for the keeper if it must. Only an event's call, inside the
	// class's code, and an actor that stops call it.
	MayAct(a ownership.Actor, gen ownership.Generation) bool
	// MayActNow is MayAct when it needs no wait (known); otherwise the
	// resident actor asks RequestMayAct and goes on with its mailbox.
	MayActNow(a ownership.Actor, gen ownership.Generation) (may, known bool)
	// RequestMayAct asks MayAct by message: replyTo receives a
	// *keeper.MayActAnswer carrying tag. It must not block.
	RequestMayAct(a ownership.Actor, gen ownership.Generation, replyTo *actor.PID, tag uint64)
	// Idle says the actor dropped out of memory while its hold was live.
	Idle(a ownership.Actor, gen ownership.Generation)
	// HoldEnded says the hold at gen cannot serve any more (its state was
	// sealed by a later hold). It must not block.
	HoldEnded(a ownership.Actor, gen ownership.Generation, reason string)
	// DamageFound says a read of the state object at key found it damaged
	// (ownership.ErrDamaged; err says how): the keeper counts it and logs
	// it, once per key however many events meet it. It must not block.
	DamageFound(key string, err error)
}

// Config is what a Host runs with. Keeper, Bucket, Registry and System are
// required; the rest have defaults.
type Config struct {
	Keeper   Keeper
	Bucket   ownership.Bucket
	Registry *actors.Registry
	System   *actor.ActorSystem
	// Logger: nil logs nothing.
	Logger *slog.Logger
	// IdleTimeout is how long an actor stays resident without events.
	// Zero: 10 s.
	IdleTimeout time.Duration
	// MaxResident bounds the resident actors; past it the least recently
	// used idle one hibernates. Zero: 10,000.
	MaxResident int
	// MaxState bounds one actor's state, keys plus values, in bytes.
	// Zero: DefaultMaxState.
	MaxState int
	// BlockCache bounds the node's cache of the blocks and indexes of
	// actors' runs, in bytes, across every actor. Zero: DefaultBlockCache.
	BlockCache int64
	// Merges bounds the merges of actors' runs under way at once, across
	// every actor. Zero: DefaultMerges.
	Merges int
	// RunPart is about the largest run object a merge writes: it cuts its
	// output into parts of this many bytes of keys and values. Zero:
	// actorstore.DefaultRunPart.
	RunPart int
	// IOTimeout bounds one bucket call of an event. Zero: 10 s.
	IOTimeout time.Duration
	// ErrorsInAnswers: a failed event's 500 carries its error, besides the
	// id of its log line (a node for development; an error may tell what
	// a client must not read).
	ErrorsInAnswers bool
	// RetryAfter is what a refused event suggests. Zero: 1 s.
	RetryAfter time.Duration
	// OnHibernate, when set, is called on the director's goroutine each
	// time an actor leaves memory, with why ("idle", "evicted",
	// "stop acting", "stopped by supervisor", "node stopping",
	// "node exited"). It must not block.
	OnHibernate func(a ownership.Actor, gen ownership.Generation, reason string)
	// Sockets, when set, is the node's socket owner: events reach the
	// actor's sockets through SocketsOf. Nil: the node serves no sockets.
	Sockets *sockets.Owner
	// Caller, when set, routes the calls actors make with Call. Nil: every
	// call fails.
	Caller Caller
	// Secrets, when set, are the application's secrets as this node opened
	// them (actors.Secret). Nil: none.
	Secrets interface {
		Secret(name string) ([]byte, bool)
	}
	// Fetcher, when set, sends the outbound HTTP requests actors make with
	// actors.Fetch (package egress). Nil: every fetch is refused.
	Fetcher Fetcher
	// Classes, when set, finds the nodes that serve the classes this node
	// does not: an event of such a class goes to one of them (Elsewhere),
	// and a draining node hands an actor only to a peer that serves its
	// class. Nil: an event of a class not in Registry is ErrUnknownClass.
	Classes ClassDirectory
	// AlarmRetry is the wait before the first retry of an alarm whose
	// event failed; each retry after waits twice the one before. Zero:
	// FirstAlarmRetry.
	AlarmRetry time.Duration
	// CallTimeout bounds one call an actor makes. Zero: DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxKeys bounds the event keys one actor remembers (keys.go). Zero:
	// DefaultMaxKeys.
	MaxKeys int
	// Parent, when set, spawns the director as a child of a supervisor
	// (the node's tree), which restarts it when it fails. Nil: it is
	// spawned at the system's root.
	Parent Parent
	// Rooms, when set, spawns the rooms' actor, the supervisor of the room
	// actors that send the actors' socket output (rooms.go), as a child of
	// a supervisor (the node's tree), which never restarts it: it contains
	// its failures itself. Nil: it is spawned at the system's root.
	Rooms Parent
	// Supervision, when set, gives the options the resident actors of a
	// class are spawned with and the strategy the director supervises them
	// with (package supervisors has one). Nil: proto.actor's defaults.
	Supervision Supervision
}

// ClassDirectory knows which classes the cluster's live nodes serve (the
// node's is package node's, from what each node publishes at
// ownership.ClassesKey).
type ClassDirectory interface {
	// Serving picks the live peer an event of a goes to, among those that
	// serve a.Class: the same one for the same actor while they stay the
	// same. Errors: ErrUnknownClass when no node of the cluster serves
	// the class, an *UnavailableError when the nodes that do are not live
	// now.
	Serving(ctx context.Context, a ownership.Actor) (Elsewhere, error)
	// Serves says whether node serves class, as far as the directory
	// knows (true when it cannot tell).
	Serves(ctx context.Context, node ownership.NodeID, class string) bool
}

// Supervision is how the director spawns and supervises the resident
// actors of a class.
type Supervision interface {
	// Props gives the options resident actors of class are spawned with.
	Props(class string) []actor.PropsOption
	// Strategy decides what becomes of a resident actor of class when a
	// panic escapes its Receive: restarted, it keeps no resident state;
	// stopped, the director drops the actor.
	Strategy(class string) actor.SupervisorStrategy
	// EventFailed counts an event of class whose handler failed (an
	// error or a panic it recovered): no supervisor sees those.
	EventFailed(class string)
}

// Parent spawns the director or the rooms' actor under a supervisor.
type Parent interface {
	// ChildPID is the PID a child spawned under name gets.
	ChildPID(name string) *actor.PID
	// SpawnChild spawns props under name and returns its PID.
	SpawnChild(props *actor.Props, name string) (*actor.PID, error)
}

// Validate reports bounds New cannot run with. The wiring (Keeper,
// Bucket, Registry, System) is New's to check.
func (c Config) Validate() error {
	var errs []error
	if c.IdleTimeout < 0 || c.MaxResident < 0 || c.MaxState < 0 || c.BlockCache < 0 || c.Merges < 0 || c.RunPart < 0 || c.IOTimeout < 0 || c.RetryAfter < 0 || c.CallTimeout < 0 || c.MaxKeys < 0 || c.AlarmRetry < 0 {
		errs = append(errs, errors.New("idle timeout, max resident, max state, block cache, merges, io timeout, retry after, call timeout, max keys and alarm retry must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("actors host config: %w", err)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 10 * time.Second
	}
	if c.MaxResident == 0 {
		c.MaxResident = 10000
	}
	if c.MaxState == 0 {
		c.MaxState = DefaultMaxState
	}
	if c.IOTimeout == 0 {
		c.IOTimeout = 10 * time.Second
	}
	if c.BlockCache == 0 {
		c.BlockCache = DefaultBlockCache
	}
	if c.Merges == 0 {
		c.Merges = DefaultMerges
	}
	if c.RunPart == 0 {
		c.RunPart = actorstore.DefaultRunPart
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = time.Second
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.MaxKeys == 0 {
		c.MaxKeys = DefaultMaxKeys
	}
}

// DefaultCallTimeout bounds an actor's call unless Config says otherwise.
const DefaultCallTimeout = 30 * time.Second

// UnavailableError refuses an event: it took no effect anywhere (none of
// its writes landed, or will, and it sent nothing out), so a retry, here
// or on another node, is always safe. Answer 503 with Retry-After.
type UnavailableError struct {
	Actor      ownership.Actor
	Reason     string
	RetryAfter time.Duration
	// NotRun: besides, the event may be delivered again at once under a
	// new grant: it did not start (the hold it was granted ended before it
	// ran), or it only read, under a hold that ended before its answer.
	NotRun bool
	// Draining: this node takes no actors now (it drains or has stopped):
	// a peer should be asked, Peer when the keeper named one.
	Draining bool
	Peer     *Elsewhere
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("actor %s/%s unavailable: %s", e.Actor.Class, e.Actor.Name, e.Reason)
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == actors.ErrUnavailable }

// OutcomeHeader says what an answer that is not the event's own means:
// "unknown" on a 504 whose event may have taken effect though the node
// cannot tell (a commit without an answer, a forward whose connection broke
// after the request was sent); "running" on a 409 for a request whose
// Idempotency-Key names an event that still runs. A 503 never means that
// its event took effect: a refusal is an event that took no effect
// anywhere, always safe to retry.
const OutcomeHeader = "Wasmkeep-Outcome"

// OutcomeUnknownError says an event may have taken effect, and this node
// cannot tell: its commit had no answer (it may still land), or part of it
// took effect (a call it sent) and its end did not commit, or the node it
// was sent to stopped answering after it had it. It is never a refusal:
// only a retry the actor can recognise (the same Idempotency-Key) is safe.
// Answer 504 with OutcomeHeader.
type OutcomeUnknownError struct {
	Actor  ownership.Actor
	Reason string
	// Ran: the event is known to have taken effect (a node's key found
	// it), and its answer was not kept: a retry with the same key gets
	// this answer again, never the first.
	Ran bool
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("actor %s/%s: event outcome unknown: %s", e.Actor.Class, e.Actor.Name, e.Reason)
}

// Is makes errors.Is(err, ErrOutcomeUnknown) true.
func (e *OutcomeUnknownError) Is(target error) bool { return target == actors.ErrOutcomeUnknown }

// DamagedError says an event did not run because the actor's state
// object, or a run it lists, is damaged in the bucket (see
// actorstore.DamagedError).
type DamagedError = actorstore.DamagedError

// Host keeps this node's resident actors. Its director, a proto.actor actor,
// owns the resident set: every method sends it a message.
type Host struct {
	// Entry is the way of events to the actors (dispatch.go); its director
	// is the one Host spawned.
	*Entry
	// sockets is the node's socket owner (nil: none).
	sockets *sockets.Owner
	blocks  *kvrun.Cache // of every resident actor's runs
	reads   actorstore.IOCounts
	alarms  alarmCounts
	// merges holds a token for each merge of runs under way (compact.go).
	merges chan struct{}
	// switches counts SwitchNow's calls; switchedAt holds, per class
	// name, the count at the class's last one.
	switches   atomic.Uint64
	switchedAt sync.Map
	// goroutines run the mailboxes of the director and the resident
	// actors (mailboxes) and their commits, and are reused: a resident
	// actor's mailbox empties after nearly every event, and a goroutine
	// started for each run of it, or for each commit, grew its stack anew
	// every time, a third of a lone caller's warm event
	// (bench/RESULTS.md).
	goroutines *gopool.Pool
	// rooms is the rooms' actor, the room actors' supervisor (rooms.go);
	// roomActors, how many room actors it has.
	rooms      *actor.PID
	roomActors atomic.Int64
	// roomHold, set only by tests, is called by a room actor before it
	// sends the output of the events it was handed.
	roomHold func()
}

// mailboxRuns is the proto.actor dispatcher of the director and the
// resident actors: each run of a mailbox (the messages it holds, one after
// the other, until it is empty) goes to a reused goroutine.
type mailboxRuns struct{ pool *gopool.Pool }

// mailboxes is the dispatcher of the director's, the resident actors' and
// the room actors' mailboxes.
func (h *Host) mailboxes() actor.PropsOption { return actor.WithDispatcher(mailboxRuns{h.goroutines}) }

func (d mailboxRuns) Schedule(fn func()) { d.pool.Go(fn) }

// Throughput is how many messages a run takes before it yields the
// processor: proto.actor's default.
func (mailboxRuns) Throughput() int { return 300 }

// At most maxIdleGoroutines of Host.goroutines wait for work, each for
// goroutineIdle.
const (
	maxIdleGoroutines = 64
	goroutineIdle     = 10 * time.Second
)

// SwitchNow makes the resident actors of class switch to the class the
// registry has for it now (a deploy's new version) at their next event,
// rather than at their next hibernation: each closes what its class made
// for it (its Resident) after the event before, and takes the new class.
func (h *Host) SwitchNow(class string) {
	h.switchedAt.Store(class, h.switches.Add(1))
}

// switchDue says whether a resident actor of class that last looked at
// switch count seen must take the registry's class now.
func (h *Host) switchDue(class string, seen uint64) bool {
	v, ok := h.switchedAt.Load(class)
	return ok && v.(uint64) > seen
}

// StorageStats is what the resident actors' storage read from the bucket,
// and their block cache, since the host started.
type StorageStats struct {
	// HeadReads counts reads of state objects (an actor's load, when no
	// seal's copy came with its grant); RunReads the ranged reads of run
	// objects (an index with its filter, or a block), RunBytes their bytes;
	// ManifestReads the reads of run manifests (an actor's load, one for
	// each run of more than one part).
	HeadReads, ManifestReads, RunReads, RunBytes int64
	// HeadWrites and HeadBytes count the state objects written (commits,
	// seals), RunWrites and RunWriteBytes the run objects (flushes,
	// merges' parts, manifests).
	HeadWrites, HeadBytes, RunWrites, RunWriteBytes int64
	// Stalls counts the times an actor's commit waited for the merge of
	// its runs: its runs had outrun the merges (see MaxRuns).
	Stalls int64
	Cache  kvrun.CacheStats
}

// runs is what the resident actors read their runs with.
func (h *Host) runs() actorstore.RunOpener {
	return actorstore.NewRunOpener(h.cfg.Bucket, h.blocks, h.cfg.IOTimeout, h.cfg.RunPart, &h.reads)
}

// StorageStats reports the storage's reads and cache. It is safe to call
// from any goroutine.
func (h *Host) StorageStats() StorageStats {
	r := &h.reads
	return StorageStats{
		HeadReads: r.Heads.Load(), ManifestReads: r.Manifests.Load(), RunReads: r.Runs.Load(), RunBytes: r.RunBytes.Load(),
		HeadWrites: r.HeadWrites.Load(), HeadBytes: r.HeadBytes.Load(), RunWrites: r.RunWrites.Load(), RunWriteBytes: r.RunWriteBytes.Load(),
		Stalls: r.Stalls.Load(), Cache: h.blocks.Stats(),
	}
}

// DefaultMaxState bounds an actor's whole state (keys plus values) unless
// Config says otherwise.
const DefaultMaxState = 1 << 30

// DefaultBlockCache is the node's cache of run blocks unless Config says
// otherwise.
const DefaultBlockCache = 64 << 20

// DefaultMerges is how many merges of runs a node runs at once unless
// Config says otherwise.
const DefaultMerges = 2

// Entry is the way of events to a Host's actors: Dispatch and its kin
// acquire an actor's hold from the keeper and send the event to the
// director, which NewEntry names before it exists. It needs no socket owner,
// so a node makes its socket events' entry with it first, then the socket
// owner, then the Host (Start): each part is made after what it uses. No
// event reaches the director before Start, since no entry of the node
// serves before then.
type Entry struct {
	cfg          Config
	log          *slog.Logger
	director     *actor.PID
	directorName string
}

// NewEntry validates cfg and names the director of the Host that Start
// makes from it. cfg.Sockets is not read: Start takes the socket owner.
func NewEntry(cfg Config) (*Entry, error) {
	if cfg.Keeper == nil || cfg.Bucket == nil || cfg.Registry == nil || cfg.System == nil {
		return nil, errors.New("actors host config: keeper, bucket, registry and actor system are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	e := &Entry{cfg: cfg, log: cfg.Logger.With(slog.String("component", "actors")),
		directorName: childName(cfg.System, cfg.Parent, "director")}
	e.director = childPID(cfg.System, cfg.Parent, e.directorName)
	return e, nil
}

// New makes a Host of cfg, with cfg.Sockets as its socket owner: NewEntry,
// then Start.
func New(cfg Config) (*Host, error) {
	e, err := NewEntry(cfg)
	if err != nil {
		return nil, err
	}
	return e.Start(cfg.Sockets)
}

// Start makes the Host of e, with owner as the node's socket owner (nil:
// the node serves no sockets): it spawns the director at the PID e named,
// and the rooms' actor. Call it once.
func (e *Entry) Start(owner *sockets.Owner) (*Host, error) {
	cfg := e.cfg
	h := &Host{Entry: e, sockets: owner, blocks: kvrun.NewCache(cfg.BlockCache),
		merges: make(chan struct{}, cfg.Merges), goroutines: gopool.New(maxIdleGoroutines, goroutineIdle)}
	// Each incarnation of the director starts empty: a restart (after a
	// panic in the director) has stopped every resident actor first, and
	// the one before answered their callers and told the keeper. A stop of
	// the node that was under way carries over.
	var last *director
	props := actor.PropsFromProducer(func() actor.Actor {
		d := &director{h: h, entries: map[ownership.Actor]*residentEntry{}, byPID: map[string]ownership.Actor{}, lru: list.New(), confirm: map[string]ended{}}
		if last != nil {
			d.closed, d.waiters = last.closed, last.waiters
		}
		last = d
		return d
	}, h.mailboxes())
	if err := spawnNamed(cfg.System, cfg.Parent, props, e.directorName); err != nil {
		return nil, err
	}
	rooms := actor.PropsFromProducer(func() actor.Actor {
		return &roomsActor{h: h, actors: map[ownership.Actor]*roomEntry{}, pids: map[string]ownership.Actor{}}
	}, h.mailboxes(), actor.WithSupervisor(actor.NewRestartingStrategy()))
	name := childName(cfg.System, cfg.Rooms, "rooms")
	h.rooms = childPID(cfg.System, cfg.Rooms, name)
	if err := spawnNamed(cfg.System, cfg.Rooms, rooms, name); err != nil {
		return nil, err
	}
	return h, nil
}

// childName is the name of the Host's child actor kind ("director",
// "rooms"): as a child of parent, that; at the system's root, that and a
// number no other actor of the system has.
func childName(system *actor.ActorSystem, parent Parent, kind string) string {
	if parent == nil {
		return kind + system.ProcessRegistry.NextId()
	}
	return kind
}

// childPID is the PID the actor spawnNamed spawns under name gets.
func childPID(system *actor.ActorSystem, parent Parent, name string) *actor.PID {
	if parent == nil {
		return system.NewLocalPID(name)
	}
	return parent.ChildPID(name)
}

// spawnNamed spawns props under name: as parent's child, or at the
// system's root without a parent.
func spawnNamed(system *actor.ActorSystem, parent Parent, props *actor.Props, name string) error {
	var err error
	if parent == nil {
		_, err = system.Root.SpawnNamed(props, name)
	} else {
		_, err = parent.SpawnChild(props, name)
	}
	if err != nil {
		return fmt.Errorf("actors host: %w", err)
	}
	return nil
}

// ResidentByClass counts the resident actors of each class; nil when the
// director does not answer within a second (it is stopped or restarting).
func (h *Host) ResidentByClass() map[string]int {
	ch := make(chan map[string]int, 1)
	h.cfg.System.Root.Send(h.director, &countMsg{byClass: ch})
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case m := <-ch:
		return m
	case <-t.C:
		return nil
	}
}

// Deliver runs req as one event of actor a under the hold at gen, and
// returns the response once its writes are durable and the hold may act.
// Errors: ErrUnknownClass, an *UnavailableError, or ctx's error (the event
// may still run).
func (e *Entry) Deliver(ctx context.Context, a ownership.Actor, gen ownership.Generation, req *actors.Request) (*actors.Response, error) {
	r := e.run(ctx, &eventMsg{ctx: ctx, actor: a, gen: gen, req: req})
	return r.resp, r.err
}

// DeliverSocket runs ev as one event of actor a under the hold at gen, like
// Deliver, and returns once its output is released. woke reports that the
// actor was not resident: the event woke it.
func (e *Entry) DeliverSocket(ctx context.Context, a ownership.Actor, gen ownership.Generation, ev *actors.SocketEvent) (woke bool, err error) {
	r := e.run(ctx, &eventMsg{ctx: ctx, actor: a, gen: gen, sock: ev})
	return r.woke, r.err
}

// run sends m to the director and waits for its result, or ctx's end.
func (e *Entry) run(ctx context.Context, m *eventMsg) result {
	class, ok := e.cfg.Registry.Lookup(m.actor.Class)
	if !ok {
		return result{err: fmt.Errorf("%w: %q", actors.ErrUnknownClass, m.actor.Class)}
	}
	m.class, m.reply = class, make(chan result, 1)
	if k, ok := EventKeyOf(ctx); ok && m.req != nil {
		m.key = &keyedEvent{EventKey: k, sum: fingerprint(m.req)}
	}
	e.cfg.System.Root.Send(e.director, m)
	select {
	case r := <-m.reply:
		return r
	case <-ctx.Done():
		return result{err: ctx.Err()}
	}
}

// StopActing drops resident actor a at once if its hold is at gen or
// older: events still queued for it fail without touching the bucket, and
// once it has terminated (its last commit answered) the keeper is told
// Idle at gen, which is when it may release the hold (at once when no such
// hold is resident here). It never blocks: call it from
// keeper.Hooks.StopActing.
func (h *Host) StopActing(a ownership.Actor, gen ownership.Generation) {
	h.cfg.System.Root.Send(h.director, &stopActingMsg{actor: a, gen: gen})
}

// Adopt makes a resident under the hold at gen without running an event:
// a move's target took it, so that the events that follow find it here. It
// hibernates after the idle timeout like any resident. An unknown class
// is refused (the hold is the caller's to end). It never blocks.
func (e *Entry) Adopt(a ownership.Actor, gen ownership.Generation) error {
	class, ok := e.cfg.Registry.Lookup(a.Class)
	if !ok {
		return fmt.Errorf("%w: %q", actors.ErrUnknownClass, a.Class)
	}
	e.cfg.System.Root.Send(e.director, &adoptMsg{actor: a, class: class, gen: gen})
	return nil
}

// Abandoned ends a hold granted to an event nobody waits for any more,
// unless a's residency here serves that generation. It never
// blocks.
func (h *Host) Abandoned(a ownership.Actor, gen ownership.Generation) {
	h.cfg.System.Root.Send(h.director, &abandonedMsg{actor: a, gen: gen})
}

// DropAll drops every resident actor without Idle: the node has lost its
// holds. Later events are refused. It never blocks. The goroutines kept
// for reuse end once idle (what runs after, the actors' last steps, runs
// on goroutines of its own), as after HibernateAll.
func (h *Host) DropAll() {
	h.cfg.System.Root.Send(h.director, &closeMsg{idle: false})
	h.goroutines.Stop()
}

// HibernateAll hibernates every resident actor (Keeper.Idle for each),
// refuses later events, and returns once every resident actor has stopped
// or ctx ends. Every commit is durable already: nothing is lost.
func (h *Host) HibernateAll(ctx context.Context) error {
	done := make(chan struct{})
	h.cfg.System.Root.Send(h.director, &closeMsg{idle: true, done: done})
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("hibernate resident actors: %w", ctx.Err())
	}
	// Every resident actor has terminated: each room actor ends once it
	// has sent what its resident actor carried to it, and answered it.
	rooms := make(chan struct{})
	h.cfg.System.Root.Send(h.rooms, &roomsIdleMsg{done: rooms})
	select {
	case <-rooms:
		h.goroutines.Stop()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hibernate resident actors: their socket output: %w", ctx.Err())
	}
}

// AwaitMerges returns once no resident actor merges its runs (a merge
// under way ended, and none started meanwhile), or ctx ends. Tools and
// tests use it to see the storage as its merges leave it.
func (h *Host) AwaitMerges(ctx context.Context) error {
	done := make(chan struct{})
	h.cfg.System.Root.Send(h.director, &mergesMsg{done: done})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("await merges: %w", ctx.Err())
	}
}

// RoomActors returns how many room actors there are now (rooms.go): the
// residencies that have sent socket output, and those that ended with
// output still to send.
func (h *Host) RoomActors() int { return int(h.roomActors.Load()) }

// Resident returns how many actors are resident now.
func (h *Host) Resident() int {
	ch := make(chan int, 1)
	h.cfg.System.Root.Send(h.director, &countMsg{reply: ch})
	return <-ch
}

func (e *Entry) unavailable(a ownership.Actor, reason string) *UnavailableError {
	return &UnavailableError{Actor: a, Reason: reason, RetryAfter: e.cfg.RetryAfter}
}

// notRun refuses an event before it started (UnavailableError.NotRun).
func (e *Entry) notRun(a ownership.Actor, reason string) *UnavailableError {
	return &UnavailableError{Actor: a, Reason: reason, RetryAfter: e.cfg.RetryAfter, NotRun: true}
}

func unknownOutcome(a ownership.Actor, reason string) *OutcomeUnknownError {
	return &OutcomeUnknownError{Actor: a, Reason: reason}
}

// RanHeader, "1", marks a 504 whose event is known to have taken effect,
// its answer not kept (OutcomeUnknownError.Ran): a node that sent the
// event does not send it again.
const RanHeader = "Wasmkeep-Ran"
