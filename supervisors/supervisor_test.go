package supervisors_test

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/supervisors"
)

// Messages to the test resident actor.
type (
	boom  struct{}                              // panics out of Receive
	block struct{ entered, free chan struct{} } // waits for free
	ping  struct{ done chan struct{} }          // closes done
)

// testResident stands in for a resident actor: unlike actors' residentActor
// it lets its panics reach the supervisor.
type testResident struct{ started chan<- struct{} }

func (tr *testResident) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		tr.started <- struct{}{}
	case boom:
		panic("boom")
	case block:
		close(m.entered)
		<-m.free
	case ping:
		close(m.done)
	}
}

// parent stands in for the director: it spawns one resident actor of class with
// the supervisor's props and supervises it with the class's strategy.
type parent struct {
	props      *actor.Props
	child      chan<- *actor.PID
	terminated chan<- struct{}
}

func (p *parent) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		p.child <- ctx.Spawn(p.props)
	case *actor.Terminated:
		close(p.terminated)
	}
}

type fixture struct {
	system     *actor.ActorSystem
	reg        *prometheus.Registry
	child      *actor.PID
	started    chan struct{}
	terminated chan struct{}
}

func newFixture(t *testing.T, class string, p supervisors.Policy, extra ...func(*supervisors.Supervisor) actor.PropsOption) *fixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := supervisors.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := supervisors.New(m, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{system: actor.NewActorSystem(), reg: reg, started: make(chan struct{}, 16), terminated: make(chan struct{})}
	childc := make(chan *actor.PID, 1)
	opts := s.Props(class)
	for _, e := range extra {
		opts = append(opts, e(s))
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &testResident{started: f.started} }, opts...)
	parentPID := f.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &parent{props: props, child: childc, terminated: f.terminated}
	}, actor.WithSupervisor(s.Strategy(class))))
	t.Cleanup(func() {
		if err := f.system.Root.PoisonFuture(parentPID).Wait(); err != nil {
			t.Log(err)
		}
	})
	f.child = <-childc
	<-f.started
	return f
}

// metric reads one series of reg by name, for class.
func metric(t *testing.T, reg *prometheus.Registry, name, class string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != class {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no %s{class=%q}", name, class)
	return 0
}

// TestRestartThenStop: a resident actor whose panic reaches the supervisor is
// restarted (a fresh Started) and counted, up to MaxRestarts; the next
// failure in the window stops it.
func TestRestartThenStop(t *testing.T) {
	f := newFixture(t, "c", supervisors.Policy{MaxRestarts: 2, Within: 1 << 62})
	for i := 1; i <= 2; i++ {
		f.system.Root.Send(f.child, boom{})
		<-f.started // restarted
		if got := metric(t, f.reg, "wasmkeep_actor_restarts_total", "c"); got != float64(i) {
			t.Fatalf("restarts after %d failures: %v", i, got)
		}
	}
	f.system.Root.Send(f.child, boom{})
	<-f.terminated
	if got := metric(t, f.reg, "wasmkeep_actor_restarts_total", "c"); got != 2 {
		t.Fatalf("restarts after the stop: %v", got)
	}
	if got := metric(t, f.reg, "wasmkeep_actor_failures_total", "c"); got != 3 {
		t.Fatalf("failures: %v", got)
	}
	select {
	case <-f.started:
		t.Fatal("restarted past the policy")
	default:
	}
}

// TestStopAtOnce: a negative MaxRestarts stops at the first failure.
func TestStopAtOnce(t *testing.T) {
	f := newFixture(t, "c", supervisors.Policy{MaxRestarts: -1})
	f.system.Root.Send(f.child, boom{})
	<-f.terminated
	if got := metric(t, f.reg, "wasmkeep_actor_restarts_total", "c"); got != 0 {
		t.Fatalf("restarts: %v", got)
	}
}

// TestEventLatencyAndFailures: every user message is timed, a panic is
// also counted as a failure; lifecycle messages are not timed.
func TestEventLatencyAndFailures(t *testing.T) {
	f := newFixture(t, "timed", supervisors.Policy{})
	for range 3 {
		done := make(chan struct{})
		f.system.Root.Send(f.child, ping{done: done})
		<-done
	}
	f.system.Root.Send(f.child, boom{})
	<-f.started
	// The middleware observes after Receive returns: one more message
	// through the mailbox orders this read after the last observation.
	done := make(chan struct{})
	f.system.Root.Send(f.child, ping{done: done})
	<-done
	if got := metric(t, f.reg, "wasmkeep_actor_failures_total", "timed"); got != 1 {
		t.Fatalf("failures: %v", got)
	}
	// 3 pings and the boom; the last ping may still be being observed.
	if got := metric(t, f.reg, "wasmkeep_actor_event_seconds", "timed"); got < 4 || got > 5 {
		t.Fatalf("event observations: %v", got)
	}
}

// seen reports, on the mailbox goroutine, when the mailbox is done with
// msg: installed after the depth statistics, it runs after their update.
type seen struct {
	msg  any
	done chan struct{}
}

func (s seen) MailboxStarted()   {}
func (s seen) MessagePosted(any) {}
func (s seen) MailboxEmpty()     {}
func (s seen) MessageReceived(m any) {
	if m == s.msg {
		close(s.done)
	}
}

// TestMailboxDepth: messages queued behind a blocked one show in the
// class's gauge, which returns to zero once the mailbox is done with them.
func TestMailboxDepth(t *testing.T) {
	last := ping{done: make(chan struct{})}
	handled := seen{msg: last, done: make(chan struct{})}
	f := newFixture(t, "q", supervisors.Policy{}, func(s *supervisors.Supervisor) actor.PropsOption {
		return actor.WithMailbox(actor.Unbounded(s.MailboxStatistics("q"), handled))
	})
	b := block{entered: make(chan struct{}), free: make(chan struct{})}
	f.system.Root.Send(f.child, b)
	<-b.entered
	f.system.Root.Send(f.child, ping{done: make(chan struct{})})
	f.system.Root.Send(f.child, ping{done: make(chan struct{})})
	f.system.Root.Send(f.child, last)
	// The blocked event in hand and three queued behind it.
	if got := metric(t, f.reg, "wasmkeep_actor_mailbox_depth", "q"); got != 4 {
		t.Fatalf("depth behind a blocked event: %v", got)
	}
	close(b.free)
	<-handled.done
	if got := metric(t, f.reg, "wasmkeep_actor_mailbox_depth", "q"); got != 0 {
		t.Fatalf("depth after: %v", got)
	}
}

// TestMetricsTwice: a second NewMetrics on one registry shares the first's
// collectors instead of panicking or failing.
func TestMetricsTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	m1, err := supervisors.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := supervisors.NewMetrics(reg)
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	for _, m := range []*supervisors.Metrics{m1, m2} {
		s, err := supervisors.New(m, supervisors.Policy{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Props("x") // creates the class's series
	}
	if got := metric(t, reg, "wasmkeep_actor_restarts_total", "x"); got != 0 {
		t.Fatalf("restarts: %v", got)
	}
	if _, err := supervisors.NewMetrics(nil); err == nil {
		t.Fatal("no registerer accepted")
	}
}
