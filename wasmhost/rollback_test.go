package wasmhost

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
)

// Rollback (event_rollback): the guest's response answers the client, the
// event's writes and socket output are discarded, and the guest is kept.

// TestRollbackKeepsGuest: a rolled-back event returns actors.Rollback
// as its error, not a guest failure, and its guest serves the next
// event; the writes it made to the storage it was given are the caller's
// to discard (actors does), so here they are only seen to have been made.
func TestRollbackKeepsGuest(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{}
	if got := body(t, g, "/events"); got != "1" {
		t.Fatalf("first event = %q", got)
	}
	_, err := g.Handle(context.Background(), get("/rollback", "status=418"), st)
	if !errors.Is(err, actors.ErrRollback) || errors.Is(err, ErrGuest) || !strings.Contains(err.Error(), "418") {
		t.Fatalf("rolled-back event: err = %v, want a rollback answering 418", err)
	}
	if got := body(t, g, "/events"); got != "3" {
		t.Fatalf("event after the rollback = %q, want 3 (the same guest)", got)
	}
	// A socket event that rolls back: the same.
	f := &fakeSockets{}
	ev := &actors.SocketEvent{Kind: actors.SocketMessage, Socket: 1, Text: true, Data: []byte("rollback k v")}
	if err := g.HandleSocket(withSockets(f), ev, st); !errors.Is(err, actors.ErrRollback) || errors.Is(err, ErrGuest) {
		t.Fatalf("rolled-back socket event: err = %v, want a rollback", err)
	}
	if got := body(t, g, "/events"); got != "5" {
		t.Fatalf("event after the socket rollback = %q, want 5", got)
	}
}

// TestRollbackInHost: on real events, in both isolations, the client gets
// the status, headers and body the guest rolled back with (not a 500);
// the event's puts and delete-all are not there afterwards, in the working
// state or in the bucket once the actor hibernated; the next event sees
// the state as before, on the same guest; and a call after the
// rollback is refused, committing nothing.
func TestRollbackInHost(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.String(), func(t *testing.T) {
			p := newProbeHost(t, iso)
			p.expect("a", post("/put-many", "", "k committed\nother x"), "ok")
			events := func() int {
				t.Helper()
				n, err := strconv.Atoi(string(p.deliver("a", get("/events", "")).Body))
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			before := events()
			for _, tt := range []struct {
				query  string
				status int
			}{
				{"put=k", 409},
				{"put=new&delete-all&status=200", 200},
				{"status=503&delete-all", 503},
			} {
				resp := p.deliver("a", get("/rollback", tt.query))
				if resp.Status != tt.status || string(resp.Body) != "rolled back" || resp.Header.Get("X-Rollback") != "yes" {
					t.Fatalf("rollback ?%s = %d %q %v, want %d %q with X-Rollback", tt.query, resp.Status, resp.Body, resp.Header, tt.status, "rolled back")
				}
				p.expect("a", get("/get-many", "keys=k,other,new"), "k=committed\nother=x\nnew absent\n")
			}
			after := events()
			if after != before+2*3+1 {
				t.Fatalf("events on the guest: %d before, %d after 3 rollbacks and 3 reads; want %d (the same guest)", before, after, before+7)
			}
			// A call after the rollback would commit its writes: refused,
			// and the callee is not called.
			p.expect("other", get("/put-many", ""), "ok")
			resp := p.deliver("a", get("/rollback", "put=new&call"))
			if resp.Status != http.StatusConflict || string(resp.Body) != "rolled back\ncall: guest: bad actor call" {
				t.Fatalf("call after a rollback: %d %q", resp.Status, resp.Body)
			}
			want := 2 // other's own guest: its put-many and this
			if iso == IsolationClass {
				want = after + 3 // other's put-many, a's rollback and this
			}
			p.expect("other", get("/events", ""), strconv.Itoa(want))
			// From the bucket: the state as the committed events left it.
			p.restart()
			p.expect("a", get("/list", ""), "k=committed\nother=x\n")
		})
	}
}

// TestRollbackSockets: on a real node, in both isolations, a socket event
// that rolls back sends, broadcasts and closes nothing (the socket stays
// open, and the next frame it gets is the next event's) and its write is
// gone; a request that broadcasts and rolls back reaches no socket, and
// its client gets the guest's answer.
func TestRollbackSockets(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.String(), func(t *testing.T) {
			r := newRuntime(t, Config{Isolation: map[string]Isolation{"probe": iso}, SharedGuests: 1})
			m := mustCompile(t, r, "probe", guest(t, probeGuest))
			n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"probe": m}})
			url := "ws" + strings.TrimPrefix(n.URL, "http") + "/actor/probe/r/ws"
			conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), url, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			c := socketClient{t, conn}
			httpGet := func(path string) (*http.Response, string) {
				t.Helper()
				resp, err := http.Get(n.URL + "/actor/probe/r" + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp, string(b)
			}
			// What a broadcast that is not rolled back looks like.
			if got := c.ask("bcast  hello"); got != "hello" {
				t.Fatalf("broadcast: %q", got)
			}
			c.send("rollback k v")
			if got := c.ask("echo after"); got != "after" {
				t.Fatalf("the frame after a rolled-back socket event: %q, want the next event's", got)
			}
			if _, got := httpGet("/get-many?keys=k"); got != "k absent\n" {
				t.Fatalf("after the rolled-back socket event: %q", got)
			}
			resp, got := httpGet("/rollback?bcast&put=k2&status=202")
			if resp.StatusCode != http.StatusAccepted || got != "rolled back" || resp.Header.Get("X-Rollback") != "yes" {
				t.Fatalf("rolled-back request: %d %q %v", resp.StatusCode, got, resp.Header)
			}
			if got := c.ask("echo again"); got != "again" {
				t.Fatalf("the frame after a rolled-back broadcast: %q", got)
			}
			if _, got := httpGet("/get-many?keys=k2"); got != "k2 absent\n" {
				t.Fatalf("after the rolled-back request: %q", got)
			}
			if st := m.Stats(); st.Failures != 0 {
				t.Fatalf("%d guest failures", st.Failures)
			}
		})
	}
}
