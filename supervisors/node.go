package supervisors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// NodeConfig is what StartNode assembles a node from. Core (with Node,
// Instance and the lease settings), Bucket and Listener are required.
type NodeConfig struct {
	// Core configures the ownership protocol. Core.Addr, when empty, is
	// set to the listener's address.
	Core     ownership.Config
	Bucket   ownership.Bucket
	Listener net.Listener
	// Registry holds the classes served. Nil: actors.BuiltIn().
	Registry *actors.Registry
	// Logger: nil logs nothing.
	Logger *slog.Logger
	// IdleTimeout, MaxResident and MaxState configure the resident actors
	// (see actors.Config); MaxBody the request bodies (see Config).
	IdleTimeout time.Duration
	MaxResident int
	MaxState    int
	MaxBody     int64
	// OnHibernate is passed to actors.Config.
	OnHibernate func(a ownership.Actor, gen ownership.Generation, reason string)
	// Supervision bounds the restarts of a resident actor (see
	// Policy). Zero: its defaults.
	Supervision Policy
	// MaxSockets and MaxMessage bound the node's WebSockets (see
	// sockets.Config). Zero: its defaults.
	MaxSockets int
	MaxMessage int
	// PingInterval and PongTimeout: how often sockets are pinged, and how
	// long a socket may stay silent after a ping (see sockets.Config).
	// Zero: its defaults.
	PingInterval time.Duration
	PongTimeout  time.Duration
	// SendQueueTotal bounds the bytes queued for all sockets together (see
	// sockets.Config). Zero: its default.
	SendQueueTotal int
	// NoIOUring: a broadcast writes each socket with its own write(2)
	// (see sockets.Config).
	NoIOUring bool
	// ClusterKey signs and checks the requests between nodes (see
	// Config). Nil: they are neither signed nor checked.
	ClusterKey []byte
	// CallTimeout bounds an actor's call to another actor (see
	// actors.Config). Zero: actors.DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxConns bounds the HTTP connections served as usual, and
	// OverflowConns those admitted past it for health checks and peers
	// (conns.go; internal/budget divides the file limit into them). Zero
	// MaxConns: connections are not limited.
	MaxConns      int
	OverflowConns int
	// HTTPIdleTimeout closes a keep-alive connection idle this long. Zero:
	// DefaultHTTPIdleTimeout.
	HTTPIdleTimeout time.Duration
	// PeerConns bounds the connections to each peer (see Config).
	PeerConns int
	// MaxBodyInflight, BodyTimeout and BodyMinRate bound the request
	// bodies (see Config). Zero: their defaults.
	MaxBodyInflight int64
	BodyTimeout     time.Duration
	BodyMinRate     int64
}

// Node is one running node: ownership keeper, resident actors and HTTP
// server, sharing one actor system and one metrics registry.
type Node struct {
	keeper  *keeper.Keeper
	host    *actors.Host
	sockets *sockets.Owner
	server  *http.Server
	addr    string
	served  chan error // the server's end
}

// StartNode starts the keeper (it returns once the node's lease is taken),
// the resident actors and the HTTP server on cfg.Listener. On error the
// listener is closed.
func StartNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	if cfg.Listener == nil {
		return nil, errors.New("node config: no listener")
	}
	if cfg.Registry == nil {
		cfg.Registry = actors.BuiltIn()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Core.Addr == "" {
		cfg.Core.Addr = cfg.Listener.Addr().String()
	}
	log := cfg.Logger.With(slog.String("node", string(cfg.Core.Node)))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	system := keeper.NewSystem(cfg.Logger)
	hooks := &nodeHooks{}
	stopStarting := startingServer(cfg.Listener, log)
	k, err := keeper.Start(ctx, keeper.Config{
		Core: cfg.Core, Bucket: cfg.Bucket, System: system, Logger: cfg.Logger, Registerer: reg, Hooks: hooks,
	})
	stopStarting()
	if err != nil {
		cfg.Listener.Close()
		return nil, err
	}
	var sup *Supervisor
	sm, err := NewMetrics(reg)
	if err == nil {
		sup, err = New(sm, cfg.Supervision, log)
	}
	if err != nil {
		cfg.Listener.Close()
		return nil, errors.Join(err, k.Stop(ctx))
	}
	sink, err := newSocketSink(k, log, reg)
	var owner *sockets.Owner
	if err == nil {
		owner, err = sockets.New(sockets.Config{
			Sink: sink, MaxSockets: cfg.MaxSockets, MaxMessage: cfg.MaxMessage,
			PingInterval: cfg.PingInterval, PongTimeout: cfg.PongTimeout, NoIOUring: cfg.NoIOUring, Logger: log, Registerer: reg,
			SendQueueTotal: cfg.SendQueueTotal,
		})
	}
	if err != nil {
		cfg.Listener.Close()
		return nil, errors.Join(err, k.Stop(ctx))
	}
	sink.owner.Store(owner)
	hooks.sockets.Store(owner)
	caller := &lateCaller{}
	host, err := actors.NewHost(actors.Config{
		Keeper: k, Bucket: cfg.Bucket, Registry: cfg.Registry, System: system, Logger: log,
		IdleTimeout: cfg.IdleTimeout, MaxResident: cfg.MaxResident, MaxState: cfg.MaxState,
		RetryAfter: cfg.Core.LeasePeriod, OnHibernate: cfg.OnHibernate, Supervision: sup, Sockets: owner,
		Caller: caller, CallTimeout: cfg.CallTimeout,
	})
	if err != nil {
		cfg.Listener.Close()
		return nil, errors.Join(err, owner.Shutdown(ctx), k.Stop(ctx))
	}
	hooks.host.Store(host)
	sink.host.Store(host)
	h, err := ingress.New(ingress.Config{
		Node: cfg.Core.Node, Keeper: k, Host: host, Registry: cfg.Registry, Gatherer: reg, Logger: log, MaxBody: cfg.MaxBody,
		Sockets: owner, ClusterKey: cfg.ClusterKey, Registerer: reg, PeerConns: cfg.PeerConns,
		MaxBodyInflight: cfg.MaxBodyInflight, BodyTimeout: cfg.BodyTimeout, BodyMinRate: cfg.BodyMinRate,
		MaxConns: cfg.MaxConns, OverflowConns: cfg.OverflowConns, HTTPIdleTimeout: cfg.HTTPIdleTimeout,
	})
	if err != nil {
		cfg.Listener.Close()
		return nil, errors.Join(err, host.HibernateAll(ctx), k.Stop(ctx))
	}
	caller.h.Store(h)
	n := &Node{
		keeper:  k,
		host:    host,
		sockets: owner,
		addr:    cfg.Core.Addr,
		served:  make(chan error, 1),
		server:  h.Server(),
	}
	go func() { n.served <- n.server.Serve(cfg.Listener) }()
	log.Info("node serving", slog.String("addr", n.addr), slog.String("instance", string(cfg.Core.Instance)))
	return n, nil
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

// Done is closed once the keeper has ended: after Stop, or when the node
// lost its lease (Err says which).
func (n *Node) Done() <-chan struct{} { return n.keeper.Done() }

// Err is nil until Done is closed; then nil after a clean stop, or why the
// keeper ended.
func (n *Node) Err() error { return n.keeper.Err() }

// Stop stops the node cleanly: the server stops accepting and finishes the
// requests in flight, every resident actor hibernates (its commits are
// durable already), then the keeper releases every hold and writes the
// lease released.
func (n *Node) Stop(ctx context.Context) error {
	var errs []error
	if err := n.server.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	// The node's sockets close with 1012 (service restart); their close
	// events still reach the actors, which hibernate after.
	n.sockets.CloseAll(1012, "stop")
	if err := n.sockets.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("websocket shutdown: %w", err))
	}
	if err := n.host.HibernateAll(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := n.keeper.Stop(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Abort ends a node whose keeper has ended without a clean stop: it closes
// the server and every connection at once and drops the resident actors.
func (n *Node) Abort() {
	n.server.Close()
	n.sockets.CloseAll(1012, "lapse")
	n.host.DropAll()
}

// nodeHooks passes the keeper's effects to the resident actors. Every
// method only sends a message.
type nodeHooks struct {
	keeper.NopHooks
	host    atomic.Pointer[actors.Host]   // nil until the host exists; nothing is resident before
	sockets atomic.Pointer[sockets.Owner] // nil until it exists; no socket is open before
}

// CloseSockets closes the sockets the core names, on a goroutine of its
// own: closing writes close frames, and a hook must not block.
func (h *nodeHooks) CloseSockets(c ownership.CloseSockets) {
	o := h.sockets.Load()
	if o == nil {
		return
	}
	if c.All {
		go o.CloseAll(c.Code, c.Reason)
		return
	}
	go o.CloseActor(c.Actor, c.Code, c.Reason)
}

func (h *nodeHooks) StopActing(s ownership.StopActing) {
	if host := h.host.Load(); host != nil {
		host.StopActing(s.Actor, s.Gen)
	}
}

func (h *nodeHooks) Abandoned(a ownership.Actor, gen ownership.Generation) {
	if host := h.host.Load(); host != nil {
		host.Abandoned(a, gen)
	}
}

func (h *nodeHooks) Exit(e ownership.Exit) {
	if host := h.host.Load(); host != nil && !e.Clean {
		host.DropAll()
	}
	if o := h.sockets.Load(); o != nil && !e.Clean {
		go o.CloseAll(1012, "lapse")
	}
}

// lateCaller is the actors.Caller of a node, whose handler is made after
// the resident actors that call through it.
type lateCaller struct {
	h atomic.Pointer[ingress.Handler]
}

func (c *lateCaller) Call(ctx context.Context, to ownership.Actor, req *actors.Request) (*actors.Response, error) {
	h := c.h.Load()
	if h == nil {
		return nil, fmt.Errorf("call %s/%s: %w: the node is starting", to.Class, to.Name, actors.ErrCallFailed)
	}
	return h.Call(ctx, to, req)
}
