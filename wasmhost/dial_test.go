package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// feed is a WebSocket service on 127.0.0.1 that outbound sockets dial: it
// hands each connection to the test, with the X-Token header of its
// handshake, and refuses the handshake on /refuse.
type feed struct {
	srv   *httptest.Server
	conns chan feedConn
}

type feedConn struct {
	*websocket.Conn
	token string
}

func newFeed(t *testing.T) *feed {
	t.Helper()
	f := &feed{conns: make(chan feedConn, 64)}
	up := websocket.Upgrader{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		if c, err := up.Upgrade(w, r, nil); err == nil {
			f.conns <- feedConn{Conn: c, token: r.Header.Get("X-Token")}
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// url is the feed's ws:// URL for path.
func (f *feed) url(path string) string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") + path }

// next is the next connection dialed to the feed.
func (f *feed) next(t *testing.T) feedConn {
	t.Helper()
	select {
	case c := <-f.conns:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(nodetest.Wait):
		t.Fatal("no socket reached the feed")
		return feedConn{}
	}
}

// allowFeed lets a node dial the feed.
func allowFeed(t *testing.T, f *feed) func(*node.Config) {
	return func(c *node.Config) {
		allow, err := egress.ParseAllow([]string{f.srv.Listener.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		c.Egress.Allow = allow
	}
}

// TestGuestDial: a wasm actor dials a WebSocket service, with a header
// and tags; what the service sends arrives as socket events of the actor,
// waking it after it hibernated, and what the guest sends reaches the
// service; the socket is listed with its URL; the service's close reaches
// the guest with the URL and tags. Refusals, failures, a rolled-back
// event and the limit come back as the SDK's errors.
func TestGuestDial(t *testing.T) {
	f := newFeed(t)
	r := newRuntime(t, Config{})
	mod := mustCompile(t, r, "probe", guest(t, probeGuest))
	if st := mod.Stats(); st.Minor != wire.Minor {
		t.Fatalf("the probe speaks minor version %d, want the SDK's %d", st.Minor, wire.Minor)
	}
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"probe": mod}, IdleTimeout: 150 * time.Millisecond,
		Configure: allowFeed(t, f)})
	dial := func(query string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, n.URL+"/actor/probe/a/dial?"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Token", "tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("dial ?%s = %d %q", query, resp.StatusCode, b)
		}
		return string(b)
	}
	u := f.url("/feed")
	got := dial("tags=feed,x&url=" + url.QueryEscape(u))
	var id uint64
	if _, err := fmt.Sscanf(got, "socket %d dialed=true", &id); err != nil || id&wire.SocketDialed == 0 {
		t.Fatalf("dial = %q, want a dialed socket", got)
	}
	c := f.next(t)
	if c.token != "tok" {
		t.Fatalf("the handshake's X-Token = %q, want tok", c.token)
	}
	// The service sends the probe's commands; it answers on the socket.
	ask := func(cmd, want string) {
		t.Helper()
		if err := c.WriteMessage(websocket.TextMessage, []byte(cmd)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(nodetest.Wait))
		_, b, err := c.ReadMessage()
		if err != nil || string(b) != want {
			t.Fatalf("%q: %q, %v; want %q", cmd, b, err, want)
		}
	}
	ask("echo hello", "hello")
	ask("list feed", fmt.Sprintf("%d:feed,x::%s", id, u))
	n.AwaitIdle(t, "probe/a")
	ask("echo woken", "woken") // the message woke the actor
	ask("put k v", "put")

	// The service closes: the guest gets the close, with the URL and tags.
	if err := c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "rotate"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("closed/%d=4000 rotate clean %s feed,x\n", id, u)
	// The close travels over a real WebSocket to a node over real TCP, and
	// reaches the guest as an event of its own: nothing the test holds
	// says when it has run, so its record is read until it is there.
	deadline := time.Now().Add(nodetest.Wait)
	for {
		resp, err := http.Get(n.URL + "/actor/probe/a/list?prefix=closed/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("closes recorded: %q, want %q", b, want)
		}
		time.Sleep(10 * time.Millisecond)
	}

	for _, tt := range []struct{ query, want string }{
		{"url=" + url.QueryEscape("ws://10.1.2.3/feed"), "error: guest: outbound socket refused by the egress allow-list"},
		{"url=" + url.QueryEscape(f.srv.URL+"/feed"), "error: guest: bad outbound socket"}, // http://
		{"tags=a,,b&url=" + url.QueryEscape(u), "error: guest: bad outbound socket"},
		{"rollback&url=" + url.QueryEscape(u), "error: guest: bad outbound socket"},
		{"url=" + url.QueryEscape(f.url("/refuse")), "error: guest: outbound socket failed"},
	} {
		if got := dial(tt.query); got != tt.want {
			t.Errorf("dial ?%s = %q, want %q", tt.query, got, tt.want)
		}
	}
	// The limit: the first 16 of one event open, the 17th is refused.
	if got, want := dial("n=17&url="+url.QueryEscape(u)), "error: guest: too many outbound sockets"; got != want {
		t.Errorf("17 dials = %q, want %q", got, want)
	}
	for range actors.MaxDialed {
		f.next(t) // closed as the test ends, before the node stops
	}
}

// TestDialMalformed: a malformed ws_dial encoding is an ABI violation:
// the event fails and the guest is discarded.
func TestDialMalformed(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{}
	req := get("/dial-raw", "")
	req.Body = wire.AppendString(nil, "ws://x/")
	req.Body = wire.AppendU32(req.Body, 1) // a header that is not there
	if _, err := g.Handle(context.Background(), req, st); !errors.Is(err, ErrGuest) || g.Started() {
		t.Fatalf("malformed dial: err %v, started %v; want ErrGuest and the guest discarded", err, g.Started())
	}
}

// TestDialCode: ws_dial's answer for each error of actors.DialSocket.
func TestDialCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code int64
	}{
		{fmt.Errorf("x: %w", actors.ErrBadFetch), -1},
		{fmt.Errorf("x: %w", actors.ErrFetchRefused), -2},
		{fmt.Errorf("x: %w", actors.ErrLimit), -3},
		{fmt.Errorf("x: %w", actors.ErrUnavailable), -4},
		{fmt.Errorf("x: %w", actors.ErrFetchFailed), -5},
		{errors.New("anything else"), -5},
		{actors.ErrNoSockets, -6},
	} {
		if got := dialCode(tt.err); got != tt.code {
			t.Errorf("dialCode(%v) = %d, want %d", tt.err, got, tt.code)
		}
	}
	if wire.SocketDialed != 1<<62 || !actors.SocketID(wire.SocketDialed).Dialed() {
		t.Fatal("the guests' dialed bit is not the runtime's")
	}
}
