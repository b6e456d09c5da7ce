package sockets

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/internal/gopool"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Limits an actor's requests are checked against.
const (
	// MaxTags is the number of tags a socket may carry.
	MaxTags = 10
	// MaxTagBytes is the length of one tag.
	MaxTagBytes = 256
	// MaxAttachment is the size of a socket's attachment.
	MaxAttachment = 16 << 10
	// MaxAutoResponse is the length of an auto-response's request and of
	// its response.
	MaxAutoResponse = 2048
	// MaxCloseReason is the length of a close reason (a control frame holds
	// 125 bytes, two of them the code).
	MaxCloseReason = 123
	// UndeliveredReason is the close reason of a socket whose message the
	// Sink could not hand to its actor (Sink.Message), with code 1012.
	UndeliveredReason = "actor unavailable on this node"
)

// Defaults of Config.
const (
	// DefaultMaxSockets is the node's socket limit unless configured.
	DefaultMaxSockets = 50000
	// DefaultMaxMessage is the message size limit unless configured.
	DefaultMaxMessage = 1 << 20
	// DefaultPingInterval and DefaultPongTimeout: how often sockets are
	// pinged, and how long one may stay silent after a ping, unless
	// configured.
	DefaultPingInterval = 25 * time.Second
	DefaultPongTimeout  = 10 * time.Second
	// DefaultSendQueueTotal is the bound on the bytes queued for all the
	// node's sockets unless configured (or lowered by the Go memory
	// limit, see Config.SendQueueTotal).
	DefaultSendQueueTotal = 256 << 20
)

// ID names one socket of this node. IDs are never reused by an Owner.
type ID uint64

func (id ID) String() string { return strconv.FormatUint(uint64(id), 10) }

// Sink receives what happens on sockets; the node implements it. See the
// package documentation for the order of calls and the goroutines they come
// from.
type Sink interface {
	// Opened: a socket of a was accepted (ownership.SocketOpened).
	Opened(a ownership.Actor)
	// Gone: a socket of a started closing or was freed, whichever came
	// first; exactly once per socket (ownership.SocketGone).
	Gone(a ownership.Actor)
	// Message: a data message arrived. The Owner does not keep data. An
	// error says it could not be handed to its actor here: the Owner
	// closes the socket with 1012 and UndeliveredReason, so that its
	// client connects again and sends it again, wherever the actor is by
	// then.
	Message(a ownership.Actor, id ID, text bool, data []byte) error
	// Close ends a socket whose close handshake ran or whose connection
	// dropped: clean is true with the code and reason of the peer's close
	// frame (1005 when it had no code), false with 1006 when the connection
	// ended without one.
	Close(a ownership.Actor, id ID, code int, reason string, clean bool)
	// Error ends a socket the node closed because of a fault: err matches
	// ErrMessageTooBig, ErrSlowReader, ErrPingTimeout, ErrProtocol,
	// ErrInvalidUTF8 or ErrInternal (errors.Is), and CloseCode(err) is the
	// code the client was sent.
	Error(a ownership.Actor, id ID, err error)
}

// Config is what an Owner runs with. Sink is required; the rest have
// defaults.
type Config struct {
	Sink Sink
	// MaxSockets bounds the sockets of the node. Zero: 50,000.
	MaxSockets int
	// MaxMessage bounds one message, in and out, in bytes; a bigger
	// incoming message closes its socket with 1009. Zero: 1 MiB.
	MaxMessage int
	// SendQueue bounds the bytes queued for one socket and not yet written;
	// a Send past it closes the socket with 1013 (a slow reader). It must be
	// at least MaxMessage. Zero: 4 MiB.
	SendQueue int
	// SendQueueTotal bounds the bytes queued for all the node's sockets
	// together and not yet written (each socket counts a broadcast it has
	// not written yet); past it the sockets that hold the most are closed
	// with 1013, the socket sending only if it is one of them (queued.go).
	// It must be at least SendQueue. Zero: DefaultSendQueueTotal (256 MiB),
	// or a quarter of the Go memory limit (GOMEMLIMIT) if that is less,
	// and never less than SendQueue.
	SendQueueTotal int
	// PingInterval is how often every socket is pinged. Zero: 25 s.
	PingInterval time.Duration
	// PongTimeout is how long after a ping a socket that has sent nothing
	// (no pong, no frame) is closed as dead. At most PingInterval.
	// Zero: 10 s, or PingInterval if that is shorter.
	PongTimeout time.Duration
	// WriteTimeout bounds one write to a client and the wait for its close
	// frame after ours. Zero: 10 s.
	WriteTimeout time.Duration
	// RetryAfter is what a refusal past MaxSockets suggests. Zero: 5 s.
	RetryAfter time.Duration
	// CheckOrigin decides whether a cross-origin upgrade is allowed. Nil:
	// only requests whose Origin host is the request's Host (gorilla's
	// default).
	CheckOrigin func(r *http.Request) bool
	// Clock gives the time of auto-responses. Nil: time.Now.
	Clock func() time.Time
	// Logger: nil logs nothing.
	Logger *slog.Logger
	// Registerer is where the metrics are registered (shared when already
	// there). Nil: kept but not exported.
	Registerer prometheus.Registerer
	// NoIOUring makes a broadcast write each socket with its own write(2)
	// instead of submitting them together through an io_uring (batch.go).
	// Without io_uring (not Linux, refused by the kernel or a seccomp
	// filter) the Owner does so anyway, and logs why once.
	NoIOUring bool
	// Dial, if set, connects an outbound socket (Owner.Dial) to the
	// address of its URL ("host:port"); it is the node's egress dialer,
	// which refuses any address its allow-list does not name. Nil: the
	// node opens no outbound sockets (ErrNoDial).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTLS configures the TLS of wss:// dials. Nil: the system's roots.
	DialTLS *tls.Config
	// DialTimeout bounds an outbound socket's dial and handshake. Zero:
	// 10 s.
	DialTimeout time.Duration
	// Failed, if set, is told of each failure of the socket owner of one
	// actor (a panic recovered while acting for a's sockets; op says
	// where, as the metric's label: failure.go), once it is logged and
	// counted, before a's sockets close with 1011. It must not block.
	Failed func(a ownership.Actor, op string)

	// faults, set by tests only, is called at each point where a failure
	// can be injected (Owner.fault); its panic is that failure.
	faults func(a ownership.Actor, op string)
}

// Validate reports bounds New cannot run with (the Sink is New's to
// check).
func (c Config) Validate() error {
	var errs []error
	if c.MaxSockets < 0 || c.MaxMessage < 0 || c.SendQueue < 0 || c.SendQueueTotal < 0 {
		errs = append(errs, errors.New("max sockets, max message, send queue and send queue total must not be negative"))
	}
	if c.PingInterval < 0 || c.PongTimeout < 0 || c.WriteTimeout < 0 || c.RetryAfter < 0 || c.DialTimeout < 0 {
		errs = append(errs, errors.New("ping interval, pong timeout, write timeout, retry after and dial timeout must not be negative"))
	}
	d := c.withDefaults()
	if d.SendQueue < d.MaxMessage {
		errs = append(errs, fmt.Errorf("send queue (%d bytes) is smaller than max message (%d bytes): a largest message could never be sent", d.SendQueue, d.MaxMessage))
	}
	if d.SendQueueTotal < d.SendQueue {
		errs = append(errs, fmt.Errorf("send queue total (%d bytes) is smaller than the send queue of one socket (%d bytes)", d.SendQueueTotal, d.SendQueue))
	}
	if d.PongTimeout > d.PingInterval {
		errs = append(errs, fmt.Errorf("pong timeout %v is longer than the ping interval %v", d.PongTimeout, d.PingInterval))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sockets config: %w", err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxSockets == 0 {
		c.MaxSockets = DefaultMaxSockets
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.SendQueue == 0 {
		c.SendQueue = max(4<<20, c.MaxMessage)
	}
	if c.SendQueueTotal == 0 {
		// debug.SetMemoryLimit(-1) reads the limit (math.MaxInt64 if none).
		c.SendQueueTotal = max(int(min(DefaultSendQueueTotal, debug.SetMemoryLimit(-1)/4)), c.SendQueue)
	}
	if c.PingInterval == 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.PongTimeout == 0 {
		c.PongTimeout = min(DefaultPongTimeout, c.PingInterval)
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = 5 * time.Second
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Errors callers branch on (errors.Is).
var (
	// ErrTooManySockets: the node holds MaxSockets sockets; Accept answered
	// 503 with Retry-After.
	ErrTooManySockets = errors.New("too many sockets on this node")
	// ErrShutDown: the Owner is shutting down; Accept answered 503.
	ErrShutDown = errors.New("socket owner shut down")
	// ErrHandshake: the request is not a WebSocket upgrade Accept can take;
	// Accept answered with a 4xx (gorilla/websocket's answer).
	ErrHandshake = errors.New("websocket handshake refused")
	// ErrInvalid: an argument breaks a documented limit (tags, attachment,
	// auto-response, close code or reason, message size).
	ErrInvalid = errors.New("invalid socket request")
	// ErrUnknownSocket: no socket of that actor has that ID here (never
	// accepted, belongs to another actor, or freed).
	ErrUnknownSocket = errors.New("unknown socket")
	// ErrClosing: the socket is closing; nothing more can be sent on it.
	ErrClosing = errors.New("socket closing")
)

// Owner owns the node's sockets. Create it with New; end it with Shutdown.
type Owner struct {
	cfg      Config
	log      *slog.Logger
	m        *metrics
	upgrader websocket.Upgrader
	nextID   atomic.Uint64
	stamp    uint64         // see Stamp
	nextDial atomic.Uint64  // the last outbound socket's ID, from a random start (DialedBit)
	wg       sync.WaitGroup // readers, writers and aborts of every socket
	stop     chan struct{}  // ends the ping loop
	writers  *gopool.Pool   // runs socket.write: writers are reused
	rings    *rings         // a broadcast's sends in one system call (batch.go)
	pingDone chan struct{}
	// queued: the bytes every socket holds until written, and those kept
	// for sockets being accepted (queued.go); shedding: held while a shed
	// picks the sockets it closes.
	queued   atomic.Int64
	shedding sync.Mutex
	// writerStopped, if set (by tests, before any socket is accepted), is
	// called each time a socket's writer goroutine stops, once it has
	// cleared socket.writing.
	writerStopped func()
	// faults is Config.faults: nil but in tests.
	faults func(a ownership.Actor, op string)

	// rooms holds each actor's sockets (rooms.go): what acts for one actor
	// takes its room's lock only. held counts the slots reserved or held,
	// at most MaxSockets. allMu is taken for writing by what acts on every
	// room at once (a CloseAll, Shutdown), and for reading by an accept
	// while it adds its socket, so that an accept either sees such a close
	// or is among the sockets it closes. closed is set under allMu.
	rooms  *roomIndex
	held   atomic.Int64
	allMu  sync.RWMutex
	closed atomic.Bool
	// wheel spreads the sockets over the ping loop's slots (ping.go).
	wheel [wheelSlots]wheelSlot
}

// wheelSlot is one slot of the ping wheel.
type wheelSlot struct {
	mu      sync.Mutex
	sockets map[ID]*socket
}

// writeBuffers is shared by every Owner: a socket holds a write buffer only
// while it writes a message.
var writeBuffers sync.Pool

// readBufferSize is each socket's own read buffer. Small: a large message is
// read past it straight into its destination, and an idle socket keeps it.
// Invariant: not 0, so that gorilla reads through the connection Hijack
// returns (hijackWriter), which judges close frames, and never through
// net/http's buffered reader of the raw connection.
const readBufferSize = 256

// New validates cfg, registers the metrics and starts the ping loop.
func New(cfg Config) (*Owner, error) {
	if cfg.Sink == nil {
		return nil, errors.New("sockets config: no sink")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	o := &Owner{
		cfg: cfg,
		log: cfg.Logger.With(slog.String("component", "sockets")),
		m:   m,
		upgrader: websocket.Upgrader{
			ReadBufferSize:  readBufferSize,
			WriteBufferSize: 4096,
			WriteBufferPool: &writeBuffers,
			CheckOrigin:     cfg.CheckOrigin,
		},
		stop:     make(chan struct{}),
		writers:  gopool.New(maxIdleWriters, writerIdle),
		pingDone: make(chan struct{}),
		rooms:    newRoomIndex(),
		faults:   cfg.faults,
		stamp:    newStamp(),
	}
	o.nextDial.Store(newStamp() >> 8)
	o.rings = newRings(cfg.NoIOUring, o.log)
	for i := range o.wheel {
		o.wheel[i].sockets = map[ID]*socket{}
	}
	go o.pingLoop()
	return o, nil
}

// Accept upgrades r to a WebSocket owned by the node on behalf of actor a,
// with tags (at most MaxTags, each 1 to MaxTagBytes bytes) to List it by.
// Call it from the actor's HTTP handler; the handler must not write to w
// afterwards, whatever the result.
//
// On error Accept has answered the request already: 503 with Retry-After
// past MaxSockets (ErrTooManySockets) or while shutting down (ErrShutDown),
// 400 with the reason for invalid tags or actor (ErrInvalid), gorilla's
// 4xx for a request that is no WebSocket handshake (ErrHandshake). Every
// refusal is decided before the protocol switches.
func (o *Owner) Accept(w http.ResponseWriter, r *http.Request, a ownership.Actor, tags []string) (ID, error) {
	if err := checkAccept(a, tags); err != nil {
		o.m.refused.WithLabelValues("invalid").Inc()
		http.Error(w, "socket refused by the actor: "+err.Error(), http.StatusBadRequest)
		return 0, err
	}
	if !o.takeSlots(1) {
		if o.closed.Load() {
			o.m.refused.WithLabelValues("shut_down").Inc()
			o.unavailable(w, "node stopping")
			return 0, fmt.Errorf("accept socket for %s: %w", a, ErrShutDown)
		}
		o.m.refused.WithLabelValues("max_sockets").Inc()
		o.unavailable(w, "too many sockets on this node")
		return 0, fmt.Errorf("accept socket for %s: %w (limit %d)", a, ErrTooManySockets, o.cfg.MaxSockets)
	}
	o.allMu.RLock()
	if o.closed.Load() {
		o.allMu.RUnlock()
		o.held.Add(-1)
		o.m.refused.WithLabelValues("shut_down").Inc()
		o.unavailable(w, "node stopping")
		return 0, fmt.Errorf("accept socket for %s: %w", a, ErrShutDown)
	}
	o.wg.Add(1) // the reader's, or released below
	p := &pendingAccept{tags: tags}
	rm := o.rooms.lock(a)
	rm.pending = append(rm.pending, p)
	rm.mu.Unlock()
	o.allMu.RUnlock()

	hw := &hijackWriter{ResponseWriter: w}
	conn, err := o.upgrader.Upgrade(hw, r, nil)
	if err != nil {
		rm.mu.Lock()
		rm.dropPendingLocked(p)
		o.hold(-p.bytes) // what was kept for it
		rm.mu.Unlock()
		o.rooms.dropIfEmpty(rm)
		o.held.Add(-1)
		o.wg.Done()
		o.m.refused.WithLabelValues("handshake").Inc()
		return 0, fmt.Errorf("accept socket for %s: %w: %w", a, ErrHandshake, err)
	}
	s := o.newSocket(ID(o.nextID.Add(1)), rm, tags, conn)
	s.wc = hw.wc
	o.cfg.Sink.Opened(a)
	o.m.accepted.Inc()
	o.admit(s, rm, p)
	return s.id, nil
}

// admit makes s, accepted or dialed while p kept its place in room rm,
// visible: in its room, on the ping wheel, its reader started; then acts
// on what happened to p meanwhile (a close, its room's failure, what was
// broadcast to it).
func (o *Owner) admit(s *socket, rm *actorSockets, p *pendingAccept) {
	o.m.open.Inc()
	o.allMu.RLock()
	rm.mu.Lock()
	rm.dropPendingLocked(p)
	// What was broadcast during the handshake goes first, before anything
	// sent once the socket is visible (s is not shared yet). Its bytes are
	// in the node's total since they were kept. The room cannot have been
	// dropped: p kept it from being empty.
	s.queue, s.queued = p.frames, p.bytes
	rm.sockets[s.id] = s
	code, reason := p.closeCode, p.closeReason
	rm.mu.Unlock()
	o.allMu.RUnlock()
	ws := &o.wheel[s.id%wheelSlots]
	ws.mu.Lock()
	ws.sockets[s.id] = s
	ws.mu.Unlock()

	go s.read()
	switch {
	case p.failed: // its room failed while it was upgraded
		s.fail(ErrInternal)
	case code != 0: // its actor's or every socket was closed while it was upgraded
		_ = s.close(code, reason, reason)
	case p.overflow:
		s.fail(ErrSlowReader)
	case len(p.frames) > 0:
		s.mu.Lock()
		if len(s.queue) > 0 {
			s.startWriterLocked()
		}
		s.mu.Unlock()
	}
}

// takeSlots takes n slots of MaxSockets, unless they are not there or the
// Owner is shut down.
func (o *Owner) takeSlots(n int64) bool {
	for {
		held := o.held.Load()
		if o.closed.Load() || held+n > int64(o.cfg.MaxSockets) {
			return false
		}
		if o.held.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// pendingAccept is an upgrade under way for an actor: the broadcasts it
// must not miss (see Owner.pending).
type pendingAccept struct {
	tags     []string
	frames   []frame
	bytes    int
	overflow bool // more than a send queue's worth: closed with 1013 once open
	// closeCode, if not 0, and closeReason: closed once open, by a
	// CloseActor or CloseAll made during the upgrade (the first one's).
	closeCode   int
	closeReason string
	// failed: the room failed during the upgrade; closed with 1011 once
	// open (failure.go).
	failed bool
	// dial: an outbound socket being opened (Dial), which keeps no
	// broadcast.
	dial bool
}

func (p *pendingAccept) closeWith(code int, reason string) {
	if p.closeCode == 0 {
		p.closeCode, p.closeReason = code, reason
	}
}

// keep queues a broadcast for the socket being accepted.
func (p *pendingAccept) keep(kind frameKind, data []byte, limit int) {
	if p.overflow {
		return
	}
	if p.bytes > 0 && p.bytes+len(data) > limit {
		p.frames, p.bytes, p.overflow = nil, 0, true
		return
	}
	p.frames = append(p.frames, frame{kind: kind, data: data})
	p.bytes += len(data)
}

// dropPendingLocked removes p from the room's upgrades under way.
func (r *actorSockets) dropPendingLocked(p *pendingAccept) {
	if i := slices.Index(r.pending, p); i >= 0 {
		r.pending = slices.Delete(r.pending, i, i+1)
	}
}

func (o *Owner) unavailable(w http.ResponseWriter, msg string) {
	secs := int(math.Ceil(o.cfg.RetryAfter.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	http.Error(w, msg, http.StatusServiceUnavailable)
}

func checkAccept(a ownership.Actor, tags []string) error {
	if a.Class == "" || a.Name == "" {
		return fmt.Errorf("%w: actor %q has an empty class or name", ErrInvalid, a)
	}
	return CheckTags(tags)
}

// CheckTags refuses tags a socket may not carry (ErrInvalid): over MaxTags,
// or one empty or over MaxTagBytes.
func CheckTags(tags []string) error {
	if len(tags) > MaxTags {
		return fmt.Errorf("%w: %d tags, at most %d allowed", ErrInvalid, len(tags), MaxTags)
	}
	for i, t := range tags {
		if t == "" || len(t) > MaxTagBytes {
			return fmt.Errorf("%w: tag %d is %d bytes, a tag has 1 to %d", ErrInvalid, i, len(t), MaxTagBytes)
		}
	}
	return nil
}

// free removes s from its room and the ping wheel once its reader has
// ended.
func (o *Owner) free(s *socket) {
	r := s.room
	r.mu.Lock()
	delete(r.sockets, s.id)
	empty := r.emptyLocked()
	r.mu.Unlock()
	if empty {
		o.rooms.dropIfEmpty(r)
	}
	ws := &o.wheel[s.id%wheelSlots]
	ws.mu.Lock()
	delete(ws.sockets, s.id)
	ws.mu.Unlock()
	o.held.Add(-1)
	o.m.open.Dec()
}

// lookup returns a's socket id, or ErrUnknownSocket.
func (o *Owner) lookup(a ownership.Actor, id ID) (*socket, error) {
	var s *socket
	if r := o.rooms.find(a); r != nil {
		r.mu.Lock()
		s = r.sockets[id]
		r.mu.Unlock()
	}
	if s == nil {
		return nil, fmt.Errorf("socket %v of %s: %w", id, a, ErrUnknownSocket)
	}
	return s, nil
}

// sockets returns a's sockets, in no order.
func (o *Owner) sockets(a ownership.Actor) []*socket {
	r := o.rooms.find(a)
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.socketsLocked(nil)
}

// allSockets returns every socket of the node, in no order.
func (o *Owner) allSockets() []*socket {
	var out []*socket
	o.rooms.each(func(r *actorSockets) { out = r.socketsLocked(out) })
	return out
}

// socketsLocked appends the room's sockets to out.
func (r *actorSockets) socketsLocked(out []*socket) []*socket {
	if out == nil {
		out = make([]*socket, 0, len(r.sockets))
	}
	for _, s := range r.sockets {
		out = append(out, s)
	}
	return out
}

// Reserve takes n slots of MaxSockets for descriptors that carry a
// WebSocket the node does not own (a relay to the node that owns it holds
// two: the client's connection and the one to the peer), until release is
// called. Past MaxSockets, or while shutting down, it takes none and says
// why (ErrTooManySockets, ErrShutDown).
func (o *Owner) Reserve(n int) (release func(), err error) {
	if !o.takeSlots(int64(n)) {
		if o.closed.Load() {
			return nil, ErrShutDown
		}
		o.m.refused.WithLabelValues("max_sockets").Inc()
		return nil, fmt.Errorf("%w (limit %d)", ErrTooManySockets, o.cfg.MaxSockets)
	}
	var once sync.Once
	return func() { once.Do(func() { o.held.Add(-int64(n)) }) }, nil
}

// Held returns the number of socket slots held now (open and closing).
func (o *Owner) Held() int { return int(o.held.Load()) }

// CloseActor closes every open socket of a with code and reason (1012 for
// a drain, a move, a lapse or a stop: ownership.CloseSockets), after what
// is queued for each, and each socket of a being accepted as soon as it
// is open. reason is also the metric label of the closes, so it must come
// from a small fixed set. It returns how many open sockets it closed.
func (o *Owner) CloseActor(a ownership.Actor, code int, reason string) int {
	return o.closeEach(a, false, code, reason)
}

// CloseAll closes every socket of the node, as CloseActor does.
func (o *Owner) CloseAll(code int, reason string) int {
	return o.closeEach(ownership.Actor{}, true, code, reason)
}

// closeEach closes a's sockets, or every socket if all: the open ones
// now, the ones being accepted once open. Both are taken under one lock,
// so that an accept either sees the close or is among the open sockets.
func (o *Owner) closeEach(a ownership.Actor, all bool, code int, reason string) int {
	if err := checkClose(code, reason); err != nil {
		o.log.Warn("close sockets: refused", slog.Any("err", err))
		return 0
	}
	var open []*socket
	mark := func(r *actorSockets) {
		for _, p := range r.pending {
			p.closeWith(code, reason)
		}
		open = r.socketsLocked(open)
	}
	if all {
		o.allMu.Lock()
		o.rooms.each(mark)
		o.allMu.Unlock()
	} else if r := o.rooms.find(a); r != nil {
		// A room dropped meanwhile (dead) held nothing to close; one made
		// after it is for sockets accepted after this close.
		r.mu.Lock()
		if !r.dead {
			mark(r)
		}
		r.mu.Unlock()
	}
	op := opCloseActor
	if all {
		op = opCloseAll
	}
	n := 0
	for _, s := range open {
		if o.closeOne(s, op, code, reason) {
			n++
		}
	}
	return n
}

// closeOne closes s for closeEach. It is a boundary of s's room: a panic
// is the room's failure (failure.go), and the others are closed all the
// same.
func (o *Owner) closeOne(s *socket, op string, code int, reason string) bool {
	defer o.containSocket(s, op)
	o.fault(s.actor, op)
	return s.close(code, reason, reason) == nil
}

// Shutdown refuses new sockets, closes every socket with 1012, waits until
// every slot is freed or ctx ends (then it drops the connections that are
// left and waits for their goroutines), and stops the ping loop. It
// returns ctx's error when it had to drop connections.
func (o *Owner) Shutdown(ctx context.Context) error {
	o.allMu.Lock()
	already := o.closed.Swap(true)
	o.allMu.Unlock()
	o.CloseAll(ownership.CloseServiceRestart, "stop")
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("shut sockets down: %d left open: %w", o.Held(), ctx.Err())
		for _, s := range o.allSockets() {
			s.drop()
		}
		<-done // every connection is closed: readers and writers return
	}
	if !already {
		close(o.stop)
		o.writers.Stop()
		o.rings.close()
	}
	<-o.pingDone
	return err
}
