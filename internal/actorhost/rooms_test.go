package actorhost_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
	"github.com/wasmkeep/wasmkeep/sockets"
	"github.com/wasmkeep/wasmkeep/supervisors"
)

// announcer counts its POSTs and PUTs in storage; a POST also broadcasts
// the count to the actor's sockets (there are none here: the output is
// sent to nobody, but it is the actor's socket output all the same).
type announcer struct{}

func (announcer) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	n := 0
	if v, ok := st.Get("n"); ok {
		n, _ = strconv.Atoi(string(v))
	}
	if req.Method != http.MethodPost && req.Method != http.MethodPut {
		return actors.Text(http.StatusOK, strconv.Itoa(n)), nil
	}
	n++
	if err := st.Put("n", []byte(strconv.Itoa(n))); err != nil {
		return nil, err
	}
	if req.Method == http.MethodPost {
		actors.SocketsOf(ctx).Broadcast("", true, []byte(strconv.Itoa(n)))
	}
	return actors.Text(http.StatusOK, strconv.Itoa(n)), nil
}

func (announcer) HandleSocket(context.Context, *actors.SocketEvent, actors.Storage) error { return nil }

var announced = ownership.Actor{Class: "announcer", Name: "a"}

// roomHost is a host of class (registered as the announcer) with a socket
// owner, on cfg.Bucket (a memstore when nil), whose first room actor waits
// for release before it sends (and answers) the first events it was
// handed.
func roomHost(t *testing.T, cfg actorhost.Config, class actors.Class) (h *actorhost.Host, release func()) {
	t.Helper()
	o, err := sockets.New(sockets.Config{Sink: nopSockets{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = o.Shutdown(context.Background()) })
	reg := actors.NewRegistry()
	reg.Register(announced.Class, class)
	if cfg.Bucket == nil {
		cfg.Bucket = memstore.New(memstore.Faults{})
	}
	cfg.Registry, cfg.Sockets = reg, o
	h = hostOf(t, cfg)
	hold := make(chan struct{})
	release = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // before the hibernation hostOf's cleanup waits for
	var calls atomic.Int64
	h.HoldRoomOutput(func() {
		if calls.Add(1) == 1 {
			<-hold
		}
	})
	return h, release
}

// post sends a POST to the announcer and returns its answer on a channel.
func post(t *testing.T, h *actorhost.Host) <-chan error { return announce(t, h, http.MethodPost) }

// announce sends a request to the announcer and returns its answer on a
// channel.
func announce(t *testing.T, h *actorhost.Host, method string) <-chan error {
	done := make(chan error, 1)
	go func() {
		resp, err := h.Deliver(context.Background(), announced, 1, &actors.Request{Method: method, Header: http.Header{}})
		if err == nil && resp.Status != http.StatusOK {
			err = errors.New(string(resp.Body))
		}
		done <- err
	}()
	return done
}

// carried waits until everything in the test's bubble is blocked, and
// checks that the first event was handed to a room actor (the rooms'
// actor spawns one for it), which holds it.
func carried(t *testing.T, h *actorhost.Host) {
	t.Helper()
	synctest.Wait()
	require.Equal(t, 1, h.RoomActors(), "room actors holding the first event")
}

// unanswered fails t if any of events has its answer once everything in
// the test's bubble is blocked.
func unanswered(t *testing.T, why string, events ...<-chan error) {
	t.Helper()
	synctest.Wait()
	for i, e := range events {
		select {
		case err := <-e:
			t.Fatalf("event %d answered (%v) %s", i, err, why)
		default:
		}
	}
}

// deadLettersPass lets the period of proto.actor's dead-letter throttle
// pass, on the bubble's clock: a message to a stopped actor starts a
// goroutine that waits it out, and a bubble ends only once every
// goroutine has.
func deadLettersPass() { time.Sleep(time.Minute) }

// answered returns the answer of event once everything in the test's
// bubble is blocked, and fails t if it has none by then.
func answered(t *testing.T, event <-chan error, what string) error {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-event:
		return err
	default:
		t.Fatalf("%s was never answered", what)
		return nil
	}
}

// TestHibernateAllWaitsForTheRoomActors: an event whose socket output a
// room actor holds is answered by it, before HibernateAll returns.
func TestHibernateAllWaitsForTheRoomActors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, release := roomHost(t, actorhost.Config{}, announcer{})
		first := post(t, h)
		carried(t, h)
		stopped := make(chan error, 1)
		go func() { stopped <- h.HibernateAll(context.Background()) }()
		unanswered(t, "while its room actor held it, or HibernateAll returned", first, stopped)
		require.Equal(t, 1, h.RoomActors())
		release()
		require.NoError(t, <-stopped)
		require.Zero(t, h.RoomActors(), "HibernateAll returned before the room actor ended")
		require.NoError(t, <-first, "the event took effect")
	})
}

// TestCarriedEventOutlivesItsResident: an event handed to the room actor
// keeps the room actor's answer (it took effect) when its resident actor
// is stopped by its supervisor meanwhile: the director, which answers the
// events of a stopped actor "not run", leaves it alone. The next
// residency's output waits for the first's room actor to end: one actor's
// residencies reach its sockets in order.
func TestCarriedEventOutlivesItsResident(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := supervisors.NewMetrics(reg)
		require.NoError(t, err)
		sup, err := supervisors.New(m, supervisors.Policy{MaxRestarts: 1, Within: time.Hour}, nil)
		require.NoError(t, err)
		o := &panickyKeeper{}
		hibernated := make(chan string, 16)
		h, release := roomHost(t, actorhost.Config{Keeper: o, Supervision: sup,
			OnHibernate: func(_ ownership.Actor, _ ownership.Generation, reason string) { hibernated <- reason }}, announcer{})

		first := post(t, h)
		carried(t, h)
		// A read's output gate asks the keeper, which panics: the resident
		// actor restarts, then is stopped.
		o.armed.Store(true)
		for range 2 {
			if _, err := h.Deliver(t.Context(), announced, 1, &actors.Request{Method: http.MethodGet, Header: http.Header{}}); !errors.Is(err, actors.ErrUnavailable) {
				t.Fatalf("read that panicked: %v, want ErrUnavailable", err)
			}
		}
		o.armed.Store(false)
		require.Equal(t, "stopped by supervisor", <-hibernated)
		unanswered(t, "by someone else than the room actor holding it", first)
		// The next residency reads what the first wrote; its output, and its
		// answer, wait for the first's room actor.
		second := post(t, h)
		unanswered(t, "while the room actor before it held an event", second)
		require.Equal(t, 1, h.RoomActors())
		release()
		require.NoError(t, <-first, "the event took effect: its room actor answers it")
		require.NoError(t, <-second)
		require.Equal(t, 1, h.RoomActors(), "the next residency's room actor")
		resp, err := h.Deliver(t.Context(), announced, 1, &actors.Request{Method: http.MethodGet, Header: http.Header{}})
		require.NoError(t, err)
		require.Equal(t, "2", string(resp.Body))
		deadLettersPass()
	})
}

// TestNoAnswerOvertakesCarriedOutput: once a residency has a room actor,
// a write without socket output, which its commit's landing alone would
// release, is answered by the room actor too, after the output of the
// events before it, not by its commit's goroutine as it lands.
func TestNoAnswerOvertakesCarriedOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, release := roomHost(t, actorhost.Config{}, announcer{})
		first := post(t, h)
		carried(t, h)
		second := announce(t, h, http.MethodPut)
		unanswered(t, "before the output of the first event went out", first, second)
		release()
		require.NoError(t, <-first)
		require.NoError(t, <-second)
	})
}

// stateGate holds each Put of key, while armed, until gate lets it go,
// telling entered first.
type stateGate struct {
	ownership.Bucket
	key     string
	armed   atomic.Bool
	entered chan struct{}
	gate    chan struct{}
}

func (b *stateGate) Put(ctx context.Context, key string, body []byte, c ownership.Condition) (ownership.ETag, error) {
	if key == b.key && b.armed.Load() {
		b.entered <- struct{}{}
		<-b.gate
	}
	return b.Bucket.Put(ctx, key, body, c)
}

// gatedState is a memstore whose Puts of a's state object wait at the
// gate while armed.
func gatedState(a ownership.Actor) *stateGate {
	return &stateGate{Bucket: memstore.New(memstore.Faults{}), key: actorstore.StateKey(a), entered: make(chan struct{}, 4), gate: make(chan struct{}, 4)}
}

// pidSupervision keeps the PID of the last resident actor started.
type pidSupervision struct {
	mu  sync.Mutex
	pid *actor.PID
}

func (s *pidSupervision) Props(string) []actor.PropsOption {
	return []actor.PropsOption{actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Started); ok {
				s.mu.Lock()
				s.pid = c.Self()
				s.mu.Unlock()
			}
			next(c, env)
		}
	})}
}
func (s *pidSupervision) Strategy(string) actor.SupervisorStrategy {
	return actor.DefaultSupervisorStrategy()
}
func (s *pidSupervision) EventFailed(string) {}

// ranAnnouncer is the announcer telling ran each request it handled.
type ranAnnouncer struct {
	announcer
	ran chan string
}

func (a ranAnnouncer) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	r, err := a.announcer.Handle(ctx, req, st)
	a.ran <- req.Method
	return r, err
}

// TestLastCarryOfAStoppedResident: a resident actor is stopped (a
// supervisor's stop, the director's restart) while the commit of its first
// event with socket output is in flight and a write waits behind it. Its
// Stopped hands the first event over, after proto.actor dropped the actor
// from its registry, so the rooms' actor's Watch gets Terminated at once
// and tells the new room actor to end; then the write lands and goes
// over too. The write is answered (it took effect): it goes to a room
// actor of its own once the first has ended, not to one already told to
// end.
func TestLastCarryOfAStoppedResident(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ran := make(chan string, 16)
		b := gatedState(announced)
		sup := &pidSupervision{}
		h, release := roomHost(t, actorhost.Config{Bucket: b, Supervision: sup}, ranAnnouncer{ran: ran})

		require.NoError(t, <-announce(t, h, http.MethodPut)) // loaded, no room
		<-ran
		b.armed.Store(true)
		a := post(t, h) // A: broadcast; its commit C1 waits at the gate
		<-ran
		<-b.entered
		bb := announce(t, h, http.MethodPut) // B: a write, waits behind C1
		<-ran
		sup.mu.Lock()
		pid := sup.pid
		sup.mu.Unlock()
		h.System().Root.Stop(pid)
		synctest.Wait()
		b.gate <- struct{}{} // C1 lands in Stopped: A carried (the first carry); C2 starts
		<-b.entered
		carried(t, h)        // and Terminated (a dead letter), residentGoneMsg, roomEndMsg
		b.gate <- struct{}{} // C2 lands: B waits for the room actor's PID, then roomLast
		synctest.Wait()
		release()
		require.NoError(t, answered(t, a, "A"))
		require.NoError(t, answered(t, bb, "B (a write that landed; its last carry went to a room actor already told to end)"))
		deadLettersPass()
	})
}

// TestRestartCarriesWhatItReleases: a restart's settling (gateAll)
// releases a write that landed; in a residency with a room actor it goes
// through it, after the output of the event released before, not answered
// at once.
func TestRestartCarriesWhatItReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ran := make(chan string, 16)
		b := gatedState(announced)
		k := &panickyKeeper{}
		h, release := roomHost(t, actorhost.Config{Bucket: b, Keeper: k}, ranAnnouncer{ran: ran})
		a := post(t, h) // A: broadcast, carried; its room actor is held
		<-ran
		carried(t, h)
		b.armed.Store(true)
		bb := announce(t, h, http.MethodPut) // B: a write; its commit C2 waits at the gate
		<-ran
		<-b.entered
		x := announce(t, h, http.MethodGet) // X: a read behind B
		<-ran
		k.armed.Store(true)
		b.gate <- struct{}{} // C2 lands: release asks MayActNow for X, which panics: restart, gateAll
		unanswered(t, "while A's output, released before it, is held in the room actor", bb)
		k.armed.Store(false)
		release()
		<-a
		<-x
	})
}
