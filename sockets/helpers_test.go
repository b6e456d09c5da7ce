package sockets

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/wasmkeep/wasmkeep/internal/uring"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// wait bounds every wait of these tests.
const wait = 10 * time.Second

type event struct {
	kind   string // message, close, error
	actor  ownership.Actor
	id     ID
	text   bool
	data   string
	code   int
	reason string
	clean  bool
	err    error
}

// recorder is a Sink that checks the per-socket contract as it goes:
// Opened before anything, Gone exactly once, the terminal event last.
type recorder struct {
	mu        sync.Mutex
	opened    map[ownership.Actor]int
	gone      map[ownership.Actor]int
	terminals map[ownership.Actor]int
	ended     map[ID]bool
	problems  []string

	messages chan event
	ends     chan event
	// onMessage, if set (before any socket opens), is called after each
	// message is recorded: the actor's handling of it.
	onMessage func(a ownership.Actor, id ID, text bool, data []byte) error
	// onGone, if set (before any socket opens), is called after each Gone
	// is recorded.
	onGone func(a ownership.Actor)
}

func newRecorder() *recorder {
	return &recorder{
		opened: map[ownership.Actor]int{}, gone: map[ownership.Actor]int{},
		terminals: map[ownership.Actor]int{}, ended: map[ID]bool{},
		messages: make(chan event, 4096), ends: make(chan event, 4096),
	}
}

func (r *recorder) Opened(a ownership.Actor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opened[a]++
}

func (r *recorder) Gone(a ownership.Actor) {
	r.mu.Lock()
	r.gone[a]++
	if r.gone[a] > r.opened[a] {
		r.problems = append(r.problems, fmt.Sprintf("%s: Gone %d times, Opened %d", a, r.gone[a], r.opened[a]))
	}
	r.mu.Unlock()
	if r.onGone != nil {
		r.onGone(a)
	}
}

func (r *recorder) Message(a ownership.Actor, id ID, text bool, data []byte) error {
	r.mu.Lock()
	if r.ended[id] {
		r.problems = append(r.problems, fmt.Sprintf("socket %v: message after its terminal event", id))
	}
	r.mu.Unlock()
	r.messages <- event{kind: "message", actor: a, id: id, text: text, data: string(data)}
	if r.onMessage != nil {
		return r.onMessage(a, id, text, data)
	}
	return nil
}

func (r *recorder) terminal(e event) {
	r.mu.Lock()
	if r.ended[e.id] {
		r.problems = append(r.problems, fmt.Sprintf("socket %v: second terminal event %s", e.id, e.kind))
	}
	r.ended[e.id] = true
	r.terminals[e.actor]++
	if r.gone[e.actor] < r.terminals[e.actor] {
		r.problems = append(r.problems, fmt.Sprintf("socket %v: terminal event before Gone", e.id))
	}
	r.mu.Unlock()
	r.ends <- e
}

func (r *recorder) Close(a ownership.Actor, id ID, code int, reason string, clean bool) {
	r.terminal(event{kind: "close", actor: a, id: id, code: code, reason: reason, clean: clean})
}

func (r *recorder) Error(a ownership.Actor, id ID, err error) {
	r.terminal(event{kind: "error", actor: a, id: id, err: err})
}

func (r *recorder) counts(a ownership.Actor) (opened, gone int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opened[a], r.gone[a]
}

// next returns the next event of ch, failing the test after wait.
func next(t *testing.T, ch chan event) event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(wait):
		t.Fatalf("no event within %v", wait)
		return event{}
	}
}

// env is an Owner behind an HTTP server on 127.0.0.1 that accepts every
// request at /<class>/<name>?tags=a,b for that actor.
type env struct {
	t        *testing.T
	o        *Owner
	sink     *recorder
	reg      *prometheus.Registry
	srv      *httptest.Server
	accepted chan acceptResult
	// writerStopped receives once a writer goroutine of o has stopped
	// since it was last received from (one signal pending at most): see
	// awaitNoWriter.
	writerStopped chan struct{}
}

type acceptResult struct {
	id  ID
	err error
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	e := &env{t: t, sink: newRecorder(), reg: prometheus.NewRegistry(), accepted: make(chan acceptResult, 64), writerStopped: make(chan struct{}, 1)}
	cfg.Sink, cfg.Registerer = e.sink, e.reg
	o, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.o = o
	o.writerStopped = func() { // before any socket is accepted
		select {
		case e.writerStopped <- struct{}{}:
		default: // a signal is pending already
		}
	}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		var tags []string
		if q := r.URL.Query().Get("tags"); q != "" {
			tags = strings.Split(q, ",")
		}
		id, err := o.Accept(w, r, ownership.Actor{Class: parts[0], Name: parts[1]}, tags)
		e.accepted <- acceptResult{id, err}
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := o.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		e.srv.Close()
		e.sink.mu.Lock()
		defer e.sink.mu.Unlock()
		for _, p := range e.sink.problems {
			t.Error(p)
		}
		for a, n := range e.sink.opened {
			if e.sink.gone[a] != n || e.sink.terminals[a] != n {
				t.Errorf("%s: opened %d, gone %d, terminal events %d; want all equal", a, n, e.sink.gone[a], e.sink.terminals[a])
			}
		}
		if h := o.Held(); h != 0 {
			t.Errorf("%d slots held after shutdown", h)
		}
		if q, g := o.queued.Load(), value(t, o.m.queued); q != 0 || g != 0 {
			t.Errorf("%d bytes (gauge %v) counted as queued after shutdown, want 0", q, g)
		}
	})
	return e
}

// awaitNoWriter waits until no writer goroutine runs for s, a socket of
// e.o.
func (e *env) awaitNoWriter(s *socket) {
	e.t.Helper()
	timeout := time.After(wait)
	for {
		s.mu.Lock()
		writing := s.writing
		s.mu.Unlock()
		if !writing {
			return
		}
		select {
		case <-e.writerStopped:
		case <-timeout:
			e.t.Fatalf("the writer of socket %v did not stop within %v", s.id, wait)
		}
	}
}

// dial opens a client socket for class/name with tags and returns it with
// the ID the Owner gave it.
func (e *env) dial(a ownership.Actor, tags ...string) (*websocket.Conn, ID) {
	e.t.Helper()
	c, resp, err := e.tryDial(a, tags...)
	if err != nil {
		e.t.Fatalf("dial %s: %v (%v)", a, err, resp)
	}
	r := e.nextAccept()
	if r.err != nil {
		e.t.Fatalf("accept %s: %v", a, r.err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c, r.id
}

func (e *env) tryDial(a ownership.Actor, tags ...string) (*websocket.Conn, *http.Response, error) {
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/" + a.Class + "/" + a.Name
	if len(tags) > 0 {
		url += "?tags=" + strings.Join(tags, ",")
	}
	d := websocket.Dialer{HandshakeTimeout: wait}
	return d.Dial(url, nil)
}

func (e *env) nextAccept() acceptResult {
	e.t.Helper()
	select {
	case r := <-e.accepted:
		return r
	case <-time.After(wait):
		e.t.Fatalf("no accept within %v", wait)
		return acceptResult{}
	}
}

// readClose reads c until it fails, bounded, and returns the close error.
func readClose(t *testing.T, c *websocket.Conn) *websocket.CloseError {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	for range 1_000_000 {
		if _, _, err := c.ReadMessage(); err != nil {
			ce, ok := err.(*websocket.CloseError)
			if !ok {
				t.Fatalf("read: %v, want a close frame", err)
			}
			return ce
		}
	}
	t.Fatal("no close frame in a million messages")
	return nil
}

// readText reads one message from c, bounded.
func readText(t *testing.T, c *websocket.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, data, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(data)
}

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetCounter().GetValue() + out.GetGauge().GetValue()
}

// writePaths are the two ways a broadcast writes: its sends submitted
// together (io_uring, the default where it works) or one write(2) each.
var writePaths = []struct {
	name string
	cfg  Config
}{
	{"io_uring", Config{}},
	{"write", Config{NoIOUring: true}},
}

// needRings skips a test of the io_uring path where io_uring is refused,
// unless WASMKEEP_REQUIRE_IO_URING=1 (CI sets it). Where it is not
// refused, the test checks at its end that a ring was used.
func needRings(t *testing.T, e *env, cfg Config) {
	t.Helper()
	if cfg.NoIOUring {
		return
	}
	r, err := uring.New(1)
	if errors.Is(err, errors.ErrUnsupported) && os.Getenv("WASMKEEP_REQUIRE_IO_URING") != "1" {
		t.Skipf("io_uring refused here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() {
		if n := value(t, e.o.m.uringWrites); n == 0 {
			t.Errorf("no socket was written through a ring (rings off: %v)", e.o.rings.off)
		}
	})
}
