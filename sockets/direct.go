package sockets

import (
	"bufio"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// Direct writes. A message sent to a socket with nothing queued and no
// writer running is written on the sender's goroutine, without waiting:
// one write(2) of the whole frame if the kernel takes it, as a server
// that writes from its handler does. What the kernel does not take (a
// full send buffer: a slow reader) is kept and written first by a writer
// goroutine, with the write timeout; a frame that cannot be tried goes
// the usual way, through the queue. This saves the hand-over to a writer
// goroutine per message, which was a third of the node's CPU per
// delivery of a broadcast beside the write itself.
//
// gorilla writes through the same connection: control frames, through
// Write, which puts them and the direct writes under one lock and first
// completes a frame written directly in part; and every queued frame, on
// the socket's writer goroutine, which runs only while no direct write
// does (socket.writing), after that tail (restFrame, queued first). A
// frame larger than gorilla's buffer is written past Write (net.Buffers
// finds the TCPConn's own vectored write), which this order makes safe.
// So frames never interleave. Once a write of gorilla's has failed (it
// may have stopped inside a frame), nothing more is written directly.
// A broadcast makes its direct writes together (batch.go).

// maxDirect is the largest message written directly; a larger one goes
// through the queue (whose writer does not copy it).
const maxDirect = 16 << 10

// errNoDirect: the frame was not tried; nothing was written.
var errNoDirect = errors.New("no direct write")

// wireConn is a socket's TCP connection as gorilla sees it: its writes
// take mu and first complete what a direct write left; its reads judge
// the client's close frames (closeframe.go). Its other methods are the
// TCPConn's own: embedded as a pointer, they cost no stack frame of their
// own (the compiler makes their wrappers tail calls), and Read's own
// frame is small (the scan is out of line), which keeps an idle reader,
// parked in Read, within its first 2 KiB of stack
// (BenchmarkIdleSocketMemory).
//
// A direct write uses the descriptor fd itself, not through the TCPConn,
// so that a broadcast can hand many of them to the kernel at once
// (batch.go). closeMu keeps the descriptor from being closed (and its
// number reused by another connection) while a direct write uses it.
type wireConn struct {
	*net.TCPConn
	fd     int32
	frames frameScan // used by Read only: the reader goroutine's

	mu     sync.Mutex
	rest   []byte // the tail of a frame written directly in part
	broken bool   // a write of gorilla's failed: the stream may end inside a frame

	closeMu sync.RWMutex
	closed  bool
}

// closeWaits, if set (by a test, while no socket is open), is called when
// a Close finds the descriptor in use and waits for it.
var closeWaits func()

// newWireConn wraps c if it is a TCP connection; other connections
// (TLS, say) have no direct writes.
func newWireConn(c net.Conn) *wireConn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil || !directWrites {
		return nil
	}
	wc := &wireConn{TCPConn: tc, fd: -1}
	if err := raw.Control(func(fd uintptr) { wc.fd = int32(fd) }); err != nil || wc.fd < 0 {
		return nil
	}
	return wc
}

// Write is gorilla's: blocking, bounded by the deadline gorilla set.
func (c *wireConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	n, err := c.TCPConn.Write(p)
	if err != nil {
		c.broken = true
	}
	return n, err
}

// Read is gorilla's: the TCPConn's, each close frame judged first.
//
// Invariant: nothing is live across the TCPConn's read, and the scan is
// called last (a TCP read that returns bytes returns no error), so that
// Read's frame is only the space of its calls' arguments (see read).
func (c *wireConn) Read(p []byte) (int, error) {
	if err := c.frames.verdict(); err != nil {
		return 0, err
	}
	n, err := c.TCPConn.Read(p)
	if n > 0 {
		return c.frames.scan(p[:n])
	}
	return n, err
}

// markBroken stops direct writes: a write failed, and the stream may end
// inside a frame.
func (c *wireConn) markBroken() {
	c.mu.Lock()
	c.broken = true
	c.mu.Unlock()
}

// Close closes the connection once no direct write uses its descriptor.
func (c *wireConn) Close() error {
	if !c.closeMu.TryLock() {
		// A direct write holds the descriptor (or another Close runs).
		if closeWaits != nil {
			closeWaits()
		}
		c.closeMu.Lock()
	}
	c.closed = true
	c.closeMu.Unlock()
	return c.TCPConn.Close()
}

func (c *wireConn) flushLocked() error {
	if len(c.rest) == 0 {
		return nil
	}
	n, err := c.TCPConn.Write(c.rest) // all of it, or an error
	c.rest = c.rest[n:]
	if err != nil {
		c.broken = true
		return err
	}
	c.rest = nil
	return nil
}

// flush writes what a direct write left, by deadline.
func (c *wireConn) flush(deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rest) == 0 {
		return nil // a write of gorilla's completed it
	}
	if err := c.TCPConn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	return c.flushLocked()
}

// claim takes the connection for one direct write, or reports false
// (nothing may be written directly now): another write is under way, a
// frame written in part is pending, a write failed, or the connection is
// closing. A claim is ended by wrote.
func (c *wireConn) claim() bool {
	if !c.mu.TryLock() {
		return false
	}
	if len(c.rest) > 0 || c.broken || !c.closeMu.TryRLock() {
		c.mu.Unlock()
		return false
	}
	if c.closed {
		c.closeMu.RUnlock()
		c.mu.Unlock()
		return false
	}
	return true
}

// wrote ends a claim in which the kernel took n bytes of frame b (n <= 0:
// none). It returns the length of the tail of b left for flush (0: none),
// or errNoDirect if nothing was written (the queue's writer then writes
// the frame, and meets the socket's error if there was one).
func (c *wireConn) wrote(b []byte, n int) (rest int, err error) {
	c.closeMu.RUnlock()
	defer c.mu.Unlock()
	switch {
	case n <= 0:
		return 0, errNoDirect
	case n < len(b):
		c.rest = append([]byte(nil), b[n:]...)
		return len(c.rest), nil
	}
	return 0, nil
}

// tryWrite writes a data frame of data without waiting, masked if the
// node is the connection's client (an outbound socket). It returns the
// length of the tail left for flush, or errNoDirect if it wrote nothing
// (see claim and wrote).
func (c *wireConn) tryWrite(kind frameKind, data []byte, masked bool) (rest int, err error) {
	if !c.claim() {
		return 0, errNoDirect
	}
	buf := directBuffers.Get().(*[]byte)
	defer directBuffers.Put(buf)
	var b []byte
	if masked {
		b = appendMaskedFrame((*buf)[:0], kind, data)
	} else {
		b = appendFrame((*buf)[:0], kind, data)
	}
	*buf = b[:0]
	return c.wrote(b, writeFD(c.fd, b))
}

var directBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendFrame appends an unmasked, final frame of data.
func appendFrame(b []byte, kind frameKind, data []byte) []byte {
	return append(appendFrameHeader(b, kind, len(data)), data...)
}

// appendMaskedFrame appends a final frame of data masked with a fresh
// key, as a client's frames are (RFC 6455 section 5.3: a key the server
// cannot predict; math/rand/v2's generator is ChaCha8).
func appendMaskedFrame(b []byte, kind frameKind, data []byte) []byte {
	start := len(b)
	b = appendFrameHeader(b, kind, len(data))
	b[start+1] |= 0x80 // the mask bit
	key := binary.LittleEndian.AppendUint32(nil, rand.Uint32())
	b = append(b, key...)
	p := len(b)
	b = append(b, data...)
	for i := range data {
		b[p+i] ^= key[i&3]
	}
	return b
}

// appendFrameHeader appends the header of an unmasked, final frame of n
// bytes (RFC 6455 section 5.2): a server's frames are not masked.
func appendFrameHeader(b []byte, kind frameKind, n int) []byte {
	op := byte(0x2) // binary
	if kind == textFrame {
		op = 0x1
	}
	b = append(b, 0x80|op)
	switch {
	case n < 126:
		return append(b, byte(n))
	case n <= 0xFFFF:
		return binary.BigEndian.AppendUint16(append(b, 126), uint16(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 127), uint64(n))
}

// clientWire is an outbound socket's TCP connection as gorilla sees it:
// its writes are a wireConn's, so that the node's direct writes and
// gorilla's never interleave, and its reads are the TCPConn's own (the
// close frames judged in wireConn.Read are a client's, masked; a
// service's are gorilla's to judge).
type clientWire struct{ *wireConn }

func (c clientWire) Read(p []byte) (int, error) { return c.TCPConn.Read(p) }

// hijackWriter hands gorilla the hijacked connection, wrapped in a
// wireConn if it is a TCP connection (and sockets are written directly
// here), else in a checkedConn: either judges the close frames.
type hijackWriter struct {
	http.ResponseWriter
	wc *wireConn
}

func (h *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("response does not implement http.Hijacker")
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if h.wc = newWireConn(c); h.wc == nil {
		return &checkedConn{Conn: c}, brw, nil
	}
	return h.wc, brw, nil
}
