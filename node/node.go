package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/secrets"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/peer"
	"github.com/wasmkeep/wasmkeep/sockets"
	"github.com/wasmkeep/wasmkeep/supervisors"
)

// Config is what Start assembles a node from: what the node needs of its
// caller (the ownership settings, the bucket, the listener, the classes),
// then one configuration per part, each the part's own Config with only
// its bounds set: the wiring of each part (its keeper, bucket, registry,
// logger, registry of metrics, the parts it calls) is Start's to set, and
// Validate refuses it set. Core (with Node, Instance and the lease
// settings), Bucket and Listener are required.
type Config struct {
	// Core configures the ownership protocol. Core.Addr, when empty, is
	// set to the listener's address.
	Core     ownership.Config
	Bucket   ownership.Bucket
	Listener net.Listener
	// Registry holds the classes served. Nil: actors.BuiltIn().
	Registry *actors.Registry
	// Logger: nil logs nothing.
	Logger *slog.Logger
	// Metrics, when set, is the registry the node registers its metrics
	// in and serves at /metrics: one the caller registered more in before
	// (the wasm runtime's, made before the node). Nil: a new one.
	Metrics *prometheus.Registry

	// Actors bounds the resident actors: idle timeout, how many, the
	// state and block cache, calls, event keys (actorhost.Config), and may
	// name an OnHibernate. Zero: their defaults.
	Actors actorhost.Config
	// Supervision bounds the restarts of a resident actor (see
	// supervisors.Policy). Zero: its defaults.
	Supervision supervisors.Policy
	// Sockets bounds the node's WebSockets: how many, message and queue
	// sizes, pings, io_uring (sockets.Config). Zero: their defaults.
	Sockets sockets.Config
	// HTTP bounds the HTTP entry: bodies, connections, the failover
	// wait, the Idempotency-Key window, and holds the cluster key
	// (ingress.Config). Zero: their defaults.
	HTTP ingress.Config
	// Peers bounds the connections to each peer, and may carry them on a
	// Transport of the caller's (tests put faults in it) (peer.Config).
	// The cluster key and the largest body are the HTTP entry's.
	Peers peer.Config
	// Egress bounds the outbound HTTP requests of actors and names where
	// they may go (egress.Config). Zero: nothing is allowed.
	Egress egress.Config
	// AlarmPoll is how often the node lists the actors' due alarms (see
	// alarms.go). Zero: DefaultAlarmPoll.
	AlarmPoll time.Duration
	// Secrets, when set, is the application's secrets as this node opens
	// them (internal/secrets): classes and the front read them, and a node
	// that cannot open one drains (secrets.go). SecretsPoll is how often
	// they are read again; zero: DefaultSecretsPoll.
	Secrets     *secrets.Vault
	SecretsPoll time.Duration
	// Deploys, when set, compiles the classes deployed through the bucket
	// (wasmkeep deploy): the node serves their current versions
	// (deploys.go). DeployPoll is how often it looks; zero:
	// DefaultDeployPoll.
	Deploys    Compiler
	DeployPoll time.Duration

	// PublicAdmin serves the admin pages (/status, /debug/tree) on the
	// public listener too; otherwise only AdminHandler serves them.
	PublicAdmin bool

	// faults is set by tests only (export_test.go): see
	// supervisors.Tree.InjectFaults.
	faults func(supervisors.Role, any)
}

// Validate reports a configuration Start cannot run with, before it takes
// anything (the node's lease included): what is required and missing, a
// part's wiring set by the caller, and every part's bounds.
func (c Config) Validate() error {
	var errs []error
	if c.Bucket == nil || c.Listener == nil {
		errs = append(errs, errors.New("a bucket and a listener are required"))
	}
	errs = append(errs, c.Core.Validate(), c.Supervision.Validate())
	a, so, h, p := c.Actors, c.Sockets, c.HTTP, c.Peers
	if a.Keeper != nil || a.Bucket != nil || a.Registry != nil || a.System != nil || a.Logger != nil || a.Sockets != nil ||
		a.Caller != nil || a.Fetcher != nil || a.Parent != nil || a.Supervision != nil || a.RetryAfter != 0 {
		errs = append(errs, errors.New("actors: the wiring (keeper, bucket, registry, system, logger, sockets, caller, fetcher, parent, supervision, retry after) is the node's"))
	}
	if c.AlarmPoll < 0 {
		errs = append(errs, fmt.Errorf("alarm poll %v: must not be negative", c.AlarmPoll))
	}
	if c.Egress.Metrics != nil {
		errs = append(errs, errors.New("egress: the metrics registry is the node's"))
	}
	if so.Sink != nil || so.Logger != nil || so.Registerer != nil || so.Failed != nil || so.Dial != nil {
		errs = append(errs, errors.New("sockets: the wiring (sink, logger, registerer, failed, dial) is the node's"))
	}
	if h.Keeper != nil || h.Host != nil || h.Registry != nil || h.Gatherer != nil || h.Logger != nil || h.Sockets != nil ||
		h.Peers != nil || h.Registerer != nil || h.Status != nil || h.PeerStatus != nil || h.Debug != nil || h.Node != "" || h.Instance != "" {
		errs = append(errs, errors.New("http: the wiring (keeper, host, registry, gatherer, logger, sockets, peers, registerer, pages, node, instance) is the node's"))
	}
	if p.Node != "" || p.Keeper != nil || p.Logger != nil || p.ClusterKey != nil || p.MaxBody != 0 {
		errs = append(errs, errors.New("peers: the node, keeper, logger, cluster key and largest body are the node's (the cluster key and the body bound are HTTP's)"))
	}
	errs = append(errs, a.Validate(), so.Validate(), h.Validate(), p.Validate())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node config: %w", err)
	}
	return nil
}

// Node is one running node: its tree (ownership keeper, director of the
// resident actors, sweeper, drainer, mover), the socket owner and the HTTP
// server, sharing one actor system and one metrics registry.
type Node struct {
	tree *supervisors.Tree
	// residents counts the resident actors by class for the tree's lines.
	residents *supervisors.Metrics
	keeper    *keeper.Keeper
	host      *actorhost.Host
	sockets   *sockets.Owner
	server    *http.Server
	addr      string
	served    chan error // the server's end
	system    *actor.ActorSystem
	drainer   *actor.PID
	drain     *drainState
	mover     *actor.PID
	done      chan struct{} // the keeper ended, or the tree failed
	metrics   http.Handler  // the registry's /metrics
	ingress   *ingress.Handler
	classes   []string // the classes served, by name, for the status page
	// directory knows what the peers serve (classes.go).
	directory *classDirectory
	peers     *peer.Client
	alarms    *alarmPoller
	secrets   *secretsWatch
	deploys   *deployWatch
}

// Start starts the keeper (it returns once the node's lease is taken),
// the resident actors and the HTTP server on cfg.Listener. On error the
// listener is closed.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Listener != nil && cfg.Core.Addr == "" {
		cfg.Core.Addr = cfg.Listener.Addr().String()
	}
	if err := cfg.Validate(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	if cfg.Registry == nil {
		cfg.Registry = actors.BuiltIn()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	log := cfg.Logger.With(slog.String("node", string(cfg.Core.Node)))
	reg := cfg.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	system := keeper.NewSystem(cfg.Logger)
	tree, err := supervisors.NewTree(system, reg, log)
	if err != nil {
		cfg.Listener.Close()
		return nil, err
	}
	tree.InjectFaults(cfg.faults)
	var sup *supervisors.Supervisor
	sm, err := supervisors.NewMetrics(reg)
	if err == nil {
		sup, err = supervisors.New(sm, cfg.Supervision, log)
	}
	if err != nil {
		cfg.Listener.Close()
		tree.Stop()
		return nil, err
	}
	// The parts are made in the order they use each other: the keeper
	// (not begun: it reads, writes and has no hooks until Begin), the
	// socket owner, the resident actors that use it and the drivers; then
	// the keeper begins with hooks made of them and takes the lease. A
	// driver's pass asked before the lease is taken finds nothing to do
	// (the Core acts only once running) and the next one runs.
	k, err := keeper.New(keeper.Config{
		Core: cfg.Core, Bucket: cfg.Bucket, System: system, Logger: cfg.Logger, Registerer: reg,
		Parent: tree.Under(supervisors.RoleKeeper, nil),
	})
	if err != nil {
		cfg.Listener.Close()
		tree.Stop()
		return nil, err
	}
	n := &Node{tree: tree, keeper: k, addr: cfg.Core.Addr, served: make(chan error, 1), system: system, done: make(chan struct{}),
		classes: cfg.Registry.Names(), residents: sm}
	fail := func(err error) (*Node, error) {
		cfg.Listener.Close()
		err = errors.Join(err, n.stopParts(ctx))
		tree.Stop()
		return nil, err
	}
	ec := cfg.Egress
	ec.Metrics = reg
	fetcher, err := egress.New(ec)
	if err != nil {
		return fail(err)
	}
	pc := cfg.Peers
	pc.Node, pc.Keeper, pc.ClusterKey, pc.MaxBody, pc.Logger = cfg.Core.Node, k, cfg.HTTP.ClusterKey, cfg.HTTP.MaxBody, log
	peers, err := peer.New(pc)
	if err != nil {
		return fail(err)
	}
	n.peers = peers
	hc := cfg.HTTP
	hc.Registry, hc.Peers = cfg.Registry, peers
	caller, err := ingress.NewCaller(hc)
	if err != nil {
		return fail(err)
	}
	// The way to the actors first, then the socket events' entry that
	// uses it, the socket owner that delivers to that entry, and the
	// actors' Host, whose events use the socket owner.
	ac := cfg.Actors
	ac.Fetcher = fetcher
	if cfg.Secrets != nil {
		ac.Secrets = cfg.Secrets
	}
	ac.Keeper, ac.Bucket, ac.Registry, ac.System, ac.Logger = k, cfg.Bucket, cfg.Registry, system, log
	ac.RetryAfter, ac.Supervision, ac.Caller = cfg.Core.LeasePeriod, sup, caller
	ac.Parent = tree.Under(supervisors.RoleDirector, nil)
	ac.Rooms = tree.Under(supervisors.RoleSockets, nil)
	n.directory = newClassDirectory(cfg.Bucket, k.Status, cfg.Core.AttemptTimeout, log)
	ac.Classes = n.directory
	entry, err := actorhost.NewEntry(ac)
	if err != nil {
		return fail(err)
	}
	sink, err := ingress.NewSocketEvents(k, entry, log, reg)
	var socketFailures atomic.Int64 // each closed one actor's sockets (1011)
	if err == nil {
		if f := cfg.faults; f != nil {
			sink.SetFaults(func(msg any) { f(supervisors.RoleSockets, msg) })
		}
		sc := cfg.Sockets
		sc.Sink, sc.Logger, sc.Registerer = sink, log, reg
		sc.Dial = fetcher.Dial // outbound sockets reach what the egress allow-list allows
		sc.Failed = func(ownership.Actor, string) {
			socketFailures.Add(1)
			tree.Contained(supervisors.RoleSockets)
		}
		n.sockets, err = sockets.New(sc)
	}
	if err != nil {
		return fail(err)
	}
	tree.AddPart(supervisors.RoleSockets, "sockets", func() string {
		return fmt.Sprintf("%d sockets held, %d failures", n.sockets.Held(), socketFailures.Load())
	})
	n.host, err = entry.Start(n.sockets)
	if err != nil {
		return fail(err)
	}
	d, err := n.spawnDrivers(cfg, k, peers.Take, log)
	if err != nil {
		return fail(err)
	}
	stopStarting := startingServer(cfg.Listener, log)
	err = k.Begin(ctx, &nodeHooks{system: system, host: n.host, sockets: n.sockets, drivers: d})
	if err == nil {
		err = publishClasses(ctx, cfg.Bucket, cfg.Core.Node, cfg.Core.Instance, n.classes, cfg.Core.AttemptTimeout)
	}
	stopStarting()
	if err != nil {
		return fail(err)
	}
	if err := registerStorage(reg, n.host); err != nil {
		return fail(err)
	}
	var debug, status http.Handler
	if cfg.PublicAdmin {
		debug, status = debugHandler(n.Tree), n.statusHandler()
	}
	hc.Debug, hc.Status, hc.PeerStatus = debug, status, n.statusHandler()
	hc.Node, hc.Instance, hc.Keeper, hc.Host = cfg.Core.Node, cfg.Core.Instance, k, n.host
	hc.Gatherer, hc.Registerer, hc.Logger, hc.Sockets = reg, reg, log, n.sockets
	h, err := ingress.New(hc)
	if err != nil {
		return fail(err)
	}
	n.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	n.ingress = h
	am, err := newAlarmMetrics(reg, n.host)
	if err != nil {
		return fail(err)
	}
	if cfg.Deploys != nil {
		if n.deploys, err = newDeployWatch(cfg.Bucket, cfg.Registry, cfg.Deploys, n.host, h.SetFront, cmp.Or(cfg.DeployPoll, DefaultDeployPoll), reg, log); err != nil {
			return fail(err)
		}
		n.deploys.start(ctx)
	}
	n.alarms = startAlarms(n.host, cfg.Bucket, cmp.Or(cfg.AlarmPoll, DefaultAlarmPoll), alarmIO, am, log)
	if cfg.Secrets != nil {
		if n.secrets, err = startSecrets(cfg.Secrets, cfg.Bucket, cfg.Core.Node, cmp.Or(cfg.SecretsPoll, DefaultSecretsPoll), reg, log); err != nil {
			n.alarms.stop()
			return fail(err)
		}
	}
	n.server = h.Server()
	go n.watch()
	go func() { n.served <- n.server.Serve(cfg.Listener) }()
	log.Info("node serving", slog.String("addr", n.addr), slog.String("instance", string(cfg.Core.Instance)))
	return n, nil
}

// spawnDrivers spawns the sweeper, drainer and mover, and returns where
// the keeper's effects for them go.
func (n *Node) spawnDrivers(cfg Config, k *keeper.Keeper, take TakeFunc, log *slog.Logger) (drivers, error) {
	sw := &sweepState{}
	sweeperPID, err := n.tree.Spawn(supervisors.RoleSweeper, "sweeper", actor.PropsFromProducer(func() actor.Actor {
		return &sweeper{st: sw, k: k, sockets: n.sockets, period: cfg.Core.SweepPeriod}
	}), sw.progress)
	if err != nil {
		return drivers{}, err
	}
	n.drain = &drainState{state: "serving"}
	dlog := log.With(slog.String("component", "drainer"))
	n.drainer, err = n.tree.Spawn(supervisors.RoleDrainer, "drainer", actor.PropsFromProducer(func() actor.Actor {
		return &drainer{st: n.drain, k: k, sockets: n.sockets, poll: cfg.Core.LeasePeriod, log: dlog}
	}), n.drain.progress)
	if err != nil {
		return drivers{}, err
	}
	mv := &moveState{pending: map[ownership.Actor]*pendingMove{}, requests: map[ownership.Actor]string{}, handled: map[string]bool{}}
	mlog := log.With(slog.String("component", "mover"))
	takeHere := func(ctx context.Context, a ownership.Actor) error {
		at, err := n.host.Take(ctx, a)
		if err == nil && at != nil {
			err = fmt.Errorf("held by node %s", at.Node)
		}
		return err
	}
	n.mover, err = n.tree.Spawn(supervisors.RoleMover, "mover", actor.PropsFromProducer(func() actor.Actor {
		return &mover{st: mv, k: k, sockets: n.sockets, take: take, log: mlog,
			bucket: cfg.Bucket, self: cfg.Core.Node, takeHere: takeHere}
	}), mv.progress)
	if err != nil {
		return drivers{}, err
	}
	return drivers{sweeper: sweeperPID, drainer: n.drainer, mover: n.mover, moves: mv}, nil
}

// watch closes done once the keeper has ended or the tree has failed. A
// keeper that broke is counted as the keeper's failure; a tree that failed
// (a child its policy does not restart) stops the keeper cleanly: the
// resident actors have stopped, their commits durable, so every record
// can be released for the peers to take at once.
func (n *Node) watch() {
	select {
	case <-n.keeper.Done():
		var ee *keeper.ExitError
		if errors.As(n.keeper.Err(), &ee) && ee.Broke {
			n.tree.Report(supervisors.RoleKeeper, ee)
		}
	case <-n.tree.Failed():
		n.sockets.CloseAll(1011, "node failed")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = n.keeper.Stop(ctx)
		cancel()
	}
	close(n.done)
}

// stopParts stops what Start started so far, in reverse order.
func (n *Node) stopParts(ctx context.Context) error {
	var errs []error
	if n.sockets != nil {
		n.sockets.CloseAll(1012, "stop")
		errs = append(errs, n.sockets.Shutdown(ctx))
	}
	if n.host != nil {
		errs = append(errs, n.host.HibernateAll(ctx))
	}
	select {
	case <-n.keeper.Done(): // it ended by itself: its error is the caller's
	default:
		errs = append(errs, n.keeper.Stop(ctx))
	}
	return errors.Join(errs...)
}

// Drain drains the node (docs/PROTOCOL.md §5) and returns once it has
// nothing left (no live hold, parked record or pending release), or ctx
// ends. why is logged.
func (n *Node) Drain(ctx context.Context, why string) error {
	done := make(chan struct{})
	n.system.Root.Send(n.drainer, &drainMsg{why: why})
	n.system.Root.Send(n.drainer, &drainWaitMsg{done: done})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drain: %s: %w", n.drain.progress(), ctx.Err())
	case <-n.done:
		return fmt.Errorf("drain: the node ended: %w", n.Err())
	}
}

// Undrain takes a drain back: the node serves again.
func (n *Node) Undrain() { n.system.Root.Send(n.drainer, &undrainMsg{}) }

// LivePeer says whether a peer of this node is live (and not draining): a
// drain would hand the node's actors to it.
func (n *Node) LivePeer() bool {
	for _, p := range n.keeper.Status().Peers {
		if p.Live {
			return true
		}
	}
	return false
}

// Move moves actor a, held or parked here, to node target: refused at once
// (ErrMoveRefused) when target is not a live peer; otherwise the keeper
// releases it and the mover sends target its take call.
func (n *Node) Move(ctx context.Context, a ownership.Actor, target ownership.NodeID) error {
	reply := make(chan error, 1)
	n.system.Root.Send(n.mover, &moveMsg{actor: a, target: target, reply: reply})
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Tree lists the node's tree, one actor a line (see Tree.Lines), then its
// resident actors, one line a class.
func (n *Node) Tree() []supervisors.Line {
	lines := n.tree.Lines()
	for i := range lines {
		if l := &lines[i]; l.Role == string(supervisors.RoleSockets) && !l.Part {
			l.Progress = fmt.Sprintf("room actors: %d", n.host.RoomActors()) // the rooms' actor
		}
	}
	return append(lines, n.residents.ResidentLines(n.host.ResidentByClass())...)
}

// Status is what the node's ownership core holds now.
func (n *Node) Status() ownership.Status { return n.keeper.Status() }

// Sockets counts the WebSockets open on the node.
func (n *Node) Sockets() int { return n.sockets.Held() }

// Addr is the address peers reach this node at.
func (n *Node) Addr() string { return n.addr }

// ServeErr receives the HTTP server's error if it stops serving by itself
// (never after Stop or Abort: then it receives http.ErrServerClosed).
func (n *Node) ServeErr() <-chan error { return n.served }

// Done is closed once the node has stopped acting: after Stop, when the
// node lost its lease, or when an actor of its tree failed in a way its
// policy does not restart (Err says which).
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is nil until Done is closed; then nil after a clean stop, or why the
// node ended.
func (n *Node) Err() error {
	if err := n.tree.Err(); err != nil {
		return err
	}
	return n.keeper.Err()
}

// Stop stops the node cleanly: the server stops accepting and finishes the
// requests in flight, every resident actor hibernates (its commits are
// durable already), then the keeper releases every hold and writes the
// lease released.
func (n *Node) Stop(ctx context.Context) error {
	var errs []error
	n.alarms.stop() // no alarm's event starts from now on
	if n.deploys != nil {
		n.deploys.stop()
	}
	if n.secrets != nil {
		n.secrets.stop()
	}
	if err := n.server.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	// The node's sockets close with 1012 (service restart); their close
	// events still reach the actors, which hibernate after. So do the
	// sockets it relays to other nodes.
	n.sockets.CloseAll(1012, "stop")
	n.peers.CloseRelays(1012, "stop")
	if err := n.sockets.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("websocket shutdown: %w", err))
	}
	if err := n.host.HibernateAll(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := n.keeper.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	select {
	case <-n.done:
	case <-ctx.Done():
	}
	n.tree.Stop()
	return errors.Join(errs...)
}

// Abort ends a node whose keeper has ended without a clean stop: it closes
// the server and every connection at once and drops the resident actors.
func (n *Node) Abort() {
	n.alarms.passes.cancel()
	n.server.Close()
	n.sockets.CloseAll(1012, "lapse")
	n.peers.CloseRelays(1012, "node exits")
	n.host.DropAll()
}

// nodeHooks passes the keeper's effects to the resident actors and the
// drivers, which are all made before the keeper begins. Every method only
// sends a message.
type nodeHooks struct {
	keeper.NopHooks
	system  *actor.ActorSystem
	host    *actorhost.Host
	sockets *sockets.Owner
	drivers drivers
}

// drivers are the PIDs the keeper's effects for a pass go to.
type drivers struct {
	sweeper, drainer, mover *actor.PID
	moves                   *moveState
}

// CloseSockets hands a pass's closes to its driver, and closes the others
// (a stop, a lapse) on a goroutine of its own: closing writes close
// frames, and a hook must not block.
func (h *nodeHooks) CloseSockets(c ownership.CloseSockets) {
	var to *actor.PID
	switch c.Reason {
	case "sweep":
		to = h.drivers.sweeper
	case "drain":
		to = h.drivers.drainer
	case "move":
		to = h.drivers.mover
	}
	if to != nil {
		h.system.Root.Send(to, &closeMsg{c: c})
		return
	}
	closeSockets(h.sockets, c)
}

// Take hands a move's take call to the mover.
func (h *nodeHooks) Take(t ownership.Take) {
	h.drivers.moves.released(t)
	h.system.Root.Send(h.drivers.mover, &takeMsg{t: t})
}

// DrainChanged tells the drainer.
func (h *nodeHooks) DrainChanged(c ownership.DrainChanged) {
	h.system.Root.Send(h.drivers.drainer, &drainSeenMsg{c: c})
}

// MoveRequests tells the mover.
func (h *nodeHooks) MoveRequests(m ownership.MoveRequests) {
	h.system.Root.Send(h.drivers.mover, &moveRequestsMsg{keys: m.Keys})
}

// Drained tells the drainer.
func (h *nodeHooks) Drained() {
	h.system.Root.Send(h.drivers.drainer, &drainedMsg{})
}

func (h *nodeHooks) StopActing(s ownership.StopActing) { h.host.StopActing(s.Actor, s.Gen) }

func (h *nodeHooks) Abandoned(a ownership.Actor, gen ownership.Generation) {
	h.host.Abandoned(a, gen)
}

func (h *nodeHooks) Exit(e ownership.Exit) {
	if !e.Clean {
		h.host.DropAll()
		go h.sockets.CloseAll(1012, "lapse")
	}
}
