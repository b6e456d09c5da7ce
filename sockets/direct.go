package sockets

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
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
// gorilla writes through the same connection (control frames, and every
// queued frame): wireConn puts its writes and the direct ones under one
// lock, and a frame partly written directly is completed before any of
// gorilla's bytes, so frames never interleave.

// maxDirect is the largest message written directly; a larger one goes
// through the queue (whose writer does not copy it).
const maxDirect = 16 << 10

// errNoDirect: the frame was not tried; nothing was written.
var errNoDirect = errors.New("no direct write")

// wireConn is a socket's TCP connection as gorilla sees it: its writes
// take mu and first complete what a direct write left. Its other methods
// are the TCPConn's own: embedded as a pointer, they cost no stack frame
// of their own (the compiler makes their wrappers tail calls), which
// keeps an idle reader, parked in Read, within its first 2 KiB of stack
// (BenchmarkIdleSocketMemory).
type wireConn struct {
	*net.TCPConn
	raw syscall.RawConn

	mu   sync.Mutex
	rest []byte // the tail of a frame written directly in part
}

// newWireConn wraps c if it is a TCP connection; other connections
// (TLS, say) have no direct writes.
func newWireConn(c net.Conn) *wireConn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &wireConn{TCPConn: tc, raw: raw}
}

// Write is gorilla's: blocking, bounded by the deadline gorilla set.
func (c *wireConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.TCPConn.Write(p)
}

func (c *wireConn) flushLocked() error {
	if len(c.rest) == 0 {
		return nil
	}
	n, err := c.TCPConn.Write(c.rest) // all of it, or an error
	c.rest = c.rest[n:]
	if err != nil {
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

// tryWrite writes a data frame of data without waiting. It reports
// whether a tail of it is left for flush, or errNoDirect if it
// wrote nothing: another write is under way, the deadline of gorilla's
// last write has passed (the queue's writer sets a new one), or the
// socket refused (the queue's writer meets that too).
func (c *wireConn) tryWrite(kind frameKind, data []byte) (pending bool, err error) {
	if !c.mu.TryLock() {
		return false, errNoDirect
	}
	defer c.mu.Unlock()
	if len(c.rest) > 0 {
		return false, errNoDirect
	}
	buf := directBuffers.Get().(*[]byte)
	defer directBuffers.Put(buf)
	b := appendFrameHeader((*buf)[:0], kind, len(data))
	b = append(b, data...)
	*buf = b[:0]
	n, err := c.writeNow(b)
	if err != nil || n <= 0 {
		return false, errNoDirect
	}
	if n < len(b) {
		c.rest = append([]byte(nil), b[n:]...)
	}
	return n < len(b), nil
}

// writeNow makes one write(2) of b, not waiting for the socket to take
// it: n < len(b) if its send buffer is full.
func (c *wireConn) writeNow(b []byte) (n int, err error) {
	called := false
	rerr := c.raw.Write(func(fd uintptr) bool {
		called = true
		n, err = syscall.Write(int(fd), b)
		if err == syscall.EAGAIN {
			n, err = 0, nil
		}
		return true
	})
	if !called {
		// The write deadline gorilla set for an earlier write has
		// passed (a direct write neither needs one nor may change
		// it: gorilla may be about to write with its own), or the
		// connection is closed.
		return 0, rerr
	}
	return n, err
}

var directBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

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

// hijackWriter hands gorilla the hijacked connection, wrapped in a
// wireConn if it is a TCP connection.
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
		return c, brw, nil
	}
	return h.wc, brw, nil
}
