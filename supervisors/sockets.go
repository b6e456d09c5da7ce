package supervisors

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// socketKeeper is what socket events need of the ownership keeper.
type socketKeeper interface {
	Acquire(ctx context.Context, a ownership.Actor) (keeper.Decision, error)
	SocketOpened(a ownership.Actor)
	SocketGone(a ownership.Actor)
}

// How long one socket event may take to reach its actor (acquiring the
// hold, waking the actor, retrying while it is unavailable), and the
// longest pause between two tries.
const (
	socketEventWait  = 30 * time.Second
	socketRetryPause = time.Second
)

// socketSink is the node's sockets.Sink: it keeps the ownership core's
// count of each actor's open sockets, and delivers what arrives on a socket
// to its actor as an event, waking it where it hibernated. Message is called
// on the socket's reader goroutine and returns once the event ran, so one
// socket's messages reach the actor in order, and a client that sends
// faster than its actor handles is pushed back by TCP.
type socketSink struct {
	keeper socketKeeper
	host   atomic.Pointer[actors.Host]
	owner  atomic.Pointer[sockets.Owner]
	log    *slog.Logger

	events   *prometheus.CounterVec
	wakes    prometheus.Counter
	failures *prometheus.CounterVec
}

func newSocketSink(k socketKeeper, log *slog.Logger, reg prometheus.Registerer) (*socketSink, error) {
	s := &socketSink{
		keeper: k,
		log:    log.With(slog.String("component", "sockets")),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmkeep_websocket_events_total", Help: "Socket events delivered to actors, by kind.",
		}, []string{"kind"}),
		wakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wasmkeep_websocket_wakes_total", Help: "Socket events that found their actor not resident and woke it.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmkeep_websocket_event_failures_total", Help: "Socket events that could not run, by why.",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{s.events, s.wakes, s.failures} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *socketSink) Opened(a ownership.Actor) { s.keeper.SocketOpened(a) }
func (s *socketSink) Gone(a ownership.Actor)   { s.keeper.SocketGone(a) }

func (s *socketSink) Message(a ownership.Actor, id sockets.ID, text bool, data []byte) {
	s.deliver(a, &actors.SocketEvent{Kind: actors.SocketMessage, Socket: id, Text: text, Data: data})
}

func (s *socketSink) Close(a ownership.Actor, id sockets.ID, code int, reason string, clean bool) {
	s.deliver(a, &actors.SocketEvent{Kind: actors.SocketClose, Socket: id, Code: code, Reason: reason, Clean: clean})
}

func (s *socketSink) Error(a ownership.Actor, id sockets.ID, err error) {
	s.deliver(a, &actors.SocketEvent{Kind: actors.SocketError, Socket: id, Code: sockets.CloseCode(err), Err: err.Error()})
}

// deliver runs ev on its actor here, retrying while the actor is
// unavailable and the event has not run, for at most socketEventWait
// after the first try. An event that cannot run is counted and logged; a
// message whose actor is held by another node closes its socket (1012),
// since only this node can reach it. The first try is bounded only by the event's own limits (a wasm
// guest's event timeout, say), so that the usual event costs no timer.
func (s *socketSink) deliver(a ownership.Actor, ev *actors.SocketEvent) {
	host := s.host.Load()
	if host == nil {
		return
	}
	s.events.WithLabelValues(ev.Kind.String()).Inc()
	var deadline time.Time // set at the first retry
	for {
		ctx, cancel := context.Background(), context.CancelFunc(nil)
		if !deadline.IsZero() {
			ctx, cancel = context.WithDeadline(ctx, deadline)
		}
		retry, finished := s.try(ctx, host, a, ev)
		if cancel != nil {
			cancel()
		}
		if finished {
			return
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(socketEventWait)
		}
		wait := min(max(retry, 50*time.Millisecond), socketRetryPause)
		if time.Until(deadline) < wait {
			s.failed(a, ev, "timeout", "actor unavailable for "+socketEventWait.String())
			return
		}
		time.Sleep(wait)
	}
}

// try runs ev once. Unless finished (run, or failed for good), the actor
// was unavailable here and suggests retrying after retry.
func (s *socketSink) try(ctx context.Context, host *actors.Host, a ownership.Actor, ev *actors.SocketEvent) (retry time.Duration, finished bool) {
	d, err := s.keeper.Acquire(ctx, a)
	if err != nil {
		s.failed(a, ev, "acquire", err.Error())
		return 0, true
	}
	switch d.Verdict {
	case keeper.Granted:
		woke, err := host.DeliverSocket(ctx, a, d.Gen, ev)
		var ua *actors.UnavailableError
		switch {
		case err == nil:
			if woke {
				s.wakes.Inc()
			}
			return 0, true
		case errors.As(err, &ua) && ua.NotRun:
			return ua.RetryAfter, false
		case errors.As(err, &ua):
			// It may have run: its writes landed, its output withheld (the
			// hold ended under it). Run again, it could act twice.
			s.failed(a, ev, "output withheld", ua.Reason)
			return 0, true
		case ctx.Err() != nil:
			s.failed(a, ev, "timeout", "actor unavailable for "+socketEventWait.String())
			return 0, true
		default:
			s.failed(a, ev, "deliver", err.Error())
			return 0, true
		}
	case keeper.Routed:
		s.failed(a, ev, "held elsewhere", "actor held by node "+string(d.Node))
		return 0, true
	}
	if d.Draining {
		s.failed(a, ev, "draining", d.Reason)
		return 0, true
	}
	if d.Damaged != "" {
		// No retry helps until the object is restored.
		s.failed(a, ev, "damaged", d.Reason)
		return 0, true
	}
	return d.RetryAfter, false
}

func (s *socketSink) failed(a ownership.Actor, ev *actors.SocketEvent, reason, detail string) {
	s.failures.WithLabelValues(reason).Inc()
	s.log.Warn("socket event not delivered", slog.String("class", a.Class), slog.String("name", a.Name),
		slog.String("event", ev.Kind.String()), slog.Any("socket", ev.Socket), slog.String("why", detail))
	if ev.Kind == actors.SocketMessage {
		if o := s.owner.Load(); o != nil {
			_ = o.Close(a, ev.Socket, 1012, "actor unavailable on this node")
		}
	}
}
