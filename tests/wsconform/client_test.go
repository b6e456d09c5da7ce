package wsconform

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// wait bounds every read and every wait of the suite.
const wait = 5 * time.Second

// Opcodes (RFC 6455 section 5.2).
const (
	opCont   = 0x0
	opText   = 0x1
	opBinary = 0x2
	opClose  = 0x8
	opPing   = 0x9
	opPong   = 0xa
)

// end is a socket's terminal event at the Sink.
type end struct {
	fault error // Error's; nil for Close
	code  int   // Close's
	clean bool
}

// echo is the actor under test: its Sink sends every message back on its
// socket, as it came (text as text). It also checks what reaches it:
// never a text message that is not UTF-8.
type echo struct {
	owner *sockets.Owner

	mu       sync.Mutex
	accepted map[string]chan sockets.ID // by actor name: one socket each
	ends     map[sockets.ID]chan end
	problems []string
	messages map[sockets.ID]int
}

func (e *echo) Opened(ownership.Actor) {}
func (e *echo) Gone(ownership.Actor)   {}

func (e *echo) Message(a ownership.Actor, id sockets.ID, text bool, data []byte) error {
	e.mu.Lock()
	e.messages[id]++
	if text && !utf8.Valid(data) {
		e.problems = append(e.problems, fmt.Sprintf("%s: a text message of %d bytes that is not UTF-8 reached the actor", a.Name, len(data)))
	}
	e.mu.Unlock()
	if err := e.owner.Send(a, id, text, data); err != nil && !errors.Is(err, sockets.ErrClosing) && !errors.Is(err, sockets.ErrUnknownSocket) {
		e.mu.Lock()
		e.problems = append(e.problems, fmt.Sprintf("%s: echo: %v", a.Name, err))
		e.mu.Unlock()
	}
	return nil
}

func (e *echo) Close(_ ownership.Actor, id sockets.ID, code int, _ string, clean bool) {
	e.endOf(id) <- end{code: code, clean: clean}
}

func (e *echo) Error(_ ownership.Actor, id sockets.ID, err error) {
	e.endOf(id) <- end{fault: err}
}

func (e *echo) endOf(id sockets.ID) chan end {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.ends[id]
	if ch == nil {
		ch = make(chan end, 1)
		e.ends[id] = ch
	}
	return ch
}

func (e *echo) acceptedAs(name string) chan sockets.ID {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.accepted[name]
	if ch == nil {
		ch = make(chan sockets.ID, 1)
		e.accepted[name] = ch
	}
	return ch
}

// server is an Owner behind an HTTP server on 127.0.0.1: a request for
// /echo/<name> is a socket of the actor echo/<name>.
type server struct {
	sink *echo
	srv  *httptest.Server
	cfg  sockets.Config
}

func newServer(t *testing.T, cfg sockets.Config) *server {
	t.Helper()
	sink := &echo{accepted: map[string]chan sockets.ID{}, ends: map[sockets.ID]chan end{}, messages: map[sockets.ID]int{}}
	cfg.Sink = sink
	o, err := sockets.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sink.owner = o
	s := &server{sink: sink, cfg: cfg}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/echo/")
		if id, err := o.Accept(w, r, ownership.Actor{Class: "echo", Name: name}, nil); err == nil {
			sink.acceptedAs(name) <- id
		}
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
		defer cancel()
		if err := o.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		s.srv.Close()
	})
	return s
}

// client is a raw WebSocket client: it writes the frames a case gives,
// masked, whole or a few bytes at a time, and reads the server's frames
// as they are on the wire.
type client struct {
	t    *testing.T
	srv  *server
	conn net.Conn
	br   *bufio.Reader
	id   sockets.ID
	resp *http.Response
	keys uint32 // makes each frame's mask key
}

// rfcKey is the sample nonce of RFC 6455 section 1.3; the handshake's
// answer to it is rfcAccept.
const (
	rfcKey    = "dGhlIHNhbXBsZSBub25jZQ=="
	rfcAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
)

// dial opens a socket for actor echo/<name>, with extra request header
// lines, and checks the handshake's answer.
func (s *server) dial(t *testing.T, name string, header ...string) *client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", s.srv.Listener.Addr().String(), wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(wait))
	req := "GET /echo/" + name + " HTTP/1.1\r\nHost: " + s.srv.Listener.Addr().String() +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " + rfcKey +
		"\r\nSec-WebSocket-Version: 13\r\n"
	for _, h := range header {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") || resp.Header.Get("Sec-WebSocket-Accept") != accept(rfcKey) {
		t.Fatalf("handshake answer: %s %v", resp.Status, resp.Header)
	}
	c := &client{t: t, srv: s, conn: conn, br: br, resp: resp}
	select {
	case c.id = <-s.sink.acceptedAs(name):
	case <-time.After(wait):
		t.Fatal("the socket was not accepted")
	}
	return c
}

// accept is the Sec-WebSocket-Accept answer to key (section 4.2.2).
func accept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// frame is one WebSocket frame: fin, the three RSV bits (rsv: 0 to 7),
// the opcode and the payload.
type frame struct {
	fin     bool
	rsv     byte
	op      byte
	payload []byte
}

func final(op byte, payload []byte) frame { return frame{fin: true, op: op, payload: payload} }

func (f frame) String() string {
	return fmt.Sprintf("{fin %v rsv %d op %#x %d bytes}", f.fin, f.rsv, f.op, len(f.payload))
}

// encode makes a client's frame of f: masked (section 5.3).
func (c *client) encode(f frame) []byte {
	b0 := f.op | f.rsv<<4
	if f.fin {
		b0 |= 0x80
	}
	var b []byte
	switch n := len(f.payload); {
	case n < 126:
		b = append(b, b0, 0x80|byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, b0, 0x80|126), uint16(n))
	default:
		b = binary.BigEndian.AppendUint64(append(b, b0, 0x80|127), uint64(n))
	}
	c.keys++
	key := [4]byte{0x9d, byte(c.keys), 0x5e, byte(c.keys >> 8)}
	b = append(b, key[:]...)
	for i, x := range f.payload {
		b = append(b, x^key[i%4])
	}
	return b
}

// send writes frames, whole (chunk 0) or chunk bytes per write. A write
// may fail once the server has failed the connection (a case then reads
// what it sent before); that is not an error of the case.
func (c *client) send(chunk int, frames ...frame) {
	c.t.Helper()
	var b []byte
	for _, f := range frames {
		b = append(b, c.encode(f)...)
	}
	c.write(b, chunk)
}

func (c *client) write(b []byte, chunk int) {
	c.t.Helper()
	_ = c.conn.SetWriteDeadline(time.Now().Add(wait))
	if chunk <= 0 {
		chunk = len(b)
	}
	for len(b) > 0 {
		k := min(chunk, len(b))
		if _, err := c.conn.Write(b[:k]); err != nil {
			return
		}
		b = b[k:]
	}
}

// next reads the server's next frame. A server's frames are not masked.
func (c *client) next() (frame, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(wait))
	var h [2]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return frame{}, err
	}
	if h[1]&0x80 != 0 {
		return frame{}, errors.New("a masked frame from the server")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(c.br, ext[:]); err != nil {
			return frame{}, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(c.br, ext[:]); err != nil {
			return frame{}, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	if n > 64<<20 {
		return frame{}, fmt.Errorf("a frame of %d bytes", n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(c.br, payload); err != nil {
		return frame{}, err
	}
	return frame{fin: h[0]&0x80 != 0, rsv: h[0] >> 4 & 7, op: h[0] & 0xf, payload: payload}, nil
}

// expectMessage reads the next message (its fragments, if the server
// fragmented it) and checks it is op with payload.
func (c *client) expectMessage(op byte, payload []byte) {
	c.t.Helper()
	var got []byte
	for i := 0; ; i++ {
		f, err := c.next()
		switch {
		case err != nil:
			c.t.Fatalf("want a message of %d bytes: %v", len(payload), err)
		case f.rsv != 0 || (i == 0 && f.op != op) || (i > 0 && f.op != opCont):
			c.t.Fatalf("want a message (op %#x, %d bytes), got frame %v", op, len(payload), f)
		}
		got = append(got, f.payload...)
		if f.fin {
			break
		}
	}
	if !bytes.Equal(got, payload) {
		c.t.Fatalf("echo of %d bytes differs from the %d sent (%.40q...)", len(got), len(payload), got)
	}
	if op == opText && !utf8.Valid(got) {
		c.t.Fatalf("a text message that is not UTF-8 from the server")
	}
}

// expectPong reads the next frame and checks it is a pong of payload.
func (c *client) expectPong(payload []byte) {
	c.t.Helper()
	f, err := c.next()
	if err != nil || f.op != opPong || !f.fin || f.rsv != 0 || !bytes.Equal(f.payload, payload) {
		c.t.Fatalf("want a pong of %d bytes, got %v, %v", len(payload), f, err)
	}
}

// expectClose reads the next frame, which must be a close frame with
// code (1005: with no payload), then the end of the connection: nothing
// else comes from the server.
func (c *client) expectClose(code int) {
	c.t.Helper()
	f, err := c.next()
	if err != nil || f.op != opClose {
		c.t.Fatalf("want a close frame %d, got %v, %v", code, f, err)
	}
	got := 1005
	if len(f.payload) >= 2 {
		got = int(binary.BigEndian.Uint16(f.payload))
		if !utf8.Valid(f.payload[2:]) {
			c.t.Errorf("a close reason that is not UTF-8 from the server: %q", f.payload[2:])
		}
	} else if len(f.payload) == 1 {
		c.t.Fatalf("a close frame of 1 byte from the server")
	}
	if got != code {
		c.t.Fatalf("close code %d (%q), want %d", got, f.payload[min(2, len(f.payload)):], code)
	}
	c.expectEOF()
}

// expectEOF checks the server ends the connection with nothing more.
func (c *client) expectEOF() {
	c.t.Helper()
	f, err := c.next()
	var ne net.Error
	switch {
	case err == nil:
		c.t.Fatalf("want the end of the connection, got frame %v", f)
	case errors.As(err, &ne) && ne.Timeout():
		c.t.Fatalf("the server did not end the connection within %v", wait)
	}
}

// expectEnd waits for the socket's terminal event: a close with code
// (clean) if fault is nil, else an error matching fault whose close code
// is code.
func (c *client) expectEnd(fault error, code int) {
	c.t.Helper()
	var e end
	select {
	case e = <-c.srv.sink.endOf(c.id):
	case <-time.After(wait):
		c.t.Fatal("no terminal event at the actor")
	}
	switch {
	case fault == nil && (e.fault != nil || e.code != code || !e.clean):
		c.t.Fatalf("terminal event %+v, want a clean close %d", e, code)
	case fault != nil && (!errors.Is(e.fault, fault) || sockets.CloseCode(e.fault) != code):
		c.t.Fatalf("terminal event %+v, want %v (%d)", e, fault, code)
	}
}

// fails checks the server fails the connection with code (1002, 1007,
// 1009): its close frame, the end of the connection, and the fault at
// the actor.
func (c *client) fails(code int) {
	c.t.Helper()
	c.expectClose(code)
	faults := map[int]error{1002: sockets.ErrProtocol, 1007: sockets.ErrInvalidUTF8, 1009: sockets.ErrMessageTooBig}
	c.expectEnd(faults[code], code)
}

// closes sends a close frame of payload and checks the server's answer:
// code echoed, then the end of the connection, and the clean close at
// the actor.
func (c *client) closes(payload []byte, code int) {
	c.t.Helper()
	c.send(0, final(opClose, payload))
	c.expectClose(code)
	c.expectEnd(nil, code)
}

// messages returns how many messages of the socket reached the actor.
func (c *client) messages() int {
	c.srv.sink.mu.Lock()
	defer c.srv.sink.mu.Unlock()
	return c.srv.sink.messages[c.id]
}
