package sockets

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// serverEnv makes this test binary, re-executed, a WebSocket service that
// outbound sockets dial (BenchmarkIdleDialedMemory): it prints its address
// and holds every socket, reading (so answering pings) until stdin ends.
const serverEnv = "WASMKEEP_SOCKETS_SERVER"

func runServer() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	up := websocket.Upgrader{}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					if _, _, err := c.ReadMessage(); err != nil {
						return
					}
				}
			}()
		}))
	}()
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// BenchmarkIdleDialedMemory measures what an idle outbound socket costs
// the node's process, as BenchmarkIdleSocketMemory does for an accepted
// one (the same footprint, between N/4 and N sockets), the service in a
// child process:
//
//	go test -run '^$' -bench 'IdleSocketMemory|IdleDialedMemory' -benchtime 1x ./sockets/
func BenchmarkIdleDialedMemory(b *testing.B) {
	const n = 2000
	child := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	child.Env = append(os.Environ(), serverEnv+"=1")
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = child.Wait() }()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		b.Fatalf("service: %v", lines.Err())
	}
	url := "ws://" + lines.Text() + "/feed"
	for range b.N {
		o, err := New(Config{Sink: nopSink{}, Dial: plainDial})
		if err != nil {
			b.Fatal(err)
		}
		open := func(k int) {
			for range k {
				if _, err := o.Dial(b.Context(), ownership.Actor{Class: "bench", Name: "relay"}, DialRequest{URL: url, Tags: []string{"t"}}); err != nil {
					b.Fatal(err)
				}
			}
		}
		open(n / 4)
		rss1, heap1, stack1, g1 := footprint(b)
		open(n - n/4)
		rss2, heap2, stack2, g2 := footprint(b)
		k := float64(n - n/4)
		b.ReportMetric(float64(rss2-rss1)/k, "rss-B/socket")
		b.ReportMetric(float64(heap2-heap1)/k, "heap-B/socket")
		b.ReportMetric(float64(stack2-stack1)/k, "stack-B/socket")
		b.ReportMetric(float64(g2-g1)/k, "goroutines/socket")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = o.Shutdown(ctx)
		cancel()
	}
}

// countSink counts messages and signals every want-th.
type countSink struct {
	nopSink
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (s *countSink) Message(ownership.Actor, ID, bool, []byte) error {
	if s.n.Add(1)%s.want == 0 {
		s.done <- struct{}{}
	}
	return nil
}

// BenchmarkDialedThroughput: 100-byte messages through one outbound
// socket, against a plain gorilla/websocket client on the same service.
// in: the service writes, the client reads (the owner hands each to its
// Sink); out: the client writes (the owner's Send), the service reads.
// ns/op is per message.
func BenchmarkDialedThroughput(b *testing.B) {
	const batch = 1000
	msg := []byte(strings.Repeat("m", 100))
	up := websocket.Upgrader{}
	conns := make(chan *websocket.Conn, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := up.Upgrade(w, r, nil); err == nil {
			conns <- c
		}
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/"
	dialOwner := func(b *testing.B, sink Sink) (*Owner, ID, *websocket.Conn) {
		o, err := New(Config{Sink: sink, Dial: plainDial})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = o.Shutdown(context.Background()) })
		id, err := o.Dial(b.Context(), ownership.Actor{Class: "bench", Name: "relay"}, DialRequest{URL: url})
		if err != nil {
			b.Fatal(err)
		}
		svc := <-conns
		b.Cleanup(func() { svc.Close() })
		return o, id, svc
	}
	dialGorilla := func(b *testing.B) (*websocket.Conn, *websocket.Conn) {
		c, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		svc := <-conns
		b.Cleanup(func() { svc.Close() })
		return c, svc
	}
	write := func(b *testing.B, c *websocket.Conn, k int) {
		for range k {
			if err := c.WriteMessage(websocket.BinaryMessage, msg); err != nil {
				b.Error(err)
				return
			}
		}
	}
	read := func(b *testing.B, c *websocket.Conn, k int) {
		for range k {
			if _, _, err := c.ReadMessage(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("in/owner", func(b *testing.B) {
		sink := &countSink{want: batch, done: make(chan struct{}, 1)}
		_, _, svc := dialOwner(b, sink)
		for b.Loop() {
			wrote := make(chan struct{})
			go func() { write(b, svc, batch); close(wrote) }()
			<-sink.done
			<-wrote
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
	})
	b.Run("in/gorilla", func(b *testing.B) {
		c, svc := dialGorilla(b)
		for b.Loop() {
			wrote := make(chan struct{})
			go func() { write(b, svc, batch); close(wrote) }()
			read(b, c, batch)
			<-wrote
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
	})
	b.Run("out/owner", func(b *testing.B) {
		o, id, svc := dialOwner(b, nopSink{})
		a := ownership.Actor{Class: "bench", Name: "relay"}
		for b.Loop() {
			done := make(chan struct{})
			go func() { read(b, svc, batch); close(done) }()
			for range batch {
				if err := o.Send(a, id, false, msg); err != nil {
					b.Fatal(err)
				}
			}
			<-done
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
	})
	b.Run("out/gorilla", func(b *testing.B) {
		c, svc := dialGorilla(b)
		for b.Loop() {
			done := make(chan struct{})
			go func() { read(b, svc, batch); close(done) }()
			write(b, c, batch)
			<-done
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
	})
}
