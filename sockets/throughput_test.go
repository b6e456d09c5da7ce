package sockets

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// echoSink sends every message back on its socket.
type echoSink struct {
	nopSink
	o *Owner
}

func (s *echoSink) Message(a ownership.Actor, id ID, text bool, data []byte) error {
	_ = s.o.Send(a, id, text, data)
	return nil
}

// BenchmarkEchoRoundTrip: one client, a 100-byte message to the Sink and
// back through Send, one at a time.
func BenchmarkEchoRoundTrip(b *testing.B) {
	sink := &echoSink{}
	o, err := New(Config{Sink: sink})
	if err != nil {
		b.Fatal(err)
	}
	sink.o = o
	defer func() { _ = o.Shutdown(b.Context()) }()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = o.Accept(w, r, ownership.Actor{Class: "bench", Name: "echo"}, nil)
	}))
	defer srv.Close()
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg := []byte(strings.Repeat("m", 100))
	for b.Loop() {
		if err := c.WriteMessage(websocket.BinaryMessage, msg); err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.ReadMessage(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBroadcast: 100 clients of one actor, a 16-byte message
// broadcast to all of them, then read by each; ns/op is per delivery.
// io_uring: the sends submitted together (the default); write: one
// write(2) per socket.
func BenchmarkBroadcast(b *testing.B) {
	b.Run("io_uring", func(b *testing.B) { benchmarkBroadcast(b, Config{Sink: nopSink{}}) })
	b.Run("write", func(b *testing.B) { benchmarkBroadcast(b, Config{Sink: nopSink{}, NoIOUring: true}) })
}

func benchmarkBroadcast(b *testing.B, cfg Config) {
	const clients = 100
	o, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = o.Shutdown(b.Context()) }()
	a := ownership.Actor{Class: "bench", Name: "room"}
	// Accept returns once its socket is among a's: the client's handshake
	// answer comes before.
	accepted := make(chan error, clients)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := o.Accept(w, r, a, nil)
		accepted <- err
	}))
	defer srv.Close()
	conns := make([]*websocket.Conn, clients)
	for i := range conns {
		c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	for range clients {
		select {
		case err := <-accepted:
			if err != nil {
				b.Fatal(err)
			}
		case <-time.After(wait):
			b.Fatalf("%d sockets of %d accepted within %v", len(o.List(a, "")), clients, wait)
		}
	}
	msg := []byte(strings.Repeat("m", 16))
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := 0; i < b.N; i += clients {
		if n, err := o.Broadcast(a, "", true, msg); err != nil || n != clients {
			b.Fatalf("broadcast: %d, %v", n, err)
		}
		for _, c := range conns {
			wg.Go(func() {
				if _, _, err := c.ReadMessage(); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
}
