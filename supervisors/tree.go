package supervisors

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/internal/metricreg"
)

// Role is the job of one actor of the node's tree. Its failure means what
// the role's policy says (see the package doc).
type Role string

// The roles of the tree.
const (
	RoleKeeper   Role = "keeper"
	RoleDirector Role = "director"
	RoleSweeper  Role = "sweeper"
	RoleDrainer  Role = "drainer"
	RoleMover    Role = "mover"
	// RoleSockets is the socket owner (package sockets), not an actor but a
	// part of the tree with a failure of its own (Tree.Contained), and the
	// rooms' actor, the supervisor of the room actors that send the actors'
	// socket output (package internal/actorhost).
	RoleSockets Role = "sockets"
)

// roles lists the roles in the order the tree shows them.
var roles = []Role{RoleKeeper, RoleDirector, RoleSweeper, RoleDrainer, RoleMover, RoleSockets}

// rolePolicy is what a failure of a role's actor leads to.
type rolePolicy struct {
	// restart: the actor is restarted after a backoff (else it is stopped
	// and the node fails).
	restart bool
	// maxRestarts within within; one more failure fails the node.
	maxRestarts int
	within      time.Duration
	// backoff is the delay before the first restart, doubled per failure
	// in the window up to backoffMax.
	backoff, backoffMax time.Duration
}

// policies are the tree's declared policies, one per role.
var policies = map[Role]rolePolicy{
	// The keeper ends itself on a failure (package keeper): it is never
	// restarted, and the node stops acting and exits non-zero.
	RoleKeeper: {},
	// The director is restarted; its resident actors stop first.
	RoleDirector: {restart: true, maxRestarts: 3, within: time.Minute, backoff: 10 * time.Millisecond, backoffMax: time.Second},
	// The drivers are restarted with backoff and resume from the Core.
	RoleSweeper: {restart: true, maxRestarts: 10, within: time.Minute, backoff: 100 * time.Millisecond, backoffMax: 10 * time.Second},
	RoleDrainer: {restart: true, maxRestarts: 10, within: time.Minute, backoff: 100 * time.Millisecond, backoffMax: 10 * time.Second},
	RoleMover:   {restart: true, maxRestarts: 10, within: time.Minute, backoff: 100 * time.Millisecond, backoffMax: 10 * time.Second},
	// The socket owner contains a failure itself: the failed actor's
	// sockets close with 1011 and the node carries on; so does the rooms'
	// actor (a restart would stop its room actors with output in their
	// mailboxes). Nothing restarts.
	RoleSockets: {},
}

// Tree is the supervision tree of one node: a root actor whose children
// are the node's long-lived actors, each spawned under a Role. The root
// supervises them with the role's policy, counts their messages, failures
// and restarts (wasmkeep_supervisor_*{role}), and shows them (Lines). A
// failure the policy does not restart fails the node: Failed is closed and
// Err says why. Tree is safe for concurrent use.
type Tree struct {
	system *actor.ActorSystem
	root   *actor.PID
	m      *treeMetrics
	log    *slog.Logger

	mu       sync.Mutex
	children map[string]*child // by PID id
	err      error
	failed   chan struct{}
	// faults, set only by tests (before any spawn), is called before each
	// user message of a child: a panic in it is that child's failure.
	faults func(Role, any)
}

// child is one actor of the tree.
type child struct {
	role     Role
	name     string
	pid      *actor.PID
	state    string // running, restarting, stopped, failed
	restarts int
	depth    atomic.Int64
	// progress, when set, reports what the actor is doing (a driver's pass).
	progress func() string
}

// NewTree spawns the root of a node's tree in system, counting into reg.
func NewTree(system *actor.ActorSystem, reg prometheus.Registerer, log *slog.Logger) (*Tree, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newTreeMetrics(reg)
	if err != nil {
		return nil, err
	}
	t := &Tree{system: system, m: m, log: log.With(slog.String("component", "supervisors")),
		children: map[string]*child{}, failed: make(chan struct{})}
	if err := t.registerDepth(reg); err != nil {
		return nil, err
	}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &rootActor{t: t} }), "node")
	if err != nil {
		return nil, fmt.Errorf("supervision tree: %w", err)
	}
	t.root = pid
	return t, nil
}

// spawnMsg asks the root to spawn a child.
type spawnMsg struct {
	props *actor.Props
	name  string
	reply chan spawnResult
}

type spawnResult struct {
	pid *actor.PID
	err error
}

// rootActor is the tree's root: the parent of every child, and their
// supervisor (HandleFailure). It only spawns and watches.
type rootActor struct{ t *Tree }

func (r *rootActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *spawnMsg:
		pid, err := ctx.SpawnNamed(m.props, m.name)
		m.reply <- spawnResult{pid: pid, err: err}
	case *actor.Terminated:
		r.t.terminated(m.Who)
	}
}

// HandleFailure applies the failed child's role policy.
func (r *rootActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, who *actor.PID, rs *actor.RestartStatistics, reason, _ any) {
	r.t.handleFailure(sup, who, rs, reason)
}

// Spawn spawns props as a child of the root under role, named name, with
// the tree's middleware (message timing, failure counting, mailbox depth).
// progress, when set, is shown with the child. Spawn must not be called
// from the root's own goroutine (it waits for the root).
func (t *Tree) Spawn(role Role, name string, props *actor.Props, progress func() string) (*actor.PID, error) {
	c := &child{role: role, name: name, state: "running", progress: progress}
	rm := t.m.role(role)
	props = props.Configure(
		actor.WithReceiverMiddleware(roleMiddleware(rm, c, t.faults)),
		actor.WithMailbox(actor.Unbounded(childDepth{c: c})),
	)
	// Registered before the spawn: the child may fail in Started.
	pid := t.ChildPID(name)
	c.pid = pid
	t.mu.Lock()
	t.children[pid.Id] = c
	t.mu.Unlock()
	reply := make(chan spawnResult, 1)
	t.system.Root.Send(t.root, &spawnMsg{props: props, name: name, reply: reply})
	res := <-reply
	if res.err != nil {
		t.mu.Lock()
		delete(t.children, pid.Id)
		t.mu.Unlock()
		return nil, fmt.Errorf("supervision tree: spawn %s %q: %w", role, name, res.err)
	}
	return res.pid, nil
}

// ChildPID is the PID a child spawned under name gets.
func (t *Tree) ChildPID(name string) *actor.PID {
	return t.system.NewLocalPID(t.root.Id + "/" + name)
}

// Under returns a spawner of children of role (for keeper.Config.Parent and
// actorhost.Config.Parent).
func (t *Tree) Under(role Role, progress func() string) *Spawner {
	return &Spawner{t: t, role: role, progress: progress}
}

// Spawner spawns children of one role.
type Spawner struct {
	t        *Tree
	role     Role
	progress func() string
}

// ChildPID is the PID a child spawned under name gets.
func (s *Spawner) ChildPID(name string) *actor.PID { return s.t.ChildPID(name) }

// SpawnChild spawns props under name.
func (s *Spawner) SpawnChild(props *actor.Props, name string) (*actor.PID, error) {
	return s.t.Spawn(s.role, name, props, s.progress)
}

func (t *Tree) handleFailure(sup actor.Supervisor, who *actor.PID, rs *actor.RestartStatistics, reason any) {
	t.mu.Lock()
	c := t.children[who.Id]
	t.mu.Unlock()
	if c == nil {
		sup.StopChildren(who)
		return
	}
	rm := t.m.role(c.role)
	pol := policies[c.role]
	rs.Fail()
	if !pol.restart || rs.NumberOfFailures(pol.within) > pol.maxRestarts {
		t.setState(c, "failed")
		t.log.Error("actor failed: the node stops", slog.String("role", string(c.role)), slog.String("actor", c.name),
			slog.String("reason", fmt.Sprint(reason)))
		sup.StopChildren(who)
		t.Fail(fmt.Errorf("%s %s failed: %v", c.role, c.name, reason))
		return
	}
	delay := min(pol.backoff<<min(rs.FailureCount()-1, 20), pol.backoffMax)
	t.mu.Lock()
	c.state = "restarting"
	c.restarts++
	t.mu.Unlock()
	rm.restarts.Inc()
	t.log.Warn("actor failed: restarting it", slog.String("role", string(c.role)), slog.String("actor", c.name),
		slog.Duration("after", delay), slog.String("reason", fmt.Sprint(reason)))
	time.AfterFunc(delay, func() {
		t.setState(c, "running")
		sup.RestartChildren(who)
	})
}

func (t *Tree) setState(c *child, state string) {
	t.mu.Lock()
	if c.state != "failed" || state == "failed" {
		c.state = state
	}
	t.mu.Unlock()
}

func (t *Tree) terminated(who *actor.PID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.children[who.Id]; c != nil && c.state != "failed" {
		c.state = "stopped"
	}
}

// InjectFaults makes every actor spawned from now on call f before each
// of its messages, f's panic being that actor's failure: for the tests of
// each role's failure. Call it before any spawn.
func (t *Tree) InjectFaults(f func(Role, any)) { t.faults = f }

// AddPart shows a part of the node that is not an actor (the socket
// owner) as a line of the tree under role, named name, its progress from
// progress. A part is never restarted: its failures are Contained.
func (t *Tree) AddPart(role Role, name string, progress func() string) {
	t.mu.Lock()
	t.children["part/"+name] = &child{role: role, name: name, state: "running", progress: progress}
	t.mu.Unlock()
}

// Contained counts a failure of role that the role contained itself, and
// the node carries on: the socket owner's, which closed the failed
// actor's sockets (sockets.Config.Failed).
func (t *Tree) Contained(role Role) {
	t.m.role(role).failures.Inc()
}

// Report counts a failure that an actor handled itself (the keeper ends
// itself on a panic rather than reaching its supervisor), and fails the
// node.
func (t *Tree) Report(role Role, err error) {
	t.mu.Lock()
	counted := false // its supervisor saw the failure already
	for _, c := range t.children {
		if c.role == role {
			counted = counted || c.state == "failed"
			c.state = "failed"
		}
	}
	t.mu.Unlock()
	if !counted {
		t.m.role(role).failures.Inc()
	}
	t.Fail(fmt.Errorf("%s failed: %w", role, err))
}

// Fail fails the node with err (the first call wins).
func (t *Tree) Fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	t.err = err
	close(t.failed)
}

// Failed is closed once an actor's failure has failed the node.
func (t *Tree) Failed() <-chan struct{} { return t.failed }

// Err is why the node failed, or nil.
func (t *Tree) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Line is one actor of the tree as Lines shows it.
type Line struct {
	Role     string `json:"role"`
	Name     string `json:"name"`
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
	Mailbox  int64  `json:"mailbox"`
	Progress string `json:"progress,omitempty"`
	// Part: a part of the node that is not an actor (AddPart).
	Part bool `json:"part,omitempty"`
}

// Lines lists the tree's children in role order. The resident actors,
// children of the director, are counted by class apart
// (Metrics.ResidentLines).
func (t *Tree) Lines() []Line {
	t.mu.Lock()
	var out []Line
	for _, c := range t.children {
		out = append(out, Line{Role: string(c.role), Name: c.name, State: c.state, Restarts: c.restarts, Mailbox: c.depth.Load(), Part: c.pid == nil})
	}
	progress := map[string]func() string{}
	for _, c := range t.children {
		if c.progress != nil {
			progress[c.name] = c.progress
		}
	}
	t.mu.Unlock()
	rank := map[string]int{}
	for i, r := range roles {
		rank[string(r)] = i
	}
	sort.Slice(out, func(i, j int) bool {
		if rank[out[i].Role] != rank[out[j].Role] {
			return rank[out[i].Role] < rank[out[j].Role]
		}
		return out[i].Name < out[j].Name
	})
	for i := range out {
		if f := progress[out[i].Name]; f != nil {
			out[i].Progress = f()
		}
	}
	return out
}

// Text renders lines (Tree.Lines, then Metrics.ResidentLines) as
// aligned text, one actor a line.
func Text(lines []Line) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s %-28s %-12s %8s %8s  %s\n", "ROLE", "NAME", "STATE", "RESTARTS", "MAILBOX", "PROGRESS")
	for _, l := range lines {
		name := l.Name
		if l.Role != "resident" && !l.Part { // the actors of the tree
			name = "node/" + name
		}
		fmt.Fprintf(&b, "%-9s %-28s %-12s %8d %8d  %s\n", l.Role, name, l.State, l.Restarts, l.Mailbox, l.Progress)
	}
	return b.String()
}

// Stop stops the root and so every child, and waits for them to end.
func (t *Tree) Stop() {
	_ = t.system.Root.StopFuture(t.root).Wait()
}

// roleMiddleware times one in timedOneIn user messages of a child and
// counts the panics that leave its Receive, then lets them go on to the
// root (measured).
func roleMiddleware(rm roleMetrics, c *child, faults func(Role, any)) actor.ReceiverMiddleware {
	var before func(any)
	if faults != nil {
		before = func(msg any) { faults(c.role, msg) }
	}
	return measured(rm.message, func() {
		rm.failures.Inc()
		c.depth.Add(-1) // never reported received (see depth)
	}, before, false)
}

// childDepth keeps the child's count of queued messages, as depth does
// for a class; the role's gauge sums its children's at each scrape, so a
// message costs one atomic add, not a shared gauge's update.
type childDepth struct{ c *child }

func (d childDepth) MailboxStarted()     {}
func (d childDepth) MessagePosted(any)   { d.c.depth.Add(1) }
func (d childDepth) MessageReceived(any) { d.c.depth.Add(-1) }
func (d childDepth) MailboxEmpty()       {}

// depthOf sums the queued messages of role's children.
func (t *Tree) depthOf(role Role) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, c := range t.children {
		if c.role == role {
			n += c.depth.Load()
		}
	}
	return float64(n)
}

// treeMetrics are the tree's series, by role.
type treeMetrics struct {
	restarts *prometheus.CounterVec
	failures *prometheus.CounterVec
	message  *prometheus.HistogramVec
}

type roleMetrics struct {
	restarts, failures prometheus.Counter
	message            prometheus.Observer
}

// registerDepth registers wasmkeep_supervisor_mailbox_depth{role}, read
// from the tree's children at each scrape.
func (t *Tree) registerDepth(reg prometheus.Registerer) error {
	for _, r := range roles {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "wasmkeep_supervisor_mailbox_depth",
			Help:        "Messages queued in the mailboxes of the node's tree, by role.",
			ConstLabels: prometheus.Labels{"role": string(r)},
		}, func() float64 { return t.depthOf(r) })
		if err := reg.Register(g); err != nil {
			return fmt.Errorf("supervision tree metrics: %w", err)
		}
	}
	return nil
}

func newTreeMetrics(reg prometheus.Registerer) (*treeMetrics, error) {
	if reg == nil {
		return nil, errors.New("supervision tree metrics: no registerer")
	}
	m := &treeMetrics{}
	var err error
	if m.restarts, err = metricreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_supervisor_restarts_total",
		Help: "Actors of the node's tree restarted after a failure, by role.",
	}, []string{"role"})); err != nil {
		return nil, err
	}
	if m.failures, err = metricreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_supervisor_failures_total",
		Help: "Failures of actors of the node's tree (panics), by role.",
	}, []string{"role"})); err != nil {
		return nil, err
	}
	if m.message, err = metricreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "wasmkeep_supervisor_message_seconds",
		Help:    "Time an actor of the node's tree spent in Receive per message, by role (one message in 8 is timed).",
		Buckets: prometheus.ExponentialBuckets(0.000001, 4, 12), // 1 µs to 4 s
	}, []string{"role"})); err != nil {
		return nil, err
	}
	for _, r := range roles {
		m.role(r) // every role shows at zero
	}
	return m, nil
}

func (m *treeMetrics) role(r Role) roleMetrics {
	l := string(r)
	return roleMetrics{
		restarts: m.restarts.WithLabelValues(l),
		failures: m.failures.WithLabelValues(l),
		message:  m.message.WithLabelValues(l),
	}
}
