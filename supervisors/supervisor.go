package supervisors

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
)

// Policy bounds the restarts of one resident actor.
type Policy struct {
	// MaxRestarts is how many restarts a resident actor may have within Within;
	// the next failure inside the window stops it. Zero: 3. Negative: a
	// resident actor that fails is stopped at once.
	MaxRestarts int
	// Within is the window restarts are counted in. Zero: 1 min.
	Within time.Duration
}

// Validate reports a policy New cannot run with.
func (p Policy) Validate() error {
	if p.Within < 0 {
		return errors.New("supervisor policy: window must not be negative")
	}
	return nil
}

func (p *Policy) setDefaults() {
	if p.MaxRestarts == 0 {
		p.MaxRestarts = 3
	}
	if p.Within == 0 {
		p.Within = time.Minute
	}
}

// Supervisor supervises the resident actors of every class, one policy
// for all, with one Metrics. It satisfies actorhost.Supervision.
type Supervisor struct {
	metrics *Metrics
	policy  Policy
	log     *slog.Logger
}

// New returns a Supervisor counting into m. log: nil logs nothing.
func New(m *Metrics, p Policy, log *slog.Logger) (*Supervisor, error) {
	if m == nil {
		return nil, errors.New("supervisor: no metrics")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Supervisor{metrics: m, policy: p, log: log.With(slog.String("component", "supervisors"))}, nil
}

// Props returns the proto.actor options resident actors of class are
// spawned with: the receive middleware that times messages and counts
// panics, and an unbounded mailbox keeping the class's depth gauge.
func (s *Supervisor) Props(class string) []actor.PropsOption {
	cm := s.metrics.class(class)
	return []actor.PropsOption{
		actor.WithReceiverMiddleware(receiveMiddleware(cm)),
		actor.WithMailbox(actor.Unbounded(depth{cm.depth})),
	}
}

// MailboxStatistics returns the mailbox statistics keeping class's depth
// gauge, the ones Props installs, for a caller building its own mailbox.
func (s *Supervisor) MailboxStatistics(class string) actor.MailboxMiddleware {
	return depth{s.metrics.class(class).depth}
}

// EventFailed counts an event of class whose handler failed
// (wasmkeep_actor_event_failures_total).
func (s *Supervisor) EventFailed(class string) { s.metrics.events.WithLabelValues(class).Inc() }

// Strategy returns the strategy the parent of class's resident actors
// supervises them with: restart one for one within the policy, else stop.
func (s *Supervisor) Strategy(class string) actor.SupervisorStrategy {
	return &strategy{class: class, policy: s.policy, m: s.metrics.class(class), log: s.log}
}

// receiveMiddleware times each user message in Receive and counts the
// panics that leave Receive, then lets them go on to the supervisor.
func receiveMiddleware(cm classMetrics) actor.ReceiverMiddleware {
	return measured(cm.event, func() {
		cm.failures.Inc()
		// The mailbox takes a message out (MessageReceived) only once it
		// has been handled; this one never will.
		cm.depth.Dec()
	}, nil, true)
}

// measured is the receive middleware of every supervised actor: it times
// user messages into observe, calls failed for a panic that leaves Receive
// and lets the panic go on to the supervisor, and calls before, when set,
// ahead of each user message (tests inject failures with it). With every
// set, each user message is timed; otherwise one in timedOneIn is, picked
// at random: a node's director handles two messages per request, and the
// two clock reads and the histogram's atomic adds of each (a histogram
// shared with the resident actors' goroutines on the other cores) were
// 2% of a request's CPU. A sampled latency keeps its distribution.
func measured(observe prometheus.Observer, failed func(), before func(msg any), every bool) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			var start time.Time
			user := true
			switch env.Message.(type) {
			case actor.SystemMessage, actor.AutoReceiveMessage:
				user = false // lifecycle: not an event, not timed
			default:
				if every || rand.Uint32()%timedOneIn == 0 {
					start = time.Now()
				}
			}
			defer func() {
				if !start.IsZero() {
					observe.Observe(time.Since(start).Seconds())
				}
				if p := recover(); p != nil {
					failed()
					panic(p) // the mailbox hands it to the supervisor
				}
			}()
			if before != nil && user {
				before(env.Message)
			}
			next(c, env)
		}
	}
}

// timedOneIn is how often the tree's own actors (not resident actors,
// whose every event is timed) time a message: one in timedOneIn.
const timedOneIn = 8

// depth keeps a class's mailbox gauge: every message posted to one of the
// class's mailboxes, system messages included, adds one; every message the
// mailbox is done with subtracts one. proto.actor reports a message
// received after its actor handled it, so the gauge counts the messages
// queued and the one in hand; a message whose handling panicked is never
// reported, and the receive middleware subtracts it instead. Both are
// atomic, so resident actors on any goroutines share the gauge. A mailbox
// keeps running until it is empty, also after its actor stopped (messages to a
// stopped actor are skipped, and still reported), so the gauge returns to
// zero.
type depth struct {
	g interface {
		Inc()
		Dec()
	}
}

func (d depth) MailboxStarted()     {}
func (d depth) MessagePosted(any)   { d.g.Inc() }
func (d depth) MessageReceived(any) { d.g.Dec() }
func (d depth) MailboxEmpty()       {}

var _ actor.MailboxMiddleware = depth{}

// strategy is one class's supervisor strategy.
type strategy struct {
	class  string
	policy Policy
	m      classMetrics
	log    *slog.Logger
}

// HandleFailure runs on the parent's goroutine. rs is the failed child's
// own restart history, kept by proto.actor across its restarts.
func (st *strategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, _ any) {
	if st.mayRestart(rs) {
		st.m.restarts.Inc()
		st.log.Warn("resident actor restarted", slog.String("class", st.class), slog.String("pid", child.Id),
			slog.String("reason", fmt.Sprint(reason)))
		sup.RestartChildren(child)
		return
	}
	st.log.Warn("resident actor stopped: too many restarts", slog.String("class", st.class), slog.String("pid", child.Id),
		slog.Int("max_restarts", st.policy.MaxRestarts), slog.Duration("within", st.policy.Within),
		slog.String("reason", fmt.Sprint(reason)))
	sup.StopChildren(child)
}

func (st *strategy) mayRestart(rs *actor.RestartStatistics) bool {
	if st.policy.MaxRestarts < 0 {
		return false
	}
	rs.Fail()
	if rs.NumberOfFailures(st.policy.Within) > st.policy.MaxRestarts {
		rs.Reset()
		return false
	}
	return true
}
