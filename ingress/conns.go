package ingress

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/peer"
)

// Connections are admitted within a budget (see internal/budget): up to
// max are served as usual; past it the oldest quiet connection (idle
// between keep-alive requests, or open without a request, for at least
// quietMin) is closed to make room; with none to close, up to overflow
// more are admitted only to answer /healthz, /readyz and peer requests,
// each closed after its one answer, every other request there refused
// with a 503; past those a new connection is closed as soon as it is
// accepted. A flood of silent or idle clients can thus never take the
// descriptors the bucket and the lease need, nor keep health checks and
// peers out.

// quietMin is how long a connection must have been quiet (idle, or open
// without a request) before it may be closed to make room for another.
// A busy keep-alive client is idle between its requests for a moment
// only: under overload its connection is kept, and the excess is refused
// instead of turned into reconnections that close one another.
const quietMin = time.Second

// evictScan bounds how many quiet connections one admission looks at.
const evictScan = 64

type connKey struct{}

// connEntry is one admitted connection. Quiet entries (StateNew or
// StateIdle) sit on the limiter's quiet list, oldest first.
type connEntry struct {
	conn       net.Conn
	overflow   bool // admitted past max: health checks and peers only
	gone       bool // no longer counted (evicted, hijacked or closed)
	state      http.ConnState
	since      time.Time // when it entered state
	prev, next *connEntry
}

// connLimiter admits connections; its ConnContext and ConnState are the
// http.Server's hooks of the same names.
type connLimiter struct {
	max, overflow int
	now           func() time.Time

	mu           sync.Mutex
	conns        map[net.Conn]*connEntry
	served, over int
	quiet        connEntry // sentinel of the quiet list
	// freed, while overflow requests wait for a place in the served band,
	// is closed when one frees (see promote).
	freed          chan struct{}
	servedG, overG prometheus.Gauge
	closed         *prometheus.CounterVec
	shedLog        shedLog
}

// shedLogEvery is how often, at most, a node that sheds connections says
// so in its log.
const shedLogEvery = 10 * time.Second

// shedLog says in the log that the node sheds connections: at the first
// one, then every shedLogEvery while it goes on, with the counts since the
// last line, so that a flood shows in the log and not only in a metric,
// without a line per connection.
type shedLog struct {
	log  *slog.Logger
	max  int
	mu   sync.Mutex
	last time.Time
	n    map[string]int
}

// shed counts one connection closed for reason at now, and logs when a
// line is due.
func (s *shedLog) shed(reason string, now time.Time) {
	if s.log == nil {
		return
	}
	s.mu.Lock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[reason]++
	if !s.last.IsZero() && now.Sub(s.last) < shedLogEvery {
		s.mu.Unlock()
		return
	}
	first := s.last.IsZero()
	counts := s.n
	s.last, s.n = now, nil
	s.mu.Unlock()
	msg := "shedding HTTP connections to stay within the connection budget"
	if first {
		msg = "began shedding HTTP connections to stay within the connection budget"
	}
	s.log.Warn(msg, slog.Int("max_conns", s.max), slog.Int("evicted", counts["evicted"]),
		slog.Int("refused", counts["refused"]), slog.Int("overflow_refused", counts["overflow_refused"]),
		slog.Duration("every", shedLogEvery))
}

func newConnLimiter(maxConns, overflow int, reg prometheus.Registerer, log *slog.Logger) (*connLimiter, error) {
	l := &connLimiter{max: maxConns, overflow: overflow, now: time.Now, conns: make(map[net.Conn]*connEntry),
		shedLog: shedLog{log: log, max: maxConns}}
	l.quiet.prev, l.quiet.next = &l.quiet, &l.quiet
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wasmkeep_http_connections",
		Help: "HTTP connections open, by band: served (within --max-conns) or overflow (past it: health checks and peers only).",
	}, []string{"band"})
	l.closed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmkeep_http_connections_shed_total",
		Help: "HTTP connections the node closed to stay within its connection budget, by reason: evicted (a quiet connection closed to make room), refused (closed as accepted, past every band), overflow_refused (a request on an overflow connection answered 503).",
	}, []string{"reason"})
	if reg != nil {
		for _, c := range []prometheus.Collector{g, l.closed} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	l.servedG, l.overG = g.WithLabelValues("served"), g.WithLabelValues("overflow")
	for _, r := range []string{"evicted", "refused", "overflow_refused"} {
		l.closed.WithLabelValues(r)
	}
	return l, nil
}

// ConnContext admits c, evicting a quiet connection or placing c in the
// overflow band if it must, or closes it.
func (l *connLimiter) ConnContext(ctx context.Context, c net.Conn) context.Context {
	l.mu.Lock()
	e := &connEntry{conn: c, state: http.StateNew, since: l.now()}
	var evict net.Conn
	switch {
	case l.served < l.max:
		l.served++
	case l.evictLocked(&evict):
		// the evicted connection's place is c's
	case l.over < l.overflow || l.evictOverflowLocked(&evict):
		e.overflow = true
		l.over++
	default:
		l.mu.Unlock()
		l.closed.WithLabelValues("refused").Inc()
		l.shedLog.shed("refused", l.now())
		c.Close()
		return ctx
	}
	l.conns[c] = e
	l.pushQuietLocked(e)
	l.gaugesLocked()
	l.mu.Unlock()
	if evict != nil {
		l.closed.WithLabelValues("evicted").Inc()
		l.shedLog.shed("evicted", l.now())
		evict.Close()
	}
	return context.WithValue(ctx, connKey{}, e)
}

// evictLocked takes the oldest quiet connection that may be closed off
// the books, leaving its place to the caller, and returns it in *c to be
// closed.
func (l *connLimiter) evictLocked(c *net.Conn) bool {
	now := l.now()
	n := 0
	for e := l.quiet.next; e != &l.quiet && n < evictScan; e, n = e.next, n+1 {
		if now.Sub(e.since) < quietMin {
			break // the rest are younger
		}
		if e.overflow {
			continue
		}
		l.dropLocked(e)
		*c = e.conn
		l.served++ // the caller's place; dropLocked gave it back
		return true
	}
	return false
}

// overflowQuiet is how long an overflow connection may sit without a
// request before a newcomer to the full band takes its place: the band is
// for one quick request each, and silent clients must not keep health
// checks and peers out.
const overflowQuiet = 200 * time.Millisecond

// evictOverflowLocked takes the oldest overflow connection quiet for
// overflowQuiet off the books, leaving its place to the caller, and
// returns it in *c to be closed.
func (l *connLimiter) evictOverflowLocked(c *net.Conn) bool {
	now := l.now()
	n := 0
	for e := l.quiet.next; e != &l.quiet && n < evictScan; e, n = e.next, n+1 {
		if now.Sub(e.since) < overflowQuiet {
			break
		}
		if !e.overflow {
			continue
		}
		l.dropLocked(e)
		*c = e.conn
		return true
	}
	return false
}

// ConnState keeps the books as connections go quiet, active, hijacked
// (a WebSocket: the socket budget counts it from then on) or closed.
func (l *connLimiter) ConnState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.conns[c]
	if e == nil {
		return
	}
	switch s {
	case http.StateHijacked, http.StateClosed:
		l.dropLocked(e)
		delete(l.conns, c)
		l.gaugesLocked()
		return
	}
	if e.gone {
		return
	}
	l.unlinkLocked(e)
	e.state, e.since = s, l.now()
	if s == http.StateIdle || s == http.StateNew {
		l.pushQuietLocked(e)
	}
}

// dropLocked takes e off the books (once).
func (l *connLimiter) dropLocked(e *connEntry) {
	if e.gone {
		return
	}
	e.gone = true
	l.unlinkLocked(e)
	if e.overflow {
		l.over--
	} else {
		l.served--
		if l.freed != nil {
			// Wake the overflow requests waiting for a place.
			close(l.freed)
			l.freed = nil
		}
	}
}

func (l *connLimiter) pushQuietLocked(e *connEntry) {
	e.prev, e.next = l.quiet.prev, &l.quiet
	l.quiet.prev.next = e
	l.quiet.prev = e
}

func (l *connLimiter) unlinkLocked(e *connEntry) {
	if e.prev == nil {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (l *connLimiter) gaugesLocked() {
	l.servedG.Set(float64(l.served))
	l.overG.Set(float64(l.over))
}

// counts says how many connections are admitted in each band.
func (l *connLimiter) counts() (served, over int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.served, l.over
}

// overflowConn says whether r arrived on a connection of the overflow band.
func overflowConn(r *http.Request) bool {
	e, _ := r.Context().Value(connKey{}).(*connEntry)
	// Without the lock: only this connection's requests, one at a time,
	// change it once it is admitted (promote).
	return e != nil && e.overflow
}

// overflowWait is how long a request on an overflow connection waits for
// a place in the served band before it is refused. Refusing at once would
// let a client that retries at once make the node spend its time on
// refusals (a connection, a request and an answer each) instead of on the
// requests it admitted.
const overflowWait = time.Second

// serveOverflow answers a request on an overflow connection: health
// checks and peer requests are served; any other request waits up to
// overflowWait for a place in the served band (then its connection is
// served as any other) and is refused with a 503 if none frees. It
// reports whether it answered.
func (h *Handler) serveOverflow(w http.ResponseWriter, r *http.Request) bool {
	// A peer's request is served at once if its signature could be taken
	// (its MAC is checked once its body is read, as anywhere); one that
	// only carries a peer's header waits like any other.
	fromPeer := peer.IsRequest(r) && (len(h.cfg.ClusterKey) == 0 || peer.PlausiblySigned(r, time.Now()))
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || fromPeer {
		w.Header().Set("Connection", "close")
		return false
	}
	if h.conns == nil {
		return false
	}
	e, _ := r.Context().Value(connKey{}).(*connEntry)
	if h.conns.promote(r.Context(), e, overflowWait) {
		return false
	}
	w.Header().Set("Connection", "close")
	if r.ContentLength != 0 {
		refuseBody(w)
	}
	h.conns.closed.WithLabelValues("overflow_refused").Inc()
	h.conns.shedLog.shed("overflow_refused", h.conns.now())
	unavailable(w, overflowWait, "node at its connection limit")
	return true
}

// promote waits up to wait for a place in the served band and moves e
// there, or reports that none freed (or ctx ended).
func (l *connLimiter) promote(ctx context.Context, e *connEntry, wait time.Duration) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		l.mu.Lock()
		if e.gone {
			l.mu.Unlock()
			return false
		}
		if l.served < l.max {
			e.overflow = false
			l.over--
			l.served++
			l.gaugesLocked()
			l.mu.Unlock()
			return true
		}
		if l.freed == nil {
			l.freed = make(chan struct{})
		}
		freed := l.freed
		l.mu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
