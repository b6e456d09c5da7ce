//go:build unix

package sockets

import (
	"errors"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func (sc *slowClient) aborted() bool {
	sc.s.mu.Lock()
	defer sc.s.mu.Unlock()
	return sc.s.aborted
}

// TestSendQueueTotal: two clients that do not read, a and b, and one that
// does. Past the node's total, the socket holding the most is closed with
// 1013: the one sending if it is that one (its Send fails), else the
// other (the Send succeeds); the reading client is never closed.
func TestSendQueueTotal(t *testing.T) {
	const size = 64 << 10
	for _, c := range []struct {
		name        string
		first, then string // which client gets 4 messages first, and which sends on
		senderShed  bool
	}{
		{"the sender holds the most", "b", "a", true},
		{"another holds the most", "a", "b", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, Config{MaxMessage: size, SendQueue: 1 << 20, SendQueueTotal: 1 << 20})
			fast, fastID := e.dial(room)
			fastRead := make(chan error, 1)
			go func() {
				_ = fast.SetReadDeadline(time.Now().Add(wait))
				for {
					if _, _, err := fast.ReadMessage(); err != nil {
						fastRead <- err
						return
					}
				}
			}()
			slow := map[string]*slowClient{"a": e.dialSlow(room), "b": e.dialSlow(room)}
			msg := make([]byte, size)
			n := 4
			if c.first == "a" {
				n = 12
			}
			for range n {
				if err := e.o.Send(room, slow[c.first].s.id, false, msg); err != nil {
					t.Fatalf("send to %s: %v", c.first, err)
				}
			}
			var err error
			for i := 0; i < 32 && err == nil && !slow["a"].aborted(); i++ {
				err = e.o.Send(room, slow[c.then].s.id, false, msg)
				if e.o.Send(room, fastID, true, []byte("for the fast one")) != nil {
					t.Fatal("the fast reader cannot be sent to")
				}
			}
			if c.senderShed != (err != nil) || err != nil && (!errors.Is(err, ErrSlowReader) || !strings.Contains(err.Error(), "held the most")) {
				t.Fatalf("the last send to %s: %v; want the total's ErrSlowReader: %v", c.then, err, c.senderShed)
			}
			if !slow["a"].aborted() || slow["b"].aborted() {
				t.Fatalf("a closed: %v, b closed: %v; want a only", slow["a"].aborted(), slow["b"].aborted())
			}
			_ = slow["a"].c.NetConn().Close() // a's close frame, stuck behind its data, then fails at once
			end := next(t, e.sink.ends)
			if end.id != slow["a"].s.id || end.kind != "error" || !errors.Is(end.err, ErrSlowReader) || CloseCode(end.err) != 1013 {
				t.Errorf("terminal event = %+v, want a's ErrSlowReader", end)
			}
			if q := value(t, e.o.m.queued); q > 1<<20 || q != float64(e.o.queued.Load()) {
				t.Errorf("queued gauge = %v (total %d), want it at most the limit", q, e.o.queued.Load())
			}
			if open := ids(e.o.List(room, "")); len(open) != 2 {
				t.Errorf("open sockets %v, want the fast one and b", open)
			}
			if got := value(t, e.o.m.nodeCloses.WithLabelValues("slow_reader")); got != 1 {
				t.Errorf("node_closes{slow_reader} = %v, want 1", got)
			}
			_ = slow["b"].c.NetConn().Close() // b's queue then drops with its connection
			if err := e.o.Close(room, fastID, 1000, ""); err != nil {
				t.Fatal(err)
			}
			if err := <-fastRead; !strings.Contains(err.Error(), "1000") {
				t.Errorf("the fast reader ended with %v, want the close 1000", err)
			}
		})
	}
}

func TestSendQueueTotalDefault(t *testing.T) {
	if got := (Config{}).withDefaults().SendQueueTotal; got != DefaultSendQueueTotal && debug.SetMemoryLimit(-1)/4 > DefaultSendQueueTotal {
		t.Errorf("default = %d, want %d", got, DefaultSendQueueTotal)
	}
	old := debug.SetMemoryLimit(400 << 20)
	defer debug.SetMemoryLimit(old)
	if got := (Config{}).withDefaults().SendQueueTotal; got != 100<<20 {
		t.Errorf("default under a 400 MiB memory limit = %d, want 100 MiB", got)
	}
	if got := (Config{SendQueue: 200 << 20}).withDefaults().SendQueueTotal; got != 200<<20 {
		t.Errorf("default with a 200 MiB send queue = %d, want the send queue", got)
	}
	if err := (Config{Sink: nopSink{}, SendQueue: 8 << 20, SendQueueTotal: 4 << 20}).Validate(); err == nil {
		t.Error("a total under one socket's send queue is valid")
	}
}
