package sim

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// Params shape one run. The zero value is not useful: start from Default.
type Params struct {
	Nodes int
	Rooms int

	Chaos time.Duration // faults, crashes, drains, moves and cut links
	Heal  time.Duration // no faults; every node back; events still arrive
	Quiet time.Duration // no new events; what is pending settles

	// Per-request fault probabilities during the chaos phase.
	LoseRequest, LoseReply, LandLate, Slow float64
	Unavailable, UnavailableApplied        float64 // 503 without / with effect
	Conflict, ConflictApplied              float64 // 409 without / with effect

	MaxLate time.Duration // how long after its attempt timeout a late write may land

	EventEvery time.Duration // mean gap between room events
	CrashEvery time.Duration // mean gap between crashes (whole cluster)
	StopEvery  time.Duration
	DrainEvery time.Duration
	MoveEvery  time.Duration
	CutEvery   time.Duration
	// BlackoutEvery paces bucket blackouts: for a few seconds one node's
	// requests are all lost, or their replies are (long enough to lapse).
	BlackoutEvery time.Duration
	SocketChance  float64 // a served event opens a socket
	MaxSkew       time.Duration

	// LivenessBound: an event that arrives once the heal phase has settled
	// must be served within it.
	LivenessBound time.Duration

	// Alarms (alarms.go): the chance that a client's event sets its
	// room's alarm (due within AlarmMaxDelay), or deletes it; that an
	// alarm's handler fails during the chaos, and that one that fired
	// sets the alarm again. AlarmPoll is the pollers' period; an alarm
	// due once the heal has settled must fire within AlarmBound.
	AlarmSet, AlarmDelete, AlarmFail, AlarmAgain float64
	AlarmMaxDelay, AlarmPoll, AlarmBound         time.Duration
}

// Default is the run every seed of the suite uses.
func Default() Params {
	return Params{
		Nodes: 3, Rooms: 4,
		Chaos: 90 * time.Second, Heal: 60 * time.Second, Quiet: 45 * time.Second,
		LoseRequest: 0.02, LoseReply: 0.02, LandLate: 0.03, Slow: 0.03,
		Unavailable: 0.01, UnavailableApplied: 0.01, Conflict: 0.005, ConflictApplied: 0.005,
		MaxLate:       4 * time.Second,
		EventEvery:    250 * time.Millisecond,
		CrashEvery:    40 * time.Second,
		StopEvery:     60 * time.Second,
		DrainEvery:    70 * time.Second,
		MoveEvery:     30 * time.Second,
		CutEvery:      20 * time.Second,
		BlackoutEvery: 30 * time.Second,
		SocketChance:  0.3,
		MaxSkew:       3 * time.Second,
		LivenessBound: 20 * time.Second,
		AlarmSet:      0.1, AlarmDelete: 0.02, AlarmFail: 0.15, AlarmAgain: 0.15,
		AlarmMaxDelay: 8 * time.Second, AlarmPoll: time.Second, AlarmBound: 20 * time.Second,
	}
}

// AlarmHeavy is Default with an alarm set at half the events, due within
// a second, and more writes that land late, and later: the conditions in
// which an alarm's delivery meets a commit still in flight that carries
// its set (the variant reload-without-fence).
func AlarmHeavy() Params {
	p := Default()
	p.AlarmSet, p.AlarmMaxDelay = 0.5, time.Second
	p.LandLate, p.MaxLate = 0.08, 8*time.Second
	return p
}

// coreConfig is the configuration of every simulated node: the defaults,
// with a sweep short enough that runs see its re-reads.
func coreConfig(node ownership.NodeID, inst ownership.InstanceID) ownership.Config {
	c := ownership.DefaultConfig(node, inst)
	c.Addr = string(node)
	c.SweepPeriod = 4 * time.Second
	c.RereadEvery = 3
	c.MoveLook = 20 * time.Second
	c.FailoverWait = 25 * time.Second
	return c
}

// World is one simulated cluster: nodes running real cores, a bucket with
// the memory store's semantics, clients, sockets, faults. Single-threaded.
type World struct {
	P      Params
	Seed   uint64
	rng    *rand.Rand
	now    time.Duration // virtual time since the start
	seq    uint64
	queue  eventQueue
	bucket *memstore.State
	nodes  []*node
	rooms  []ownership.Actor

	cut map[[2]int]bool

	trace   io.Writer
	h       uint64 // running FNV-1a hash of the trace
	Stats   Stats
	Failure string // the first invariant broken, with context

	truth   truth
	records map[ownership.Actor]ownership.Record // the latest landed version of each ownership record
	acked   map[ownership.Actor]uint64           // the highest count an event acknowledged
	heldBuf []ownership.Record
	served  map[uint64]servedAt // scripted events only

	events    map[uint64]*clientEvent
	nextEvent uint64
	nextSock  uint64
	healed    bool
	healAt    time.Duration
	// coresChanged: a core was fed, or a write of one landed, since the
	// last checkStep.
	coresChanged bool
}

// Stats counts what a run did (make sim-long prints them).
type Stats struct {
	Events, Served, GivenUp                  int
	Acquisitions, Parks, WakesAtHome, Relays int
	Releases                                 map[string]int
	Exposed                                  int
	Crashes, Stops, Drains, Moves, Cuts      int
	Blackouts                                int
	Requests, Faults                         int
	SimEvents                                int
	// Commits counts state commits that landed; StaleRefused the state
	// writes refused because a later write (a seal, a commit) came first.
	Commits, StaleRefused int
	// Runs counts run objects written.
	Runs int
	// LateReleases counts events released after their hold could no
	// longer act (their commit had landed); Refusals the events refused
	// after they ran, Unknowns those whose commit had no answer.
	LateReleases, Refusals, Unknowns int
	// Resolved and Fenced count the commits without an answer found, by a
	// read, to have landed, and those fenced so that they cannot.
	Resolved, Fenced int
	// AlarmDeliveries counts the entries the pollers handed to events,
	// AlarmEnded those whose entry they then deleted, AlarmsFired the
	// commits that fired a set and landed.
	AlarmDeliveries, AlarmEnded, AlarmsFired int
}

type node struct {
	id       int
	name     ownership.NodeID
	core     *ownership.Core
	inst     ownership.InstanceID
	life     int // counts starts; replies and timers of earlier lives are dropped
	up       bool
	skew     time.Duration
	timerAt  time.Duration
	resident map[ownership.Actor]*resident
	sockets  map[ownership.Actor][]uint64
	draining bool
	stopping bool
	exposed  map[ownership.Actor]bool
	inflight map[ownership.RequestID]*inflight
	drainAt  time.Duration
	// finishing: until when a stopped resident may still be finishing its
	// event (and so still commit): ground truth for the checks.
	finishing map[ownership.Actor]time.Duration
	inbox     []ownership.Input
	// blackoutUntil: until then every request of this node is lost, or
	// lands with its reply lost (blackoutLands).
	blackoutUntil time.Duration
	blackoutLands bool
	// alarmBusy: the index entries this node's poller is delivering, and
	// the delivery (its clientEvent) of each.
	alarmBusy map[string]uint64
}

type resident struct {
	gen    ownership.Generation
	active time.Duration
	// The resident's state (see storage.go): loaded once per residency.
	loaded bool
	etag   ownership.ETag
	seq    uint64
	value  uint64
	// sealed: the state as the grant's acquisition sealed it, taken by
	// the residency's first load instead of a read (then cleared).
	sealed *ownership.Sealed
	// run: the run object the head this residency wrote or read names;
	// alarm: the room's alarm, as the head holds it.
	run   string
	alarm alarmRec
	// pending: a commit of this hold may still land (its outcome stayed
	// unknown): the next load seals the state again.
	pending bool
	busy    bool       // an event runs
	queue   []evOutput // events waiting for it
}

type inflight struct {
	req        ownership.Request
	parkedSent bool
}

type clientEvent struct {
	id       uint64
	room     ownership.Actor
	born     time.Duration
	attempts int
	hops     int
	served   bool
	take     bool // a move's take call, not a client's event
	// alarm: a poller's delivery of an alarm, not a client's event.
	alarm *alarmDelivery
}

// New makes a world for a seed.
func New(p Params, seed uint64, trace io.Writer) *World {
	w := &World{
		P: p, Seed: seed,
		rng:     rand.New(rand.NewPCG(seed, 0x5eed)),
		bucket:  memstore.NewState(),
		cut:     map[[2]int]bool{},
		trace:   trace,
		h:       14695981039346656037,
		events:  map[uint64]*clientEvent{},
		records: map[ownership.Actor]ownership.Record{},
		acked:   map[ownership.Actor]uint64{},
		served:  map[uint64]servedAt{},
	}
	w.Stats.Releases = map[string]int{}
	w.truth.init()
	for i := 0; i < p.Rooms; i++ {
		w.rooms = append(w.rooms, ownership.Actor{Class: "room", Name: fmt.Sprintf("r%d", i)})
	}
	for i := 0; i < p.Nodes; i++ {
		n := &node{id: i, name: ownership.NodeID(fmt.Sprintf("n%d", i+1))}
		w.nodes = append(w.nodes, n)
		w.startNode(n)
	}
	w.at(w.exp(p.EventEvery), evClient{})
	w.at(w.exp(p.CrashEvery), evCrash{})
	w.at(w.exp(p.StopEvery), evStop{})
	w.at(w.exp(p.DrainEvery), evDrain{})
	w.at(w.exp(p.MoveEvery), evMove{})
	w.at(w.exp(p.CutEvery), evCut{})
	w.at(w.exp(p.BlackoutEvery), evBlackout{})
	w.at(p.Chaos, evHeal{})
	return w
}

// Run runs to the end and reports the first broken invariant ("" if none).
func (w *World) Run() string {
	end := w.P.Chaos + w.P.Heal + w.P.Quiet
	for w.queue.Len() > 0 && w.Failure == "" {
		ev := heap.Pop(&w.queue).(*scheduled)
		if ev.at > end {
			break
		}
		w.now = ev.at
		w.Stats.SimEvents++
		w.handle(ev.ev)
		if w.Failure == "" {
			w.checkStep()
		}
	}
	if w.Failure == "" {
		w.now = end
		w.checkFinal()
	}
	return w.Failure
}

// TraceHash is a running hash of everything that happened, in order.
func (w *World) TraceHash() uint64 { return w.h }

func (w *World) fail(format string, args ...any) {
	if w.Failure == "" {
		w.Failure = fmt.Sprintf("t=%v: ", w.now) + fmt.Sprintf(format, args...)
		w.logf("FAIL %s", w.Failure)
	}
}

func (w *World) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	w.mixString(line)
	if w.trace != nil {
		fmt.Fprintf(w.trace, "%10.3fs %s\n", w.now.Seconds(), line)
	}
}

// note adds one line to the trace: its fields go into the running hash
// without formatting; the line is formatted only when the trace is printed.
func (w *World) note(kind string, n *node, format string, args ...any) {
	w.mix(uint64(w.now))
	w.mixString(kind)
	if n != nil {
		w.mixString(string(n.name))
	}
	for _, a := range args {
		switch a := a.(type) {
		case string:
			w.mixString(a)
		case ownership.InstanceID:
			w.mixString(string(a))
		case ownership.NodeID:
			w.mixString(string(a))
		case ownership.Actor:
			w.mixString(a.Class)
			w.mixString(a.Name)
		case uint64:
			w.mix(a)
		case int:
			w.mix(uint64(a))
		case ownership.Generation:
			w.mix(uint64(a))
		case time.Duration:
			w.mix(uint64(a))
		case bool:
			if a {
				w.mix(1)
			} else {
				w.mix(0)
			}
		default:
			panic(fmt.Sprintf("sim: note of a %T", a))
		}
	}
	if w.trace != nil {
		who := "--"
		if n != nil {
			who = string(n.name)
		}
		fmt.Fprintf(w.trace, "%10.3fs %-3s %-10s %s\n", w.now.Seconds(), who, kind, fmt.Sprintf(format, args...))
	}
}

// noteReq and noteEv are note for the hot paths: they hash their fields
// without boxing them, and format only when the trace is printed.
func (w *World) noteReq(kind string, n *node, id ownership.RequestID, op ownership.Op, key, extra string) {
	w.mix(uint64(w.now))
	w.mixString(kind)
	w.mixString(string(n.name))
	w.mix(uint64(id))
	w.mix(uint64(op))
	w.mixString(key)
	w.mixString(extra)
	if w.trace != nil {
		fmt.Fprintf(w.trace, "%10.3fs %-3s %-10s #%d %s %s %s\n", w.now.Seconds(), n.name, kind, id, op, key, extra)
	}
}

func (w *World) noteEv(kind string, n *node, id uint64, a ownership.Actor, extra string) {
	w.mix(uint64(w.now))
	w.mixString(kind)
	w.mixString(string(n.name))
	w.mix(id)
	w.mixString(a.Name)
	w.mixString(extra)
	if w.trace != nil {
		fmt.Fprintf(w.trace, "%10.3fs %-3s %-10s e%d %s %s\n", w.now.Seconds(), n.name, kind, id, a, extra)
	}
}

// mix and mixString fold into the running FNV-1a trace hash.
func (w *World) mix(v uint64) {
	for i := 0; i < 8; i++ {
		w.h ^= v & 0xff
		w.h *= 1099511628211
		v >>= 8
	}
}

func (w *World) mixString(s string) {
	for i := 0; i < len(s); i++ {
		w.h ^= uint64(s[i])
		w.h *= 1099511628211
	}
	w.h ^= 0xff
	w.h *= 1099511628211
}

// ---- time and randomness ----

func (w *World) at(d time.Duration, ev any) {
	w.seq++
	heap.Push(&w.queue, &scheduled{at: d, seq: w.seq, ev: ev})
}

func (w *World) after(d time.Duration, ev any) { w.at(w.now+d, ev) }

func (w *World) uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

func (w *World) exp(mean time.Duration) time.Duration {
	return time.Duration(w.rng.ExpFloat64() * float64(mean))
}

func (w *World) chance(p float64) bool { return p > 0 && w.rng.Float64() < p }

var epoch = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

func (n *node) clock(now time.Duration) time.Time { return epoch.Add(now + n.skew) }

func (w *World) chaos() bool { return !w.healed }

// ---- nodes ----

func (w *World) startNode(n *node) {
	n.life++
	n.inst = ownership.InstanceID(fmt.Sprintf("%s.%d", n.name, n.life))
	n.skew = w.uniform(-w.P.MaxSkew, w.P.MaxSkew)
	core, err := ownership.NewCore(coreConfig(n.name, n.inst))
	if err != nil {
		panic(err)
	}
	n.core, n.up, n.draining, n.stopping = core, true, false, false
	n.timerAt = -1
	n.resident = map[ownership.Actor]*resident{}
	n.sockets = map[ownership.Actor][]uint64{}
	n.exposed = map[ownership.Actor]bool{}
	n.inflight = map[ownership.RequestID]*inflight{}
	n.finishing = map[ownership.Actor]time.Duration{}
	n.alarmBusy = map[string]uint64{}
	w.note("start", n, "%s", n.inst)
	w.step(n, ownership.Start{})
	w.after(n.core.Config().SweepPeriod, evSweep{node: n.id, life: n.life})
	w.after(w.uniform(0, w.P.AlarmPoll), evPoll{node: n.id, life: n.life})
}

// crash kills a node: no input reaches its core again, its sockets are gone.
func (w *World) crash(n *node) {
	w.note("crash", n, "%s", n.inst)
	w.truth.endInstance(n.inst)
	n.up = false
	n.core = nil
	n.sockets = map[ownership.Actor][]uint64{}
	n.resident = map[ownership.Actor]*resident{}
	n.inbox = nil
}

// step feeds one input to a node's core and carries out its effects; inputs
// the effects cause (socket closes) are fed after, in order.
func (w *World) step(n *node, in ownership.Input) {
	w.coresChanged = true
	n.inbox = append(n.inbox, in)
	if len(n.inbox) > 1 {
		return // already draining the inbox below
	}
	for len(n.inbox) > 0 && n.up {
		next := n.inbox[0]
		effects := n.core.Step(n.clock(w.now), next)
		w.observe(n, next, effects)
		for _, e := range effects {
			if !n.up {
				break
			}
			w.effect(n, e)
		}
		if len(n.inbox) > 0 {
			n.inbox = n.inbox[1:]
		}
	}
	n.inbox = n.inbox[:0]
}

func (w *World) effect(n *node, e ownership.Effect) {
	switch e := e.(type) {
	case ownership.Request:
		w.request(n, e)
	case ownership.SetTimer:
		d := e.At.Sub(epoch) - n.skew
		if d < w.now {
			d = w.now
		}
		n.timerAt = d
		w.at(d, evTimer{node: n.id, life: n.life, at: d})
	case ownership.Grant:
		w.granted(n, e)
	case ownership.Route:
		w.routed(n, e)
	case ownership.Refuse:
		w.refused(n, e)
	case ownership.StopActing:
		w.truth.endHold(e.Actor, n.inst, e.Gen)
		delete(n.resident, e.Actor)
		w.note("stop-act", n, "%s g%d %s", e.Actor, e.Gen, e.Reason)
		// The resident finishes its event, then the shell confirms it ended
		// (rarely never: the core's EndWait bound releases anyway).
		done := w.uniform(0, 30*time.Millisecond)
		n.finishing[e.Actor] = w.now + done
		if !w.chance(0.02) {
			w.after(done, evEnded{node: n.id, life: n.life, actor: e.Actor, gen: e.Gen})
		}
	case ownership.CloseSockets:
		w.closeSockets(n, e)
	case ownership.Count:
		w.countMetric(e)
	case ownership.Take:
		w.note("take", n, "%s -> %s", e.Actor, e.Target)
		if t := w.nodeByName(e.Target); t != nil {
			w.nextEvent++
			ce := &clientEvent{id: w.nextEvent, room: e.Actor, born: w.now, take: true}
			w.events[ce.id] = ce
			w.relay(n, t, ce)
		}
	case ownership.Drained:
		w.note("drained", n, "")
		w.truth.drained(n.inst)
		w.after(w.uniform(0, 2*time.Second), evStopNode{node: n.id, life: n.life})
	case ownership.Exit:
		w.note("exit", n, "clean=%v %s", e.Clean, e.Reason)
		if e.Clean {
			w.truth.stoppedCleanly(n.inst)
		} else if w.chaos() || !strings.HasPrefix(e.Reason, "lost lease") {
			w.noteUncleanExit(n, e.Reason)
		}
		w.truth.endInstance(n.inst)
		n.up = false
		n.core = nil
		n.sockets = map[ownership.Actor][]uint64{}
		n.resident = map[ownership.Actor]*resident{}
		w.after(w.uniform(time.Second, 8*time.Second), evRestart{node: n.id, life: n.life})
	case ownership.Report, ownership.SetGauge, ownership.Observe, ownership.LeaseChanged, ownership.DrainChanged, ownership.MoveRequests:
	default:
		panic(fmt.Sprintf("sim: unknown effect %T", e))
	}
}

func (w *World) noteUncleanExit(n *node, reason string) {
	w.note("exit!", n, "%s", reason)
	if w.healed {
		w.fail("node %s exited after the heal: %s", n.name, reason)
	}
}

func (w *World) countMetric(c ownership.Count) {
	switch c.Name {
	case ownership.MetricAcquisitions:
		w.Stats.Acquisitions++
	case ownership.MetricParkedWakes:
		w.Stats.WakesAtHome++
	case ownership.MetricReleases:
		w.Stats.Releases[c.Label]++
	case "wasmkeep_parks_total":
		w.Stats.Parks++
	}
}

func (w *World) nodeByName(name ownership.NodeID) *node {
	for _, n := range w.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// ---- the bucket ----

type pendingReq struct {
	node    int
	life    int
	req     ownership.Request
	sentAt  time.Duration
	result  ownership.Reply
	applied bool
	lost    bool // the reply never comes: unknown at the attempt timeout
	fault   string
}

func (w *World) request(n *node, r ownership.Request) {
	w.Stats.Requests++
	_, parked := ownership.Actor{}, false
	if a, ok := ownership.ActorFromOwnerKey(r.Key); ok {
		_, parked = n.core.Parked(a)
	}
	for id, other := range n.inflight {
		if other.req.Key == r.Key {
			w.fail("two requests in flight on one key: %s sent #%d on %s while #%d waits for its answer", n.inst, r.ID, r.Key, id)
		}
	}
	n.inflight[r.ID] = &inflight{req: r, parkedSent: parked}
	p := &pendingReq{node: n.id, life: n.life, req: r, sentAt: w.now}
	timeout := n.core.Config().AttemptTimeout
	lat := w.uniform(time.Millisecond, 25*time.Millisecond)
	write := r.Op == ownership.OpPut || r.Op == ownership.OpDelete
	conditional := write && r.Cond.Kind != ownership.Unconditional
	fault := ""
	if w.now < n.blackoutUntil {
		fault = "lose-request"
		if n.blackoutLands && write {
			fault = "lose-reply"
		}
	} else if w.chaos() {
		switch x := w.rng.Float64(); {
		case x < w.P.LoseRequest:
			fault = "lose-request"
		case x < w.P.LoseRequest+w.P.LoseReply:
			fault = "lose-reply"
		case write && x < w.P.LoseRequest+w.P.LoseReply+w.P.LandLate:
			fault = "late"
		case x < w.P.LoseRequest+w.P.LoseReply+w.P.LandLate+w.P.Slow:
			fault = "slow"
		case x < w.P.LoseRequest+w.P.LoseReply+w.P.LandLate+w.P.Slow+w.P.Unavailable:
			fault = "503"
		case write && x < w.P.LoseRequest+w.P.LoseReply+w.P.LandLate+w.P.Slow+w.P.Unavailable+w.P.UnavailableApplied:
			fault = "503-applied"
		case conditional && x < w.P.LoseRequest+w.P.LoseReply+w.P.LandLate+w.P.Slow+w.P.Unavailable+w.P.UnavailableApplied+w.P.Conflict:
			fault = "409"
		case conditional && x < w.P.LoseRequest+w.P.LoseReply+w.P.LandLate+w.P.Slow+w.P.Unavailable+w.P.UnavailableApplied+w.P.Conflict+w.P.ConflictApplied:
			fault = "409-applied"
		}
	}
	p.fault = fault
	if fault != "" {
		w.Stats.Faults++
	}
	w.noteReq("send", n, r.ID, r.Op, r.Key, fault)
	unknownAt := w.now + timeout
	switch fault {
	case "lose-request":
		w.at(unknownAt, evReply{p: p, unknown: true})
	case "lose-reply":
		w.after(lat, evLand{p: p})
		w.at(unknownAt, evReply{p: p, unknown: true})
	case "late":
		w.at(unknownAt+w.uniform(0, w.P.MaxLate), evLand{p: p})
		w.at(unknownAt, evReply{p: p, unknown: true})
	case "slow":
		landAt := w.now + w.uniform(timeout/2, timeout+timeout/2)
		w.at(landAt, evLand{p: p})
		if back := landAt + lat; back < unknownAt {
			w.at(back, evReply{p: p})
		} else {
			w.at(unknownAt, evReply{p: p, unknown: true})
		}
	case "503":
		w.after(lat, evReply{p: p, unknown: true})
	case "503-applied":
		w.after(lat, evLand{p: p})
		w.after(lat+time.Millisecond, evReply{p: p, unknown: true})
	case "409":
		w.after(lat, evReply{p: p, refused: true})
	case "409-applied":
		w.after(lat, evLand{p: p})
		w.after(lat+time.Millisecond, evReply{p: p, refused: true})
	default:
		w.after(lat, evLand{p: p})
		w.after(lat+w.uniform(time.Millisecond, 10*time.Millisecond), evReply{p: p})
	}
}

func (w *World) land(p *pendingReq) {
	w.coresChanged = true
	r := p.req
	res := keeper.Execute(context.Background(), w.bucket.Bucket(), r)
	p.result, p.applied = res, true
	w.noteReq("land", w.nodes[p.node], r.ID, r.Op, r.Key, res.Outcome.String())
	if a, ok := w.actorOfStateKey(r.Key); ok && r.Op == ownership.OpPut {
		w.stateWritten(a, r, res)
	}
	if r.Op == ownership.OpPut && res.Outcome == ownership.Landed && strings.HasPrefix(r.Key, ownership.OwnersPrefix) {
		rec, derr := ownership.DecodeRecord(r.Body)
		if derr != nil {
			panic(fmt.Sprintf("sim: a core wrote an unreadable record: %v", derr))
		}
		a := ownership.Actor{Class: rec.Class, Name: rec.Name}
		before, had := w.records[a]
		w.records[a] = rec
		if rec.Held && (!had || before.Generation < rec.Generation || !before.Held) {
			w.taken(rec)
		}
	}
}

func (w *World) deliver(p *pendingReq, unknown, refused bool) {
	n := w.nodes[p.node]
	if !n.up || n.life != p.life {
		return
	}
	reply := p.result
	reply.ID = p.req.ID
	switch {
	case unknown:
		reply = ownership.Reply{ID: p.req.ID, Outcome: ownership.Unknown, Err: fmt.Errorf("no answer (%s)", p.fault)}
	case refused:
		reply = ownership.Reply{ID: p.req.ID, Outcome: ownership.Refused, Err: fmt.Errorf("409 conditional request conflict")}
	case !p.applied:
		panic("sim: reply before landing")
	}
	fl := n.inflight[p.req.ID]
	delete(n.inflight, p.req.ID)
	w.noteReq("reply", n, p.req.ID, p.req.Op, p.req.Key, reply.Outcome.String())
	if fl != nil && fl.parkedSent {
		w.exposureFrom(n, fl, reply)
	}
	w.step(n, reply)
}

// exposureFrom marks, from what the bucket answered, that a node's wake of a
// parked room had an unknown outcome or found another holder: a take of the
// room while its sockets stay here is then an exposure, not a violation.
func (w *World) exposureFrom(n *node, fl *inflight, reply ownership.Reply) {
	a, ok := ownership.ActorFromOwnerKey(fl.req.Key)
	if !ok {
		return
	}
	switch {
	case fl.req.Op == ownership.OpPut && reply.Outcome != ownership.Landed:
		if rec, err := ownership.DecodeRecord(fl.req.Body); err == nil && rec.Held {
			n.exposed[a] = true
		}
	case fl.req.Op == ownership.OpGet && reply.Outcome == ownership.Landed:
		if rec, err := ownership.DecodeRecord(reply.Body); err == nil && rec.Held && rec.Node != n.name {
			n.exposed[a] = true
		}
	}
}

// ---- clients, events, sockets ----

func (w *World) upNodes() []*node {
	var out []*node
	for _, n := range w.nodes {
		if n.up {
			out = append(out, n)
		}
	}
	return out
}

// servingPeers counts the nodes up, other than n, neither draining nor
// stopping.
func (w *World) servingPeers(n *node) int {
	k := 0
	for _, p := range w.upNodes() {
		if p != n && !p.draining && !p.stopping {
			k++
		}
	}
	return k
}

func (w *World) pickNode(not *node) *node {
	var c []*node
	for _, n := range w.upNodes() {
		if n != not {
			c = append(c, n)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}

func (w *World) newEvent() {
	end := w.P.Chaos + w.P.Heal
	if w.now >= end {
		return
	}
	w.nextEvent++
	ce := &clientEvent{id: w.nextEvent, room: w.rooms[w.rng.IntN(len(w.rooms))], born: w.now}
	w.events[ce.id] = ce
	w.Stats.Events++
	w.send(ce, nil)
	w.after(w.exp(w.P.EventEvery), evClient{})
}

// send delivers an event to a random up node (not `avoid`), as a balancer would.
func (w *World) send(ce *clientEvent, avoid *node) {
	n := w.pickNode(avoid)
	if n == nil {
		n = w.pickNode(nil)
	}
	if n == nil {
		w.retry(ce)
		return
	}
	ce.hops = 0
	w.noteEv("event", n, ce.id, ce.room, "")
	w.step(n, ownership.Acquire{Actor: ce.room, Ref: ce.id})
}

func (w *World) retry(ce *clientEvent) {
	if ce.alarm != nil {
		w.endDelivery(ce) // the next pass delivers it again
		return
	}
	ce.attempts++
	if ce.attempts > 60 {
		if !ce.take {
			w.Stats.GivenUp++
		}
		delete(w.events, ce.id)
		return
	}
	w.after(w.uniform(200*time.Millisecond, time.Second), evRetry{id: ce.id})
}

// refuse answers an attempt that ran with a refusal (the client retries,
// as it may: a refusal says the event took no effect), and checks that it
// took none.
func (w *World) refuse(ce *clientEvent, ev evOutput) {
	w.Stats.Refusals++
	w.truth.refused(w, attemptKey{ev.id, ev.attempt})
	w.retry(ce)
}

func (w *World) relay(from, to *node, ce *clientEvent) {
	ce.hops++
	if ce.hops > 5 || !to.up || w.cut[linkKey(from.id, to.id)] {
		w.noteEv("relay-x", from, ce.id, ce.room, string(to.name))
		w.retry(ce)
		return
	}
	w.Stats.Relays++
	w.after(w.uniform(time.Millisecond, 5*time.Millisecond), evArrive{node: to.id, life: to.life, id: ce.id})
}

func (w *World) granted(n *node, g ownership.Grant) {
	ce := w.events[g.Ref]
	w.truth.grant(w, g.Actor, n.inst, g.Gen)
	if ce == nil {
		return
	}
	r := n.resident[g.Actor]
	if r == nil || r.gen != g.Gen {
		r = &resident{gen: g.Gen, sealed: g.State}
		n.resident[g.Actor] = r
	}
	r.active = w.now
	// The event runs, then releases its output: that is when acting is checked.
	w.after(w.uniform(time.Millisecond, 20*time.Millisecond), evOutput{node: n.id, life: n.life, id: ce.id, attempt: ce.attempts, actor: g.Actor, gen: g.Gen})
}

func (w *World) routed(n *node, r ownership.Route) {
	ce := w.events[r.Ref]
	if ce == nil {
		return
	}
	t := w.nodeByName(r.Node)
	if t == nil || ce.alarm != nil {
		// An alarm is left to its holder's poller.
		w.retry(ce)
		return
	}
	w.noteEv("route", n, ce.id, r.Actor, string(r.Node))
	w.relay(n, t, ce)
}

func (w *World) refused(n *node, r ownership.Refuse) {
	ce := w.events[r.Ref]
	if ce == nil {
		return
	}
	w.noteEv("refused", n, ce.id, r.Actor, r.Reason)
	if r.Draining && ce.alarm == nil {
		// A draining node sends the event on to the peer its core names
		// (the ingress does), or the client to another node, as a balancer
		// would retry elsewhere; with no other node up, the client waits.
		other := w.nodeByName(r.Peer)
		if other == nil || !other.up {
			other = w.pickNode(n)
		}
		if other != nil && ce.attempts < 60 {
			ce.attempts++
			ce.hops = 0
			w.noteEv("redirect", other, ce.id, ce.room, "")
			w.step(other, ownership.Acquire{Actor: ce.room, Ref: ce.id})
			return
		}
	}
	w.retry(ce)
}

// output is the moment the event's response is released, once its commit
// landed: by the output gate's rule (ownership.Gate), it took effect, so it
// is released even when the hold may no longer act; it acts (for the
// check of two owners acting) only while it may.
func (w *World) output(n *node, ev evOutput, count uint64) {
	ce := w.events[ev.id]
	if ce == nil {
		return
	}
	may := n.core.MayAct(ev.actor, ev.gen, n.clock(w.now))
	if ownership.Gate(ownership.EventEnd{Wrote: true, Commit: ownership.Landed, MayAct: func() bool { return may }}) != ownership.GateRelease {
		w.noteEv("no-act", n, ce.id, ev.actor, "")
		w.refuse(ce, ev)
		return
	}
	if may {
		w.truth.act(w, ev.actor, n.inst, ev.gen)
	} else {
		w.noteEv("late-release", n, ce.id, ev.actor, "")
		w.Stats.LateReleases++
	}
	if ce.alarm != nil {
		w.alarmAnswered(n, ce, ev, true)
		return
	}
	w.acked[ev.actor] = max(w.acked[ev.actor], count)
	ce.served = true
	if _, scripted := w.served[ce.id]; scripted {
		w.served[ce.id] = servedAt{node: n.name, gen: ev.gen, at: w.now, ok: true}
	}
	if !ce.take {
		w.Stats.Served++
		w.truth.served(w, ce)
	}
	delete(w.events, ce.id)
	w.noteEv("act", n, ce.id, ev.actor, "g"+strconv.FormatUint(uint64(ev.gen), 10))
	r := n.resident[ev.actor]
	if r != nil && r.gen == ev.gen {
		r.active = w.now
		w.after(w.idleTimeout(), evIdle{node: n.id, life: n.life, actor: ev.actor, gen: ev.gen, active: w.now})
	}
	// A socket is accepted only under a hold that may act: the node that
	// holds its sockets is the room's home (an event released late opens
	// none).
	if may && !ce.take && w.chance(w.P.SocketChance) {
		w.nextSock++
		n.sockets[ev.actor] = append(n.sockets[ev.actor], w.nextSock)
		w.note("sock+", n, "%s s%d", ev.actor, w.nextSock)
		w.step(n, ownership.SocketOpened{Actor: ev.actor})
		w.after(w.uniform(500*time.Millisecond, 25*time.Second), evSockClose{node: n.id, life: n.life, actor: ev.actor, sock: w.nextSock})
	}
}

func (w *World) idleTimeout() time.Duration { return w.uniform(300*time.Millisecond, 3*time.Second) }

func (w *World) idle(n *node, ev evIdle) {
	r := n.resident[ev.actor]
	if r == nil || r.gen != ev.gen || r.active != ev.active {
		return
	}
	if r.busy {
		// An event is running: the director never idles an actor then.
		w.after(w.idleTimeout(), ev)
		return
	}
	delete(n.resident, ev.actor)
	w.truth.endHold(ev.actor, n.inst, ev.gen)
	w.note("idle", n, "%s g%d", ev.actor, ev.gen)
	w.step(n, ownership.Idle{Actor: ev.actor, Gen: ev.gen})
	if n.up {
		if _, ok := n.core.Parked(ev.actor); ok {
			n.exposed[ev.actor] = false
		}
	}
}

func (w *World) closeSocket(n *node, a ownership.Actor, sock uint64, why string) {
	list := n.sockets[a]
	for i, s := range list {
		if s == sock {
			n.sockets[a] = append(list[:i:i], list[i+1:]...)
			if len(n.sockets[a]) == 0 {
				delete(n.sockets, a)
			}
			w.note("sock-", n, "%s s%d %s", a, sock, why)
			w.step(n, ownership.SocketGone{Actor: a})
			return
		}
	}
}

func (w *World) closeSockets(n *node, c ownership.CloseSockets) {
	var rooms []ownership.Actor
	if c.All {
		for a := range n.sockets {
			rooms = append(rooms, a)
		}
		sort.Slice(rooms, func(i, j int) bool { return rooms[i].String() < rooms[j].String() })
	} else {
		rooms = []ownership.Actor{c.Actor}
	}
	for _, a := range rooms {
		for _, s := range append([]uint64(nil), n.sockets[a]...) {
			w.closeSocket(n, a, s, fmt.Sprintf("%d %s", c.Code, c.Reason))
		}
	}
}

func linkKey(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// observe traces what a core was fed and what it asked for.
func (w *World) observe(n *node, in ownership.Input, effects []ownership.Effect) {
	if w.trace == nil {
		return
	}
	for _, e := range effects {
		switch e := e.(type) {
		case ownership.Request, ownership.SetTimer, ownership.Count, ownership.SetGauge, ownership.Observe:
		case ownership.Report:
			fmt.Fprintf(w.trace, "%10.3fs %-3s %-10s %s %s %v\n", w.now.Seconds(), n.name, "report", e.Msg, e.Key, e.Err)
		default:
			fmt.Fprintf(w.trace, "%10.3fs %-3s %-10s %T %+v\n", w.now.Seconds(), n.name, "effect", e, e)
		}
	}
	_ = in
}
