package sockets

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// waitFor polls cond for up to wait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(wait); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWritersReusedAndBounded: the writers that emptied their queues wait
// for the next socket to write, at most maxIdleWriters of them, and every
// message still reaches its client in order; Shutdown ends them.
func TestWritersReusedAndBounded(t *testing.T) {
	e := newEnv(t, Config{})
	n := maxIdleWriters + 20
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		conns[i], _ = e.dial(room)
	}
	for round := range 3 {
		want := fmt.Sprintf("round %d", round)
		if got, err := e.o.Broadcast(room, "", true, []byte(want)); err != nil || got != n {
			t.Fatalf("broadcast: %d, %v", got, err)
		}
		for i, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(wait))
			if _, got, err := c.ReadMessage(); err != nil || string(got) != want {
				t.Fatalf("client %d read %q, %v; want %q", i, got, err, want)
			}
		}
		waitFor(t, "the writers to be idle", func() bool { return e.o.writers.Idle() > 0 })
		if idle := e.o.writers.Idle(); idle > maxIdleWriters {
			t.Fatalf("%d idle writers, at most %d", idle, maxIdleWriters)
		}
	}
	// One socket, many messages one at a time: one writer does them all.
	before := e.o.writers.Idle()
	for i := range 50 {
		want := fmt.Sprint(i)
		if err := e.o.Send(room, e.o.List(room, "")[0].ID, true, []byte(want)); err != nil {
			t.Fatal(err)
		}
		_ = conns[0].SetReadDeadline(time.Now().Add(wait))
		if _, got, err := conns[0].ReadMessage(); err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
	waitFor(t, "the writer to be idle again", func() bool { return e.o.writers.Idle() == before })
	for _, c := range conns {
		_ = c.Close()
	}
	if err := e.o.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle writers to end", func() bool { return e.o.writers.Idle() == 0 })
}
