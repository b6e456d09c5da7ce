// Command sockets-inproc measures what idle hibernated WebSockets cost a
// node when the machine's file limit forbids opening that many real ones:
// it starts a node in this process, serves it on a listener of in-memory
// pipes (net.Pipe) instead of TCP, opens -sockets WebSockets over -rooms
// chat rooms through those pipes, lets the rooms hibernate, and reports
// the process's RSS growth per socket.
//
// A pipe holds no file descriptor and no kernel buffers, which a TCP socket
// has but which RSS does not count anyway; its own few hundred bytes of Go
// memory per pair are measured apart (the same number of pipe pairs held
// alone, in the same process) and taken off, so the figure is the node's
// own memory per socket. The clients write their handshake and read its
// answer by hand, then hold the pipe without a goroutine.
//
//	go run ./bench/sockets-inproc -sockets 50000 -rooms 100
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	wksockets "github.com/wasmkeep/wasmkeep/sockets"
)

func main() {
	sockets := flag.Int("sockets", 50000, "WebSockets to open")
	rooms := flag.Int("rooms", 100, "chat rooms they spread over")
	hold := flag.Duration("hold", 8*time.Second, "how long to hold them idle before measuring (the rooms hibernate after 2 s)")
	conc := flag.Int("conc", 64, "handshakes in flight at once")
	flag.Parse()
	if err := run(*sockets, *rooms, *hold, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "sockets-inproc:", err)
		os.Exit(1)
	}
}

func run(sockets, rooms int, hold time.Duration, conc int) error {
	pipeCost, err := pipePairCost(sockets)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "sockets-inproc-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b, err := dirstore.Open(dir)
	if err != nil {
		return err
	}
	defer b.Close()
	lis := newPipeListener()
	reg := actors.BuiltIn()
	if err := reg.Register("chat", chat.Room{}); err != nil {
		return err
	}
	ctx := context.Background()
	n, err := node.Start(ctx, node.Config{
		Core:   ownership.DefaultConfig("inproc", "i1"),
		Bucket: b, Listener: lis, Registry: reg, Actors: actorhost.Config{IdleTimeout: 2 * time.Second},
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Sockets: wksockets.Config{MaxSockets: sockets + 1, PingInterval: time.Hour, PongTimeout: time.Hour},
	})
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_ = n.Stop(stopCtx)
	}()

	before := settledRSS()
	start := time.Now()
	conns, err := openAll(lis, sockets, rooms, conc)
	if err != nil {
		return err
	}
	opened := time.Since(start)
	time.Sleep(hold)
	held := settledRSS()
	open := n.Sockets()
	st := n.Status()
	perSocket := float64(held-before)/float64(sockets) - pipeCost
	fmt.Printf("sockets %d over %d rooms, opened in %v; open on the node %d; rooms parked %d, live %d\n",
		sockets, rooms, opened.Round(time.Millisecond), open, st.Parked, st.Live)
	fmt.Printf("RSS before %.1f MiB, held %.1f MiB; pipe pair alone %.0f B\n",
		float64(before)/(1<<20), float64(held)/(1<<20), pipeCost)
	fmt.Printf("RESULT node memory per idle hibernated socket: %.2f KiB (RSS growth per socket, pipe pair taken off)\n", perSocket/1024)
	for _, c := range conns {
		c.Close()
	}
	if open != sockets {
		return fmt.Errorf("%d sockets open on the node, want %d", open, sockets)
	}
	return nil
}

// openAll opens sockets WebSockets over rooms chat rooms, conc at a time.
func openAll(lis *pipeListener, sockets, rooms, conc int) ([]net.Conn, error) {
	conns := make([]net.Conn, sockets)
	errs := make(chan error, conc)
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := range sockets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := handshake(lis.dial(), fmt.Sprintf("/actor/chat/idle-%d", i%rooms))
			if err != nil {
				select {
				case errs <- fmt.Errorf("socket %d: %w", i, err):
				default:
				}
				return
			}
			conns[i] = c
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	return conns, nil
}

// handshake asks for a WebSocket on c and reads the answer up to its
// blank line; the connection is then the client's.
func handshake(c net.Conn, path string) (net.Conn, error) {
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	req := "GET " + path + " HTTP/1.1\r\nHost: inproc\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	r := bufio.NewReaderSize(c, 512)
	status, err := r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, err
	}
	if !strings.HasPrefix(status, "HTTP/1.1 101") {
		c.Close()
		return nil, fmt.Errorf("answer %q", strings.TrimSpace(status))
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, err
		}
		if line == "\r\n" {
			break
		}
	}
	if r.Buffered() != 0 {
		c.Close()
		return nil, errors.New("bytes after the handshake")
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// pipePairCost is the RSS growth per net.Pipe pair held, measured with n
// pairs.
func pipePairCost(n int) (float64, error) {
	before := settledRSS()
	pairs := make([][2]net.Conn, n)
	for i := range pairs {
		a, b := net.Pipe()
		pairs[i] = [2]net.Conn{a, b}
	}
	after := settledRSS()
	for _, p := range pairs {
		p[0].Close()
		p[1].Close()
	}
	runtime.KeepAlive(pairs)
	return float64(after-before) / float64(n), nil
}

// settledRSS collects garbage, returns freed memory to the system and
// reads VmRSS in bytes.
func settledRSS() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// pipeListener is a net.Listener whose connections are in-memory pipes.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// dial returns the client end of a new pipe whose server end Accept gives.
func (l *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
	case <-l.closed:
		server.Close()
	}
	return client
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "inproc:0" }
