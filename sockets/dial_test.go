package sockets

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// service is a WebSocket service on 127.0.0.1 that outbound sockets dial:
// each connection it takes is handed to the test.
type service struct {
	srv   *httptest.Server
	conns chan *websocket.Conn
	heads chan http.Header
}

func newService(t *testing.T) *service {
	t.Helper()
	f := &service{conns: make(chan *websocket.Conn, 16), heads: make(chan http.Header, 16)}
	up := websocket.Upgrader{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		f.heads <- r.Header
		f.conns <- c
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *service) url(path string) string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") + path }

// next is the service's side of the next socket dialed to it.
func (f *service) next(t *testing.T) *websocket.Conn {
	t.Helper()
	select {
	case c := <-f.conns:
		t.Cleanup(func() { _ = c.Close() })
		return c
	case <-time.After(wait):
		t.Fatal("no outbound socket reached the service")
		return nil
	}
}

func plainDial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func TestDialIsASocketOfTheRoom(t *testing.T) {
	e := newEnv(t, Config{Dial: plainDial})
	f := newService(t)
	a := ownership.Actor{Class: "relay", Name: "r1"}
	id, err := e.o.Dial(context.Background(), a, DialRequest{URL: f.url("/feed"), Tags: []string{"service"}, Header: http.Header{"X-Token": {"t1"}, "Host": {"evil"}}})
	if err != nil {
		t.Fatal(err)
	}
	svc := f.next(t)
	if !id.Dialed() {
		t.Errorf("ID %v does not say it is dialed", id)
	}
	if h := <-f.heads; h.Get("X-Token") != "t1" {
		t.Errorf("handshake header X-Token = %q, want t1", h.Get("X-Token"))
	}
	if opened, _ := e.sink.counts(a); opened != 1 {
		t.Errorf("Opened %d times, want 1", opened)
	}
	if got := e.o.List(a, "service"); len(got) != 1 || got[0].ID != id || got[0].URL != f.url("/feed") {
		t.Fatalf("List = %+v, want the outbound socket with its URL", got)
	}
	if e.o.Held() != 1 {
		t.Errorf("held %d slots, want 1: an outbound socket counts against MaxSockets", e.o.Held())
	}

	// What the service sends reaches the Sink; what the actor sends, the
	// service (masked, as a client's frames are: gorilla's server checks).
	if err := svc.WriteMessage(websocket.TextMessage, []byte("tick")); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, e.sink.messages); ev.id != id || ev.data != "tick" || ev.actor != a {
		t.Fatalf("message %+v, want tick on %v", ev, id)
	}
	if err := e.o.Send(a, id, true, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if n, err := e.o.Broadcast(a, "service", true, []byte("all")); err != nil || n != 1 {
		t.Fatalf("broadcast = %d, %v; want 1", n, err)
	}
	if got := readText(t, svc); got != "hello" {
		t.Fatalf("service read %q, want hello", got)
	}
	if got := readText(t, svc); got != "all" {
		t.Fatalf("service read %q, want all", got)
	}
	// Frames of each length encoding, written directly (masked: gorilla's
	// server fails an unmasked one) or, past the direct bound, by gorilla.
	for _, size := range []int{125, 126, 200, 65535, 65536, 100_000} {
		msg := strings.Repeat(string(rune('a'+size%26)), size)
		if err := e.o.Send(a, id, true, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if got := readText(t, svc); got != msg {
			t.Fatalf("service read %d bytes, want the %d sent", len(got), size)
		}
	}

	// A release closes it as it closes the room's other sockets.
	if n := e.o.CloseActor(a, 1012, "drain"); n != 1 {
		t.Fatalf("CloseActor closed %d, want 1", n)
	}
	if ce := readClose(t, svc); ce.Code != 1012 {
		t.Fatalf("service saw close %d, want 1012", ce.Code)
	}
	_ = svc.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1012, ""), time.Now().Add(wait))
	if ev := next(t, e.sink.ends); ev.id != id || ev.kind != "close" || ev.code != 1012 {
		t.Fatalf("terminal event %+v, want a close 1012", ev)
	}
}

func TestDialServiceCloses(t *testing.T) {
	e := newEnv(t, Config{Dial: plainDial})
	f := newService(t)
	a := ownership.Actor{Class: "relay", Name: "r2"}
	id, err := e.o.Dial(context.Background(), a, DialRequest{URL: f.url("/feed")})
	if err != nil {
		t.Fatal(err)
	}
	svc := f.next(t)
	_ = svc.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "bye"), time.Now().Add(wait))
	ev := next(t, e.sink.ends)
	if ev.id != id || ev.kind != "close" || ev.code != 4001 || ev.reason != "bye" || !ev.clean {
		t.Fatalf("terminal event %+v, want a clean close 4001 bye", ev)
	}
	if ce := readClose(t, svc); ce.Code != 4001 {
		t.Errorf("echo %d, want 4001", ce.Code)
	}
}

func TestDialPingsAndClosesASilentService(t *testing.T) {
	e := newEnv(t, Config{Dial: plainDial, PingInterval: 100 * time.Millisecond, PongTimeout: 100 * time.Millisecond})
	// A service that takes the connection and never reads, so never
	// answers a ping (gorilla answers them as it reads).
	f := newService(t)
	a := ownership.Actor{Class: "relay", Name: "r3"}
	id, err := e.o.Dial(context.Background(), a, DialRequest{URL: f.url("/feed")})
	if err != nil {
		t.Fatal(err)
	}
	f.next(t)
	ev := next(t, e.sink.ends)
	if ev.id != id || ev.kind != "error" || !errors.Is(ev.err, ErrPingTimeout) {
		t.Fatalf("terminal event %+v, want the ping timeout", ev)
	}
}

func TestDialRefusals(t *testing.T) {
	f := newService(t)
	a := ownership.Actor{Class: "relay", Name: "r4"}
	ctx := context.Background()

	e := newEnv(t, Config{})
	if _, err := e.o.Dial(ctx, a, DialRequest{URL: f.url("/feed")}); !errors.Is(err, ErrNoDial) {
		t.Errorf("without a dialer: %v, want ErrNoDial", err)
	}

	refused := errors.New("not on the allow-list")
	e = newEnv(t, Config{MaxSockets: 1, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "127.0.0.2:") {
			return nil, refused
		}
		return plainDial(ctx, network, addr)
	}})
	for _, u := range []string{"http://x/", "ws://", "::"} {
		if _, err := e.o.Dial(ctx, a, DialRequest{URL: u}); !errors.Is(err, ErrInvalid) {
			t.Errorf("URL %q: %v, want ErrInvalid", u, err)
		}
	}
	if _, err := e.o.Dial(ctx, a, DialRequest{URL: "ws://127.0.0.2:1/"}); !errors.Is(err, refused) || !errors.Is(err, ErrDialFailed) {
		t.Errorf("refused by the dialer: %v, want its error and ErrDialFailed", err)
	}
	if _, err := e.o.Dial(ctx, a, DialRequest{URL: f.url("/missing")}); !errors.Is(err, ErrDialFailed) || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404: %v, want ErrDialFailed naming 404", err)
	}
	if e.o.Held() != 0 {
		t.Fatalf("%d slots held after failed dials", e.o.Held())
	}
	if _, err := e.o.Dial(ctx, a, DialRequest{URL: f.url("/feed")}); err != nil {
		t.Fatal(err)
	}
	f.next(t)
	if _, err := e.o.Dial(ctx, a, DialRequest{URL: f.url("/feed")}); !errors.Is(err, ErrTooManySockets) {
		t.Errorf("past MaxSockets: %v, want ErrTooManySockets", err)
	}
	if c, resp, err := e.tryDial(a); err == nil {
		c.Close()
		t.Error("an inbound socket was accepted past MaxSockets held by an outbound one")
	} else if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("inbound past MaxSockets: %v %v, want 503", resp, err)
	} else {
		e.nextAccept()
	}
}

func TestDialClosedByACloseDuringItsHandshake(t *testing.T) {
	e := newEnv(t, Config{Dial: plainDial})
	a := ownership.Actor{Class: "relay", Name: "r5"}
	// A service that waits for the test before it answers the handshake.
	reached, release := make(chan struct{}, 1), make(chan struct{})
	got := make(chan *websocket.Conn, 1)
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- struct{}{}
		<-release
		if c, err := up.Upgrade(w, r, nil); err == nil {
			got <- c
		}
	}))
	defer srv.Close()
	done := make(chan error, 1)
	go func() {
		_, err := e.o.Dial(context.Background(), a, DialRequest{URL: "ws" + strings.TrimPrefix(srv.URL, "http")})
		done <- err
	}()
	// The dial is pending from before it connects: once its handshake
	// reached the service, it is pending still, until the service answers.
	select {
	case <-reached:
	case <-time.After(wait):
		t.Fatal("the dial never reached the service")
	}
	pending := 0
	if r := e.o.rooms.find(a); r != nil {
		r.mu.Lock()
		pending = len(r.pending)
		r.mu.Unlock()
	}
	if pending != 1 {
		t.Fatalf("%d dials pending while the handshake waits, want 1", pending)
	}
	e.o.CloseActor(a, 1012, "drain")
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	svc := <-got
	defer svc.Close()
	if ce := readClose(t, svc); ce.Code != 1012 {
		t.Fatalf("the service saw %d, want 1012 from the close made during the dial", ce.Code)
	}
}
