package ingress

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Request bodies are what a client makes the node hold in memory, so they
// are bounded three ways:
//
//   - each by MaxBody: a Content-Length over it gets 413 before anything
//     is read (and so before any 100 Continue), a longer chunked body 413
//     once it passes it;
//   - all of them together by MaxBodyInflight: a body is read into a
//     buffer of its own size, reserved first; a body whose reservation
//     would pass the bound gets 503 with Retry-After before it is read;
//   - in time: a body must arrive within BodyTimeout plus its size at
//     BodyMinRate (a chunked body: what has arrived so far, plus a
//     chunk), else the request gets 408 and its connection is closed.
//
// A reservation is given back when the request has been answered. A body
// the node does not read (a request for /healthz, say, or one refused
// before its body) is never drained: see refuseBody.

// Defaults of the body bounds.
const (
	DefaultMaxBodyInflight = 256 << 20
	DefaultBodyTimeout     = 10 * time.Second
	DefaultBodyMinRate     = 32 << 10 // bytes per second
)

// bodyStep is how much a body of unknown length reserves at a time.
const bodyStep = 32 << 10

// bodyError is a body not read; status is the answer.
type bodyError struct {
	status int
	msg    string
}

func (e *bodyError) Error() string { return e.msg }

// bodies holds the books of the bodies in flight.
type bodies struct {
	max      int64
	timeout  time.Duration
	minRate  int64
	inflight atomic.Int64
	gauge    prometheus.Gauge
	refused  *prometheus.CounterVec
	// peak is the most held since memory was last given back; gaveBack
	// when (Unix nanoseconds) it was; giveBack gives it back (tests
	// replace it).
	peak     atomic.Int64
	gaveBack atomic.Int64
	giveBack func()
}

// giveBackAbove is how many bytes of bodies a burst must have held for its
// end to give memory back to the system, and giveBackEvery how often at
// most: the runtime would keep the heap the burst grew (1,000 stalled
// bodies of 1 MiB left 1.4 GB resident after their clients left), and a
// give-back costs a collection.
const (
	giveBackAbove = 32 << 20
	giveBackEvery = 10 * time.Second
)

func newBodies(maxInflight int64, timeout time.Duration, minRate int64, reg prometheus.Registerer) (*bodies, error) {
	b := &bodies{max: maxInflight, timeout: timeout, minRate: minRate, giveBack: debug.FreeOSMemory,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "wasmkeep_http_body_inflight_bytes",
			Help: "Bytes reserved for request bodies being read or waiting for their answer (bounded by --max-body-inflight).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmkeep_http_bodies_refused_total",
			Help: "Request bodies refused, by reason: too_large (413), inflight (503: --max-body-inflight reached), slow (408: under --body-min-rate).",
		}, []string{"reason"}),
	}
	for _, r := range []string{"too_large", "inflight", "slow"} {
		b.refused.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{b.gauge, b.refused} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// reserve takes n bytes of the bound, or reports that they do not fit.
func (b *bodies) reserve(n int64) bool {
	held := b.inflight.Add(n)
	if held > b.max {
		b.inflight.Add(-n)
		return false
	}
	b.gauge.Add(float64(n))
	if held >= giveBackAbove && held > b.peak.Load() {
		b.peak.Store(held) // a racing store keeps a smaller peak: only the give-back's threshold
	}
	return true
}

// release gives n bytes back to the bound. The release that ends a burst
// of more than giveBackAbove gives the memory back to the system, on a
// goroutine of its own, at most every giveBackEvery.
func (b *bodies) release(n int64) {
	if n <= 0 {
		return
	}
	b.gauge.Sub(float64(n))
	if b.inflight.Add(-n) != 0 || b.peak.Load() < giveBackAbove {
		return
	}
	now := time.Now().UnixNano()
	last := b.gaveBack.Load()
	if now-last < int64(giveBackEvery) || !b.gaveBack.CompareAndSwap(last, now) {
		return
	}
	b.peak.Store(0)
	go b.giveBack()
}

// read reads r's body, at most maxBody bytes, within the bounds. It
// returns the body and the bytes reserved for it, to be released once the
// request is answered (also on error).
//
// The buffer grows as bytes arrive, each growth reserved first (to the
// Content-Length exactly, where there is one), so a client that announces
// a large body and sends nothing holds a step of the bound, not its
// announced size.
func (b *bodies) read(w http.ResponseWriter, r *http.Request, maxBody int64) (body []byte, reserved int64, err error) {
	if r.ContentLength > maxBody {
		b.refused.WithLabelValues("too_large").Inc()
		refuseBody(w)
		return nil, 0, &bodyError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes (Content-Length %d)", maxBody, r.ContentLength)}
	}
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil, 0, nil
	}
	start := time.Now()
	rc := http.NewResponseController(w)
	deadline := func(size int64) {
		// ErrNotSupported where w is no connection's (a test's recorder).
		_ = rc.SetReadDeadline(start.Add(b.timeout + time.Duration(size)*time.Second/time.Duration(b.minRate)))
	}
	defer func() {
		// Read in full: no deadline. Not: none of the rest is read (the
		// server would drain a short rest without one); the connection
		// ends after the answer.
		if err != nil {
			refuseBody(w)
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
	}()
	// limit is what the buffer may grow to: the announced length, or one
	// byte past maxBody to see a chunked body pass it.
	limit, known := maxBody+1, r.ContentLength > 0
	if known {
		limit = r.ContentLength
		deadline(r.ContentLength) // the time the announced size takes
	}
	for {
		if len(body) == cap(body) {
			grow := min(max(int64(cap(body)), bodyStep), limit-int64(cap(body)))
			if grow <= 0 {
				if known {
					return body, reserved, nil // all of it, and no more is read
				}
				b.refused.WithLabelValues("too_large").Inc()
				return nil, reserved, &bodyError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxBody)}
			}
			if !b.reserve(grow) {
				b.refused.WithLabelValues("inflight").Inc()
				return nil, reserved, &bodyError{http.StatusServiceUnavailable, "node at its bound of request bodies in flight"}
			}
			reserved += grow
			next := make([]byte, len(body), int64(cap(body))+grow)
			copy(next, body)
			body = next
		}
		if !known {
			// What has arrived, and a step more, at the rate.
			deadline(int64(len(body)) + bodyStep)
		}
		n, err := r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		switch {
		case errors.Is(err, io.EOF) && known && int64(len(body)) < limit:
			return nil, reserved, &bodyError{http.StatusBadRequest, "read body: " + io.ErrUnexpectedEOF.Error()}
		case errors.Is(err, io.EOF):
			if int64(len(body)) > maxBody {
				b.refused.WithLabelValues("too_large").Inc()
				return nil, reserved, &bodyError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxBody)}
			}
			return body, reserved, nil
		case err != nil:
			return nil, reserved, b.readError(err)
		case known && int64(len(body)) == limit:
			return body, reserved, nil
		}
	}
}

// refuseBody makes sure no more of a request's body is read: after the
// answer, net/http would drain a short rest of it, with no deadline, and
// a client that never sends it would hold the connection for good. A read
// deadline in the past fails that at once, and the connection ends after
// the answer.
func refuseBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
}

// readError is the answer to a body whose reading failed.
func (b *bodies) readError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		b.refused.WithLabelValues("slow").Inc()
		return &bodyError{http.StatusRequestTimeout, fmt.Sprintf("body not received in time: it must arrive within %v plus its size at %d bytes/s", b.timeout, b.minRate)}
	}
	return &bodyError{http.StatusBadRequest, "read body: " + err.Error()}
}
