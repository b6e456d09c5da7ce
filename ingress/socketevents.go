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
	// host and owner are set (SetParts) before the node serves: a socket,
	// and with it every call of the sink, exists only after.
	host  *actorhost.Host
	owner *sockets.Owner
	log   *slog.Logger

	events   *prometheus.CounterVec
	wakes    prometheus.Counter
	failures *prometheus.CounterVec
	// faults, set by tests only (SetFaults), is called before each
	// message is delivered, on the socket's reader goroutine, its panic a
	// failure of the socket owner.
	faults func(msg any)
}

// NewSocketEvents is the socket events' entry of a node whose keeper is
// k, its metrics registered in reg. SetParts gives it the actors and the
// socket owner before the node serves.
func NewSocketEvents(k SocketKeeper, log *slog.Logger, reg prometheus.Registerer) (*SocketEvents, error) {
	s := &SocketEvents{
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

// SetParts gives s the node's actors and socket owner. Call it once,
// before the node serves. It is set apart from NewSocketEvents because
// the three make a loop: the owner delivers through s, s to the actors,
// and the actors write to the owner's sockets.
func (s *SocketEvents) SetParts(host *actorhost.Host, owner *sockets.Owner) {
	s.host, s.owner = host, owner
}

// SetFaults makes s call f before it delivers each message (tests only).
func (s *SocketEvents) SetFaults(f func(msg any)) { s.faults = f }

func (s *SocketEvents) Opened(a ownership.Actor) { s.keeper.SocketOpened(a) }
func (s *SocketEvents) Gone(a ownership.Actor)   { s.keeper.SocketGone(a) }

func (s *SocketEvents) Message(a ownership.Actor, id sockets.ID, text bool, data []byte) {
	ev := &actors.SocketEvent{Kind: actors.SocketMessage, Socket: actors.SocketID(id), Text: text, Data: data}
	if s.faults != nil {
		s.faults(ev)
	}
	s.deliver(a, ev)
}

func (s *SocketEvents) Close(a ownership.Actor, id sockets.ID, code int, reason string, clean bool) {
	s.deliver(a, &actors.SocketEvent{Kind: actors.SocketClose, Socket: actors.SocketID(id), Code: code, Reason: reason, Clean: clean})
}

func (s *SocketEvents) Error(a ownership.Actor, id sockets.ID, err error) {
	s.deliver(a, &actors.SocketEvent{Kind: actors.SocketError, Socket: actors.SocketID(id), Code: sockets.CloseCode(err), Err: err.Error()})
}

// deliver runs ev on its actor here (actorhost.Host.DispatchSocket), with
// socketEventWait of patience for refusals that may pass. An event that
// cannot run is counted and logged; a message whose actor is held by
// another node closes its socket (1012), since only this node can reach
// it. The event is bounded only by its own limits (a wasm guest's event
// timeout, say), so that the usual event costs no timer.
func (s *SocketEvents) deliver(a ownership.Actor, ev *actors.SocketEvent) {
	host := s.host
	s.events.WithLabelValues(ev.Kind.String()).Inc()
	woke, at, err := host.DispatchSocket(context.Background(), a, ev, socketEventWait)
	var ua *actorhost.UnavailableError
	var damaged *actorhost.DamagedError
	switch {
	case at != nil:
		s.failed(a, ev, "held elsewhere", "actor held by node "+string(at.Node))
	case err == nil:
		if woke {
			s.wakes.Inc()
		}
	case errors.As(err, &damaged):
		// No retry helps until the object is restored.
		s.failed(a, ev, "damaged", err.Error())
	case errors.As(err, &ua) && ua.Draining:
		s.failed(a, ev, "draining", ua.Reason)
	case errors.As(err, &ua) && ua.NotRun:
		s.failed(a, ev, "timeout", ua.Reason)
	case errors.As(err, &ua):
		// Refused: it took no effect (its commit did not land). Its socket
		// is closed, so that its client sends it again.
		s.failed(a, ev, "refused", ua.Reason)
	case errors.Is(err, actors.ErrOutcomeUnknown):
		// It may have taken effect: run again, it could act twice. Its
		// socket is closed: its client cannot be told which.
		s.failed(a, ev, "outcome unknown", err.Error())
	default:
		s.failed(a, ev, "deliver", err.Error())
	}
}

func (s *SocketEvents) failed(a ownership.Actor, ev *actors.SocketEvent, reason, detail string) {
	s.failures.WithLabelValues(reason).Inc()
	s.log.Warn("socket event not delivered", slog.String("class", a.Class), slog.String("name", a.Name),
		slog.String("event", ev.Kind.String()), slog.Any("socket", ev.Socket), slog.String("why", detail))
	if ev.Kind == actors.SocketMessage {
		_ = s.owner.Close(a, sockets.ID(ev.Socket), 1012, "actor unavailable on this node")
	}
}
