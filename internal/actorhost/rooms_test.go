package actorhost_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
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

// roomHost is a host of the announcer class with a socket owner, whose
// first room actor waits for release before it sends (and answers) the
// first events it was handed.
func roomHost(t *testing.T, cfg actorhost.Config) (h *actorhost.Host, release func()) {
	t.Helper()
	o, err := sockets.New(sockets.Config{Sink: nopSockets{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = o.Shutdown(context.Background()) })
	reg := actors.NewRegistry()
	reg.Register("announcer", announcer{})
	cfg.Bucket, cfg.Registry, cfg.Sockets = memstore.New(memstore.Faults{}), reg, o
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

// carried waits until the first event was handed to a room actor: the
// rooms' actor spawns it for that event.
func carried(t *testing.T, h *actorhost.Host) {
	t.Helper()
	require.Eventually(t, func() bool { return h.RoomActors() == 1 }, 10*time.Second, time.Millisecond)
}

// TestHibernateAllWaitsForTheRoomActors: an event whose socket output a
// room actor holds is answered by it, before HibernateAll returns.
func TestHibernateAllWaitsForTheRoomActors(t *testing.T) {
	h, release := roomHost(t, actorhost.Config{})
	first := post(t, h)
	carried(t, h)
	stopped := make(chan error, 1)
	go func() { stopped <- h.HibernateAll(context.Background()) }()
	select {
	case err := <-first:
		t.Fatalf("the event was answered (%v) before its room actor sent its output", err)
	case err := <-stopped:
		t.Fatalf("HibernateAll returned (%v) while a room actor held an event", err)
	case <-time.After(100 * time.Millisecond):
	}
	require.Equal(t, 1, h.RoomActors())
	release()
	require.NoError(t, <-stopped)
	require.Zero(t, h.RoomActors(), "HibernateAll returned before the room actor ended")
	require.NoError(t, <-first, "the event took effect")
}

// TestCarriedEventOutlivesItsResident: an event handed to the room actor
// keeps the room actor's answer (it took effect) when its resident actor
// is stopped by its supervisor meanwhile: the director, which answers the
// events of a stopped actor "not run", leaves it alone. The next
// residency's output waits for the first's room actor to end: one actor's
// residencies reach its sockets in order.
func TestCarriedEventOutlivesItsResident(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := supervisors.NewMetrics(reg)
	require.NoError(t, err)
	sup, err := supervisors.New(m, supervisors.Policy{MaxRestarts: 1, Within: time.Hour}, nil)
	require.NoError(t, err)
	o := &panickyKeeper{}
	hibernated := make(chan string, 16)
	h, release := roomHost(t, actorhost.Config{Keeper: o, Supervision: sup,
		OnHibernate: func(_ ownership.Actor, _ ownership.Generation, reason string) { hibernated <- reason }})

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
	select {
	case err := <-first:
		t.Fatalf("the event the room actor holds was answered %v by someone else", err)
	default:
	}
	// The next residency reads what the first wrote; its output, and its
	// answer, wait for the first's room actor.
	second := post(t, h)
	select {
	case err := <-second:
		t.Fatalf("the next residency's event was answered (%v) while the room actor before it held an event", err)
	case <-time.After(100 * time.Millisecond):
	}
	require.Equal(t, 1, h.RoomActors())
	release()
	require.NoError(t, <-first, "the event took effect: its room actor answers it")
	require.NoError(t, <-second)
	require.Equal(t, 1, h.RoomActors(), "the next residency's room actor")
	resp, err := h.Deliver(t.Context(), announced, 1, &actors.Request{Method: http.MethodGet, Header: http.Header{}})
	require.NoError(t, err)
	require.Equal(t, "2", string(resp.Body))
}

// TestNoAnswerOvertakesCarriedOutput: once a residency has a room actor,
// a write without socket output, which its commit's landing alone would
// release, is answered by the room actor too, after the output of the
// events before it, not by its commit's goroutine as it lands.
func TestNoAnswerOvertakesCarriedOutput(t *testing.T) {
	h, release := roomHost(t, actorhost.Config{})
	first := post(t, h)
	carried(t, h)
	second := announce(t, h, http.MethodPut)
	select {
	case err := <-second:
		t.Fatalf("a write was answered (%v) before the output of the event before it went out", err)
	case err := <-first:
		t.Fatalf("the first event was answered (%v) before its output went out", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	require.NoError(t, <-first)
	require.NoError(t, <-second)
}
