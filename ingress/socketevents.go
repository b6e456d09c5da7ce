package ingress

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// SocketKeeper is what socket events need of the ownership keeper.
type SocketKeeper interface {
	SocketOpened(a ownership.Actor)
	SocketGone(a ownership.Actor)
}

// socketEventWait is how long a socket event is tried again while its
// actor is refused for a reason that may pass.
const socketEventWait = 30 * time.Second

// SocketEvents is the node's sockets.Sink, the entry of socket events as
// the Handler is the entry of HTTP requests: it keeps the ownership core's
// count of each actor's open sockets, and delivers what arrives on a socket
// to its actor as an event, waking it where it hibernated. Message is called
// on the socket's reader goroutine and returns once the event ran, so one
// socket's messages reach the actor in order, and a client that sends
// faster than its actor handles is pushed back by TCP.
type SocketEvents struct {
	keeper SocketKeeper
	// actors is the way to the actors: made before the socket owner,
	// which is made with s, and before the actors' Host, which is made
	// with the socket owner (actorhost.Entry).
	actors *actorhost.Entry
	log    *slog.Logger

	events   *prometheus.CounterVec
	wakes    prometheus.Counter
	failures *prometheus.CounterVec
	// faults, set by tests only (SetFaults), is called before each
	// message is delivered, on the socket's reader goroutine, its panic a
	// failure of the socket owner.
	faults func(msg any)
}

// NewSocketEvents is the socket events' entry of a node whose keeper is
// k and whose actors e reaches, its metrics registered in reg.
func NewSocketEvents(k SocketKeeper, e *actorhost.Entry, log *slog.Logger, reg prometheus.Registerer) (*SocketEvents, error) {
	s := &SocketEvents{
		keeper: k,
		actors: e,
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

// SetFaults makes s call f before it delivers each message (tests only).
func (s *SocketEvents) SetFaults(f func(msg any)) { s.faults = f }

func (s *SocketEvents) Opened(a ownership.Actor) { s.keeper.SocketOpened(a) }
func (s *SocketEvents) Gone(a ownership.Actor)   { s.keeper.SocketGone(a) }

// Message delivers a message to its actor. It fails when the event could
// not run (counted and logged): the socket owner then closes the socket
// with 1012, so that its client connects again and sends it again.
func (s *SocketEvents) Message(a ownership.Actor, id sockets.ID, text bool, data []byte) error {
	ev := &actors.SocketEvent{Kind: actors.SocketMessage, Socket: actors.SocketID(id), Text: text, Data: data}
	if s.faults != nil {
		s.faults(ev)
	}
	return s.deliver(a, ev)
}

func (s *SocketEvents) Close(a ownership.Actor, id sockets.ID, code int, reason string, clean bool) {
	_ = s.deliver(a, &actors.SocketEvent{Kind: actors.SocketClose, Socket: actors.SocketID(id), Code: code, Reason: reason, Clean: clean})
}

func (s *SocketEvents) Error(a ownership.Actor, id sockets.ID, err error) {
	_ = s.deliver(a, &actors.SocketEvent{Kind: actors.SocketError, Socket: actors.SocketID(id), Code: sockets.CloseCode(err), Err: err.Error()})
}

// errUndelivered is deliver's error: the event did not run here (or may
// not have: its outcome is unknown).
var errUndelivered = errors.New("socket event not delivered")

// deliver runs ev on its actor here (actorhost.Entry.DispatchSocket), with
// socketEventWait of patience for refusals that may pass. An event that
// cannot run is counted and logged, and fails; for a message, the socket
// owner then closes its socket (1012): a message whose actor is held by
// another node, say, since only this node can reach the socket. The event
// is bounded only by its own limits (a wasm guest's event timeout, say),
// so that the usual event costs no timer.
func (s *SocketEvents) deliver(a ownership.Actor, ev *actors.SocketEvent) error {
	s.events.WithLabelValues(ev.Kind.String()).Inc()
	woke, at, err := s.actors.DispatchSocket(context.Background(), a, ev, socketEventWait)
	var ua *actorhost.UnavailableError
	var damaged *actorhost.DamagedError
	switch {
	case at != nil:
		return s.failed(a, ev, "held elsewhere", "actor held by node "+string(at.Node))
	case err == nil:
		if woke {
			s.wakes.Inc()
		}
		return nil
	case errors.As(err, &damaged):
		// No retry helps until the object is restored.
		return s.failed(a, ev, "damaged", err.Error())
	case errors.As(err, &ua) && ua.Draining:
		return s.failed(a, ev, "draining", ua.Reason)
	case errors.As(err, &ua) && ua.NotRun:
		return s.failed(a, ev, "timeout", ua.Reason)
	case errors.As(err, &ua):
		// Refused: it took no effect (its commit did not land). Its socket
		// is closed, so that its client sends it again.
		return s.failed(a, ev, "refused", ua.Reason)
	case errors.Is(err, actors.ErrOutcomeUnknown):
		// It may have taken effect: run again, it could act twice. Its
		// socket is closed: its client cannot be told which.
		return s.failed(a, ev, "outcome unknown", err.Error())
	default:
		return s.failed(a, ev, "deliver", err.Error())
	}
}

func (s *SocketEvents) failed(a ownership.Actor, ev *actors.SocketEvent, reason, detail string) error {
	s.failures.WithLabelValues(reason).Inc()
	s.log.Warn("socket event not delivered", slog.String("class", a.Class), slog.String("name", a.Name),
		slog.String("event", ev.Kind.String()), slog.Any("socket", ev.Socket), slog.String("why", detail))
	return errUndelivered
}
