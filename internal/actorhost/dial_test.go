package actorhost_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// dialer is a class whose requests store their body under "note", dial
// the query's "url" with tag "feed", and answer the socket's ID; its
// socket events count the closes of dialed sockets under "closes", with
// the URL each came with under "closed/<id>", and, if told is set, send
// the socket's ID on it.
type dialer struct{ told chan<- string }

func (dialer) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if req.Method == http.MethodGet {
		v, _ := st.Get("closes")
		return actors.Text(http.StatusOK, string(v)), nil
	}
	if err := st.Put("note", req.Body); err != nil {
		return nil, err
	}
	id, err := actors.DialSocket(ctx, &actors.SocketDial{URL: req.Query.Get("url"), Tags: []string{"feed"}})
	if err != nil {
		return nil, err
	}
	list := actors.SocketsOf(ctx).List("feed")
	if len(list) != 1 || list[0].ID != id || !id.Dialed() {
		return nil, fmt.Errorf("listed %+v, want the dialed socket %v", list, id)
	}
	return actors.Text(http.StatusOK, id.String()+" "+list[0].URL), nil
}

func (d dialer) HandleSocket(ctx context.Context, ev *actors.SocketEvent, st actors.Storage) error {
	if ev.Kind == actors.SocketMessage || !ev.Socket.Dialed() {
		return nil
	}
	n := 0
	if v, ok := st.Get("closes"); ok {
		n, _ = strconv.Atoi(string(v))
	}
	if err := st.Put("closed/"+ev.Socket.String(), []byte(fmt.Sprintf("%d %s %v", ev.Code, ev.URL, ev.Tags))); err != nil {
		return err
	}
	if err := st.Put("closes", []byte(strconv.Itoa(n+1))); err != nil {
		return err
	}
	if d.told != nil {
		select {
		case d.told <- ev.Socket.String():
		default:
		}
	}
	return nil
}

// nopSockets is a socket owner's Sink that drops every event.
type nopSockets struct{}

func (nopSockets) Opened(ownership.Actor)                                  {}
func (nopSockets) Gone(ownership.Actor)                                    {}
func (nopSockets) Message(ownership.Actor, sockets.ID, bool, []byte) error { return nil }
func (nopSockets) Close(ownership.Actor, sockets.ID, int, string, bool)    {}
func (nopSockets) Error(ownership.Actor, sockets.ID, error)                {}

// endedSink is a socket owner's Sink that sends the ID of each socket on
// ended at its terminal event (Close or Error), which comes once the
// socket's slot is freed, and drops every other event.
type endedSink struct {
	nopSockets
	ended chan sockets.ID
}

func (s endedSink) Close(_ ownership.Actor, id sockets.ID, _ int, _ string, _ bool) { s.ended <- id }
func (s endedSink) Error(_ ownership.Actor, id sockets.ID, _ error)                 { s.ended <- id }

// dialHost is a host of the dialer class with a socket owner whose dials
// go through an egress that allows 127.0.0.1.
func dialHost(t *testing.T, b ownership.Bucket) (*actorhost.Host, *sockets.Owner) {
	t.Helper()
	return dialHostOf(t, b, nopSockets{}, dialer{})
}

// dialHostOf is dialHost with the socket owner's sink and the class given.
func dialHostOf(t *testing.T, b ownership.Bucket, sink sockets.Sink, class dialer) (*actorhost.Host, *sockets.Owner) {
	t.Helper()
	allow, err := egress.ParseAllow([]string{"127.0.0.1"})
	require.NoError(t, err)
	f, err := egress.New(egress.Config{Allow: allow})
	require.NoError(t, err)
	o, err := sockets.New(sockets.Config{Sink: sink, Dial: f.Dial})
	require.NoError(t, err)
	t.Cleanup(func() { _ = o.Shutdown(context.Background()) })
	reg := actors.NewRegistry()
	reg.Register("dialer", class)
	return hostOf(t, actorhost.Config{Bucket: b, Registry: reg, Fetcher: f, Sockets: o, ErrorsInAnswers: true}), o
}

// TestDialIsACommitPoint: the event's writes before a dial are in the
// bucket when the service takes the connection; the socket is the
// actor's, listed with its URL; its close reaches the actor once, with
// the URL and tags it was dialed with, however often it is delivered.
func TestDialIsACommitPoint(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	a := ownership.Actor{Class: "dialer", Name: "d"}
	var seen atomic.Value
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		snap, err := actorstore.ReadActor(r.Context(), b, a)
		if err == nil {
			v, _, _ := snap.Get(r.Context(), "note")
			seen.Store(string(v))
		}
		if c, err := up.Upgrade(w, r, nil); err == nil {
			go func() { // hold it, answering pings, until it closes
				defer c.Close()
				for {
					if _, _, err := c.ReadMessage(); err != nil {
						return
					}
				}
			}()
		}
	}))
	defer srv.Close()
	h, o := dialHost(t, b)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/feed"
	req := &actors.Request{Method: http.MethodPost, Header: http.Header{}, Query: map[string][]string{"url": {url}}, Body: []byte("first")}
	resp, err := h.Deliver(t.Context(), a, 1, req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, "first", seen.Load(), "the service saw the write made before the dial")
	idText, gotURL, _ := strings.Cut(string(resp.Body), " ")
	require.Equal(t, url, gotURL)
	id, err := strconv.ParseUint(idText, 10, 64)
	require.NoError(t, err)
	require.True(t, o.Holds(a, sockets.ID(id)))

	require.NoError(t, o.Close(a, sockets.ID(id), 1000, "done"))
	ev := &actors.SocketEvent{Kind: actors.SocketClose, Socket: actors.SocketID(id), Code: 1000, Clean: true}
	for range 2 {
		_, err := h.DeliverSocket(t.Context(), a, 1, ev)
		require.NoError(t, err)
	}
	resp, err = h.Deliver(t.Context(), a, 1, &actors.Request{Method: http.MethodGet, Header: http.Header{}})
	require.NoError(t, err)
	require.Equal(t, "1", string(resp.Body), "the close reached the actor once")
}

// TestDialRefusedCommitsNothing: a dial the allow-list refuses, or one
// with bad tags, fails the event before anything is committed or dialed;
// one that reaches no service leaves what the event wrote before it
// (committed first) and no socket.
func TestDialRefusedCommitsNothing(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	a := ownership.Actor{Class: "dialer", Name: "r"}
	h, o := dialHost(t, b)
	for _, tc := range []struct {
		url  string
		want error
	}{
		{"ws://10.9.8.7/feed", actors.ErrFetchRefused},
		{"http://127.0.0.1/x", actors.ErrBadFetch},
		{"ws://127.0.0.1:1/no", nil}, // allowed, then no connection
	} {
		url, want := tc.url, tc.want
		req := &actors.Request{Method: http.MethodPost, Header: http.Header{}, Query: map[string][]string{"url": {url}}, Body: []byte(url)}
		resp, err := h.Deliver(t.Context(), a, 1, req)
		require.NoError(t, err)
		require.Equal(t, http.StatusInternalServerError, resp.Status)
		snap, err := actorstore.ReadActor(t.Context(), b, a)
		require.NoError(t, err)
		if want != nil {
			require.Contains(t, string(resp.Body), want.Error(), url)
			require.False(t, snap.Exists(), "%s: nothing was committed", url)
			continue
		}
		require.Contains(t, string(resp.Body), actors.ErrFetchFailed.Error())
		note, _, err := snap.Get(t.Context(), "note")
		require.NoError(t, err)
		require.Equal(t, url, string(note), "the write before the dial was committed first")
	}
	require.Equal(t, 0, o.Held(), "no socket is held")
}

// TestDialGoneIsToldAtTheNextWake: an outbound socket closed while its
// close event could not reach the actor (here: dropped by the sink, as on
// a node that released the actor) is told to the actor when its state
// next loads, with 1006, the URL and the tags; once.
func TestDialGoneIsToldAtTheNextWake(t *testing.T) {
	b := memstore.New(memstore.Faults{})
	a := ownership.Actor{Class: "dialer", Name: "w"}
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := up.Upgrade(w, r, nil); err == nil {
			go func() {
				defer c.Close()
				for {
					if _, _, err := c.ReadMessage(); err != nil {
						return
					}
				}
			}()
		}
	}))
	defer srv.Close()
	ended, told := make(chan sockets.ID, 4), make(chan string, 4)
	h, o := dialHostOf(t, b, endedSink{ended: ended}, dialer{told: told})
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/feed"
	resp, err := h.Deliver(t.Context(), a, 1, &actors.Request{Method: http.MethodPost, Header: http.Header{}, Query: map[string][]string{"url": {url}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	id, _, _ := strings.Cut(string(resp.Body), " ")
	idn, err := strconv.ParseUint(id, 10, 64)
	require.NoError(t, err)
	record := fmt.Sprintf("%sdial/%016x-%016x", actors.NodePrefix, o.Stamp(), idn)
	snap, err := actorstore.ReadActor(t.Context(), b, a)
	require.NoError(t, err)
	_, ok, err := snap.Get(t.Context(), record)
	require.NoError(t, err)
	require.True(t, ok, "the socket's record is in the bucket once DialSocket returned")

	require.Equal(t, 1, o.CloseActor(a, 1012, "drain"))
	// The sink hears of the close once the socket's slot is freed; the
	// actor does not (its sink drops it).
	select {
	case got := <-ended:
		require.Equal(t, sockets.ID(idn), got)
	case <-time.After(10 * time.Second):
		t.Fatal("the socket did not end")
	}
	require.Equal(t, 0, o.Held())
	h.StopActing(a, 1) // the actor leaves memory, as after a release

	get := func() string {
		t.Helper()
		resp, err := h.Deliver(t.Context(), a, 1, &actors.Request{Method: http.MethodGet, Header: http.Header{}})
		require.NoError(t, err)
		return string(resp.Body)
	}
	// The next event wakes the actor; the wake finds the socket gone and
	// delivers its close event after that event.
	get()
	select {
	case got := <-told:
		require.Equal(t, id, got)
	case <-time.After(10 * time.Second):
		t.Fatal("the actor was not told at its wake")
	}
	require.Equal(t, "1", get(), "told at the wake")
	snap, err = actorstore.ReadActor(t.Context(), b, a)
	require.NoError(t, err)
	_, ok, err = snap.Get(t.Context(), record)
	require.NoError(t, err)
	require.False(t, ok, "the telling deleted the record: no later wake tells it again")
	v, _, err := snap.Get(t.Context(), "closed/"+id)
	require.NoError(t, err)
	require.Equal(t, "1006 "+url+" [feed]", string(v))
}
