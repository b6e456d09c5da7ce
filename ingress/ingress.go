package ingress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/peer"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// MaxNameLen bounds a class or actor name, in bytes.
const MaxNameLen = 256

// DefaultHTTPIdleTimeout is how long an idle keep-alive connection is kept
// unless node.Config says otherwise.
const DefaultHTTPIdleTimeout = 60 * time.Second

// MaxHeaderBytes bounds a request's header. Go's own default (1 MiB) on
// every admitted connection would let headers alone take gigabytes.
const MaxHeaderBytes = 64 << 10

// answerTime is what a request's event may take, within the write
// deadline of its answer (see Handler.writeTimeout).
const answerTime = 2 * time.Minute

// DefaultFailoverWait is Config.FailoverWait's default: more than the
// default ttl + grace + lease period (10 s + 5 s + 2.5 s), so that a
// failover of a holder that died takes no request down.
const DefaultFailoverWait = 20 * time.Second

// DefaultMaxBody bounds a request body unless Config says otherwise.
const DefaultMaxBody = 1 << 20

// Keeper is what the ingress needs of the ownership keeper: its status
// (for /readyz), and what the peer client needs of it.
type Keeper interface {
	peer.Keeper
}

// Host is what the ingress hands events to: the actors side, which
// acquires each event's hold, delivers it and retries behind it
// (actorhost.Host has it). The ingress learns the answer, or which node holds
// the actor (then it forwards or relays).
type Host interface {
	Dispatch(ctx context.Context, a ownership.Actor, req *actors.Request) (*actors.Response, *actorhost.Elsewhere, error)
	// Take acquires the actor and makes it resident without an event (a
	// move's target takes it).
	Take(ctx context.Context, a ownership.Actor) (*actorhost.Elsewhere, error)
	// Routable says whether an event of a class this node does not serve
	// can go to a node that does (actorhost.Host.Routable).
	Routable(ctx context.Context, a ownership.Actor) error
}

// Config is what a Handler serves with. Keeper, Host and Registry are
// required.
type Config struct {
	// Node is this node's id, sent in ForwardedHeader; Instance this
	// start's, which the peer requests it takes must be signed for
	// (ForwardedInstanceHeader).
	Node     ownership.NodeID
	Instance ownership.InstanceID
	Keeper   Keeper
	Host     Host
	Registry *actors.Registry
	// Front, if set, serves every request outside /actor/ and the node's
	// own paths (front.go). Nil: those are 404.
	Front actors.Front
	// Gatherer is what /metrics serves: the registry the keeper registers
	// its metrics in. Nil: no /metrics (404).
	Gatherer prometheus.Gatherer
	// Logger: nil logs nothing.
	Logger *slog.Logger
	// MaxBody bounds a request body in bytes. Zero: DefaultMaxBody.
	MaxBody int64
	// Peers sends events to the nodes that hold their actors, and relays
	// WebSockets to them. Required.
	Peers *peer.Client
	// Sockets takes the WebSocket upgrades actors accept. Nil: an accepted
	// upgrade is answered 501.
	Sockets *sockets.Owner
	// ClusterKey, when set (at least peer.MinClusterKey bytes), is
	// required of the peer requests this node takes (package peer; Peers
	// signs what it sends with it). Nil: peer requests are not checked.
	ClusterKey []byte
	// MaxBodyInflight bounds the bytes of all request bodies held at once;
	// BodyTimeout and BodyMinRate how long a body may take to arrive (see
	// body.go). Zero: DefaultMaxBodyInflight, DefaultBodyTimeout and
	// DefaultBodyMinRate.
	MaxBodyInflight int64
	BodyTimeout     time.Duration
	BodyMinRate     int64
	// Registerer takes the handler's metrics. Nil: not registered.
	Registerer prometheus.Registerer
	// MaxConns bounds the HTTP connections served as usual, and
	// OverflowConns those admitted past it for health checks and peers
	// (conns.go; internal/budget divides the file limit into them). Zero
	// MaxConns: connections are not limited. HTTPIdleTimeout closes a
	// keep-alive connection idle this long (zero: DefaultHTTPIdleTimeout).
	// They shape the server Server returns.
	MaxConns        int
	OverflowConns   int
	HTTPIdleTimeout time.Duration
	// FailoverWait bounds how long a request waits for an actor whose
	// holder does not take connections: for the holder to answer, or for
	// its record to be freed when peers fence it (after ttl + grace). Then
	// it is answered 503 with a Retry-After estimating when the holder is
	// taken for dead. Zero: DefaultFailoverWait.
	FailoverWait time.Duration
	// Status, when set, serves GET /status (the node's status page).
	Status http.Handler
	// PeerStatus, when set and Status is not, serves GET /status to a
	// request signed with ClusterKey only (SignStatusRequest): `wasmkeep
	// cluster status` reads each node's counts as they are now with it.
	// Any other request for /status is not found.
	PeerStatus http.Handler
	// Debug, when set, serves GET /debug/ paths (the node's tree at
	// /debug/tree).
	Debug http.Handler
	// KeyWindow is how long an actor remembers a client's Idempotency-Key.
	// Zero: actorhost.DefaultKeyWindow.
	KeyWindow time.Duration
}

// Handler serves a node's HTTP entry.
type Handler struct {
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	bodies *bodies
	// front serves the paths outside /actor/ (front.go); nil: none.
	front atomic.Pointer[frontBox]
	// writeTimeout bounds a request's time until its answer is written:
	// the event's own time (calls wait up to their timeout) and MaxBody at
	// BodyMinRate, past its body's deadline.
	writeTimeout time.Duration
	conns        *connLimiter // nil: connections are not limited (see conns.go)
	peers        *peer.Client
	verifier     *peer.Verifier // nil without a cluster key
	answers      answerCounts
}

// answerCounts counts the answers to actors' events by what they mean
// (wasmkeep_event_answers_total{answer}).
type answerCounts struct {
	success, replayed, refused, unknown, failed, forwarded prometheus.Counter
}

func newAnswerCounts(reg prometheus.Registerer) (answerCounts, error) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_event_answers_total",
		Help: "Answers to actors' events, by what they mean: success (the event ran here and is durable), replayed (the first answer of an event key run before), " +
			"refused (503: it took no effect), unknown (504: it may have taken effect), failed (an error: 4xx or 5xx of the node, not the class), " +
			"forwarded (answered by the node that holds the actor, and relayed).",
	}, []string{"answer"})
	a := answerCounts{success: v.WithLabelValues("success"), replayed: v.WithLabelValues("replayed"), refused: v.WithLabelValues("refused"),
		unknown: v.WithLabelValues("unknown"), failed: v.WithLabelValues("failed"), forwarded: v.WithLabelValues("forwarded")}
	if reg != nil {
		if err := reg.Register(v); err != nil {
			return a, err
		}
	}
	return a, nil
}

// Validate reports bounds New cannot run with (the wiring: Keeper, Host,
// Registry and Peers, is New's to check).
func (c Config) Validate() error {
	var errs []error
	if len(c.ClusterKey) > 0 && len(c.ClusterKey) < peer.MinClusterKey {
		errs = append(errs, fmt.Errorf("cluster key of %d bytes, under %d", len(c.ClusterKey), peer.MinClusterKey))
	}
	if c.MaxBody < 0 || c.MaxBodyInflight < 0 || c.BodyTimeout < 0 || c.BodyMinRate < 0 {
		errs = append(errs, fmt.Errorf("a body bound is negative (max body %d, in flight %d, timeout %v, min rate %d)",
			c.MaxBody, c.MaxBodyInflight, c.BodyTimeout, c.BodyMinRate))
	} else if d := c.withDefaults(); d.MaxBodyInflight < d.MaxBody {
		errs = append(errs, fmt.Errorf("bodies in flight bounded to %d bytes, under the largest body (%d): that body could never be read", d.MaxBodyInflight, d.MaxBody))
	}
	if c.FailoverWait < 0 {
		errs = append(errs, fmt.Errorf("failover wait %v is negative", c.FailoverWait))
	}
	if c.MaxConns < 0 || c.OverflowConns < 0 || c.HTTPIdleTimeout < 0 || c.KeyWindow < 0 {
		errs = append(errs, errors.New("max connections, overflow connections, the HTTP idle timeout and the key window must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ingress config: %w", err)
	}
	return nil
}

// withDefaults is c with each zero bound set to its default.
func (c Config) withDefaults() Config {
	c.MaxBody = cmp.Or(c.MaxBody, DefaultMaxBody)
	c.MaxBodyInflight = cmp.Or(c.MaxBodyInflight, DefaultMaxBodyInflight)
	c.BodyTimeout = cmp.Or(c.BodyTimeout, DefaultBodyTimeout)
	c.BodyMinRate = cmp.Or(c.BodyMinRate, DefaultBodyMinRate)
	c.FailoverWait = cmp.Or(c.FailoverWait, DefaultFailoverWait)
	return c
}

// New validates cfg and returns the node's handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Keeper == nil || cfg.Host == nil || cfg.Registry == nil || cfg.Peers == nil {
		return nil, errors.New("ingress config: keeper, host, registry and peers are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	bodies, err := newBodies(cfg.MaxBodyInflight, cfg.BodyTimeout, cfg.BodyMinRate, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, log: cfg.Logger.With(slog.String("component", "ingress")), mux: http.NewServeMux(),
		bodies: bodies, peers: cfg.Peers,
		writeTimeout: answerTime + cfg.BodyTimeout + 2*time.Duration(cfg.MaxBody)*time.Second/time.Duration(cfg.BodyMinRate)}
	if len(cfg.ClusterKey) > 0 {
		h.verifier = peer.NewVerifier(cfg.ClusterKey, cfg.Node, cfg.Instance)
	}
	if cfg.MaxConns > 0 {
		if h.conns, err = newConnLimiter(cfg.MaxConns, cfg.OverflowConns, cfg.Registerer, h.log); err != nil {
			return nil, err
		}
	}
	if h.answers, err = newAnswerCounts(cfg.Registerer); err != nil {
		return nil, err
	}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { text(w, http.StatusOK, "ok") })
	h.mux.HandleFunc("GET /readyz", h.serveReady)
	if cfg.Gatherer != nil {
		h.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	if cfg.Debug != nil {
		h.mux.Handle("GET /debug/", cfg.Debug)
	}
	if cfg.Status != nil {
		h.mux.Handle("GET /status", cfg.Status)
	} else if cfg.PeerStatus != nil && len(cfg.ClusterKey) > 0 {
		h.mux.Handle("GET /status", h.signedOnly(cfg.PeerStatus))
	}
	if cfg.Front != nil {
		h.SetFront(cfg.Front)
	}
	h.mux.HandleFunc("/", h.serveFront)
	return h, nil
}

// Server is the HTTP server the node serves h with: its header, idle and
// connection bounds (conns.go) set, its errors logged as warnings.
func (h *Handler) Server() *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       cmp.Or(h.cfg.HTTPIdleTimeout, DefaultHTTPIdleTimeout),
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	}
	if h.conns != nil {
		srv.ConnContext, srv.ConnState = h.conns.ConnContext, h.conns.ConnState
	}
	return srv
}

// ServeHTTP serves one request; a panic answers 500 and is logged.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			h.log.Error("request panicked", slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			text(w, http.StatusInternalServerError, "internal error")
		}
	}()
	if r.ContentLength != 0 && !strings.HasPrefix(r.URL.Path, "/actor/") && h.front.Load() == nil {
		refuseBody(w) // no route but /actor/ and the front reads a body
	}
	// The answer, however large, must be taken at the least rate too: a
	// client that never reads it would hold its handler. A WebSocket sets
	// its own deadlines: an upgrade on a connection an earlier request used
	// must not keep that request's.
	deadline := time.Now().Add(h.writeTimeout)
	if websocket.IsWebSocketUpgrade(r) {
		deadline = time.Time{}
	}
	_ = http.NewResponseController(w).SetWriteDeadline(deadline)
	if overflowConn(r) && h.serveOverflow(w, r) {
		return
	}
	// /actor/ paths are taken before the mux, which would clean them
	// ("//" or "..") and redirect: names are validated, not rewritten.
	if strings.HasPrefix(r.URL.Path, "/actor/") {
		h.serveActor(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// serveReady says whether balancers should send requests here: the lease
// is valid and the node does not hand its actors over (a drain with a live
// peer; a stuck drain serves, and is ready).
func (h *Handler) serveReady(w http.ResponseWriter, _ *http.Request) {
	st := h.cfg.Keeper.Status()
	switch {
	case !st.LeaseValid:
		text(w, http.StatusServiceUnavailable, "node lease not valid")
	case st.Draining && !st.DrainStuck:
		text(w, http.StatusServiceUnavailable, "node draining")
	default:
		text(w, http.StatusOK, "ready")
	}
}

func text(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

func unavailable(w http.ResponseWriter, retry time.Duration, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(retry, time.Second).Seconds()))))
	text(w, http.StatusServiceUnavailable, msg)
}

// outcomeUnknown answers an event that may have taken effect, as this
// node cannot tell (see actorhost.OutcomeHeader).
func outcomeUnknown(w http.ResponseWriter, msg string) {
	w.Header().Set(actorhost.OutcomeHeader, "unknown")
	text(w, http.StatusGatewayTimeout, "outcome unknown: "+msg+"; the event may have taken effect: retry it only with the same Idempotency-Key")
}

// parseActorPath splits the escaped path /actor/<class>/<name>[/rest].
func parseActorPath(escaped string) (a ownership.Actor, rest string, err error) {
	p := strings.TrimPrefix(escaped, "/actor/")
	parts := strings.SplitN(p, "/", 3)
	if len(parts) < 2 {
		return a, "", errors.New("want /actor/<class>/<name>[/rest]")
	}
	if a.Class, err = validName("class", parts[0]); err != nil {
		return a, "", err
	}
	if a.Name, err = validName("name", parts[1]); err != nil {
		return a, "", err
	}
	if len(parts) == 3 {
		if rest, err = url.PathUnescape("/" + parts[2]); err != nil {
			return a, "", fmt.Errorf("path: %w", err)
		}
	}
	return a, rest, nil
}

func validName(what, escaped string) (string, error) {
	s, err := url.PathUnescape(escaped)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if err := checkName(what, s); err != nil {
		return "", err
	}
	return s, nil
}

// ValidClassName reports why name (unescaped, as a registry holds it) is
// not a class name that /actor/<class>/<name> can address, or nil.
func ValidClassName(name string) error { return checkName("class", name) }

// checkName checks an unescaped class or actor name.
func checkName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%s is %d bytes, over %d", what, len(s), MaxNameLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not UTF-8", what)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("%s holds a control character", what)
	}
	return nil
}

func (h *Handler) serveActor(w http.ResponseWriter, r *http.Request) {
	// Refused before its body is read: the body is refused too.
	refused := func(status int, msg string) {
		if r.ContentLength != 0 {
			refuseBody(w)
		}
		text(w, status, msg)
	}
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, PUT, DELETE")
		refused(http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	a, rest, err := parseActorPath(r.URL.EscapedPath())
	if err != nil {
		refused(http.StatusBadRequest, "bad actor address: "+err.Error())
		return
	}
	if _, ok := h.cfg.Registry.Lookup(a.Class); !ok {
		// Another node may serve it: a client's request goes there. One a
		// peer sent is not sent on: the peer chose this node for the class.
		if peer.IsRequest(r) && r.Header.Get(peer.ForwardedHeader) != "" {
			refused(http.StatusNotFound, fmt.Sprintf("unknown class %q: node %s does not serve it", a.Class, h.cfg.Node))
			return
		}
		if err := h.cfg.Host.Routable(r.Context(), a); err != nil {
			var ua *actorhost.UnavailableError
			if errors.As(err, &ua) {
				if r.ContentLength != 0 {
					refuseBody(w)
				}
				unavailable(w, ua.RetryAfter, ua.Error())
				return
			}
			refused(http.StatusNotFound, fmt.Sprintf("unknown class %q: no node of the cluster serves it", a.Class))
			return
		}
	}
	body, reserved, err := h.bodies.read(w, r, h.cfg.MaxBody)
	defer h.bodies.release(reserved)
	if err != nil {
		var be *bodyError
		if !errors.As(err, &be) {
			be = &bodyError{http.StatusBadRequest, err.Error()}
		}
		// What is left of the body is not read: the connection ends.
		w.Header().Set("Connection", "close")
		if be.status == http.StatusServiceUnavailable {
			unavailable(w, time.Second, be.msg)
			return
		}
		text(w, be.status, be.msg)
		return
	}
	if peer.IsRequest(r) && h.verifier != nil {
		if err := h.verifier.Check(r, body); err != nil {
			h.log.Warn("peer request refused", slog.String("from", r.RemoteAddr), slog.Any("err", err))
			if errors.Is(err, peer.ErrOtherInstance) {
				w.Header().Set(peer.NotRunHeader, "1") // a sender that read an old lease sends it again
			}
			text(w, http.StatusUnauthorized, err.Error())
			return
		}
	}
	if r.Header.Get(peer.TakeHeader) != "" && peer.IsRequest(r) {
		h.serveTake(w, r, a)
		return
	}
	if c := r.Header.Get(peer.CallChainHeader); c != "" {
		chain, err := decodeChain(c)
		if err != nil {
			text(w, http.StatusBadRequest, err.Error())
			return
		}
		r = r.WithContext(actorhost.WithCallChain(r.Context(), chain))
	}
	key, keyed, err := h.eventKey(r)
	if err != nil {
		text(w, http.StatusBadRequest, err.Error())
		return
	}
	req := &actors.Request{Method: r.Method, Path: rest, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	ctx := r.Context()
	if keyed {
		ctx = actorhost.WithEventKey(ctx, key)
	}
	handOver := r.Header.Get(peer.ForwardedHeader) == ""
	var first ranHere
	first.resp, first.at, first.err = h.cfg.Host.Dispatch(ctx, a, req)
	if first.ends(keyed, handOver) {
		h.answer(w, r, a, first.resp, first.err)
		return
	}
	end := deliver(h.cfg.FailoverWait, way{
		a: a, ctx: r.Context(), key: key, keyed: keyed, keyHere: true,
		keyless:  websocket.IsWebSocketUpgrade(r),
		handOver: handOver,
		here: func(ctx context.Context) (*actors.Response, *actorhost.Elsewhere, error) {
			return h.cfg.Host.Dispatch(ctx, a, req)
		},
		send: func(_ context.Context, at actorhost.Elsewhere, key *actorhost.EventKey, last, retrying bool) (peer.Sent, error) {
			if websocket.IsWebSocketUpgrade(r) {
				return h.relay(w, r, a, at, last)
			}
			if key != nil && key.Node {
				// A client's key goes as its Idempotency-Key; one this
				// node made goes as the peers' header.
				r.Header.Set(peer.EventKeyHeader, key.String())
			}
			return h.peers.Forward(w, r, a, at, body, last, retrying)
		},
	}, first)
	switch {
	case end.at == nil:
		h.answer(w, r, a, end.resp, end.err)
	case end.sent == peer.Answered:
		h.answers.forwarded.Inc()
	case end.sent == peer.Unknown && end.retried:
		h.answers.unknown.Inc()
		outcomeUnknown(w, fmt.Sprintf("actor held by node %s, which did not answer after the request was sent (%v); tried again for %s",
			end.at.Node, end.err, h.cfg.FailoverWait))
	case end.sent == peer.Unknown:
		h.answers.unknown.Inc()
		outcomeUnknown(w, fmt.Sprintf("actor held by node %s, which did not answer after the request was sent (%v)", end.at.Node, end.err))
	default:
		h.answers.refused.Inc()
		unavailable(w, h.peers.DeadIn(end.at.Node), holderGone(end.at.Node, end.err, h.cfg.FailoverWait))
	}
}

// replayed says whether resp is an answer an actor kept for an event key
// (the header as the actor set it: no canonicalisation on the way of every
// answer).
func replayed(resp *actors.Response) bool {
	_, ok := resp.Header[actorhost.ReplayedHeader]
	return ok
}

// ran says whether err is an outcome unknown of an event known to have
// run (actorhost.OutcomeUnknownError.Ran): sent again, it would say so again.
func ran(err error) bool {
	var u *actorhost.OutcomeUnknownError
	return errors.As(err, &u) && u.Ran
}

// eventKey is the key of the event r asks for: the client's
// Idempotency-Key, or the key a peer sent it with (EventKeyHeader). A
// WebSocket upgrade has none: its answer, a socket, cannot be given twice.
func (h *Handler) eventKey(r *http.Request) (actorhost.EventKey, bool, error) {
	if websocket.IsWebSocketUpgrade(r) {
		return actorhost.EventKey{}, false, nil
	}
	if v := r.Header.Get(peer.EventKeyHeader); v != "" && peer.IsRequest(r) {
		k, err := actorhost.ParseEventKey(v)
		return k, err == nil, err
	}
	if v, ok := r.Header[actorhost.IdempotencyHeader]; ok {
		if len(v) != 1 {
			return actorhost.EventKey{}, false, fmt.Errorf("%d %s headers: want one", len(v), actorhost.IdempotencyHeader)
		}
		if err := actorhost.CheckIdempotencyKey(v[0]); err != nil {
			return actorhost.EventKey{}, false, err
		}
		return actorhost.ClientKey(v[0], h.cfg.KeyWindow), true, nil
	}
	return actorhost.EventKey{}, false, nil
}

// holderGone is the refusal of a request whose holder did not answer for
// the whole failover wait.
func holderGone(node ownership.NodeID, err error, wait time.Duration) string {
	return fmt.Sprintf("actor held by node %s, which does not answer (%v); waited %s for it or for its record to be freed", node, err, wait)
}

// failover paces the tries of one request while the actor's holder does
// not answer: 100 ms after the first, doubling to 1 s, until the wait
// (Config.FailoverWait) has gone by since the first forward. The zero value
// with its wait set has not begun: an event served here costs no clock read.
type failover struct {
	wait     time.Duration
	deadline time.Time
	pause    time.Duration
}

func (f *failover) begin() {
	if f.deadline.IsZero() {
		f.deadline, f.pause = time.Now().Add(f.wait), 100*time.Millisecond
	}
}

// last says whether the failover wait is over: the next failure is
// answered.
func (f *failover) last() bool {
	f.begin()
	return !time.Now().Before(f.deadline)
}

// next sleeps until the next try, and reports false when the wait is over
// (or ctx ended) instead.
func (f *failover) next(ctx context.Context) bool {
	f.begin()
	left := time.Until(f.deadline)
	if left <= 0 {
		return false
	}
	t := time.NewTimer(min(f.pause, left))
	defer t.Stop()
	f.pause = min(2*f.pause, time.Second)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// damagedState answers a request for an actor whose object in the bucket
// is damaged (it fails its checksum or does not decode): a 500 naming the
// key, not a 503, since no retry helps until a person restores it. The
// keeper has logged it (once per key) and counted it.
func damagedState(w http.ResponseWriter, a ownership.Actor, key string) {
	text(w, http.StatusInternalServerError, fmt.Sprintf("actor %s/%s: its state is damaged in the bucket (key %s); it is not served until the object is restored",
		a.Class, a.Name, key))
}

// answer writes the outcome of a request's event.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, a ownership.Actor, resp *actors.Response, err error) {
	if err != nil {
		h.answerError(w, r, a, err)
		return
	}
	if replayed(resp) {
		h.answers.replayed.Inc()
	} else {
		h.answers.success.Inc()
	}
	if r.Context().Err() != nil {
		return // the client went away
	}
	if resp.Accept != nil {
		h.accept(w, r, a, resp.Accept)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}

// answerError writes the answer of a request whose event failed. (Apart
// from answer: the targets of errors.As escape, which a success need not
// pay for.)
func (h *Handler) answerError(w http.ResponseWriter, r *http.Request, a ownership.Actor, err error) {
	var ua *actorhost.UnavailableError
	var unknown *actorhost.OutcomeUnknownError
	var damaged *actorhost.DamagedError
	switch {
	case errors.As(err, &ua):
		h.answers.refused.Inc()
		if ua.NotRun {
			w.Header().Set(peer.NotRunHeader, "1")
		}
		unavailable(w, ua.RetryAfter, "actor unavailable here now: "+ua.Reason)
		return
	case errors.As(err, &unknown):
		h.answers.unknown.Inc()
		if unknown.Ran {
			w.Header().Set(actorhost.RanHeader, "1")
		}
		outcomeUnknown(w, unknown.Reason)
		return
	case r.Context().Err() == nil:
		h.answers.failed.Inc()
	}
	switch {
	case errors.As(err, &damaged):
		damagedState(w, a, damaged.Key)
	case errors.Is(err, actors.ErrUnknownClass):
		text(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ownership.ErrInvalidActor):
		text(w, http.StatusBadRequest, err.Error())
	case r.Context().Err() != nil:
	default:
		h.log.Error("deliver failed", slog.String("class", a.Class), slog.String("name", a.Name), slog.Any("err", err))
		text(w, http.StatusInternalServerError, "internal error")
	}
}

// accept upgrades the request to a WebSocket the node owns, as the actor
// asked; the socket owner answers its own refusals (503 past the socket
// limit, 400 for bad tags or a bad handshake).
func (h *Handler) accept(w http.ResponseWriter, r *http.Request, a ownership.Actor, acc *actors.Accept) {
	switch {
	case h.cfg.Sockets == nil:
		text(w, http.StatusNotImplemented, "this node serves no WebSockets")
		return
	case !websocket.IsWebSocketUpgrade(r):
		w.Header().Set("Upgrade", "websocket")
		text(w, http.StatusUpgradeRequired, "the actor accepts only a WebSocket upgrade here")
		return
	}
	if _, err := h.cfg.Sockets.Accept(w, r, a, acc.Tags); err != nil {
		h.log.Info("websocket not accepted", slog.String("class", a.Class), slog.String("name", a.Name), slog.Any("err", err))
	}
}

// relay relays the WebSocket upgrade r for a to the node d that holds it
// (peer.Client.Relay). The two descriptors a relayed socket holds while it
// lives, the client's and the holder's, come out of the socket budget.
func (h *Handler) relay(w http.ResponseWriter, r *http.Request, a ownership.Actor, d actorhost.Elsewhere, last bool) (peer.Sent, error) {
	if h.cfg.Sockets != nil {
		release, err := h.cfg.Sockets.Reserve(2)
		if err != nil {
			unavailable(w, 5*time.Second, "too many sockets on this node: "+err.Error())
			return peer.Answered, nil
		}
		defer release()
	}
	return h.peers.Relay(w, r, a, d, last)
}
