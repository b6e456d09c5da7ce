package sockets

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime/debug"
	"unicode/utf8"
)

// Close frames judged before gorilla reads them. gorilla/websocket checks
// a client's close frame in ways RFC 6455 does not: it takes a payload of
// one byte for a close without a code (section 5.5.1 wants a code of two
// bytes or nothing), answers a reason that is not UTF-8 with 1002 where
// section 7.4.1 has 1007, and refuses 1014, a code of the IANA registry.
// So every connection of a socket follows the frames the client sends, as
// they are read (frameScan, in Read: the bytes pass it once, in order,
// whoever reads them), and gives the verdict on each well-formed close
// frame itself, in place of the frame's last byte: gorilla never holds a
// whole close frame, so it never answers one. Its read then fails with
// the verdict, which the reader's end acts on (socket.end): a closeVerdict
// is the client's close (echoed), any other error a fault (closed with its
// code). Everything before the close frame reaches gorilla as it came;
// nothing after it is read.
//
// A close frame that is not well formed (RSV bits set, not final, not
// masked, or over 125 bytes) is left to gorilla, which fails the
// connection with 1002 on its header, before its payload.

// frameScan follows the frames of one connection's incoming stream. It is
// used by the connection's reads only, which only the socket's reader
// goroutine makes.
type frameScan struct {
	left uint64     // payload bytes of the current frame not yet read
	head [14]byte   // the header being read: 2 bytes, 0, 2 or 8 of length, 4 of mask
	n    uint8      // bytes of head read
	cf   *closeRead // a close frame being read, then its verdict; nil before any
}

// closeRead is a close frame being read (unmasked as it comes), then the
// verdict on it, which every later read returns.
type closeRead struct {
	mask    [4]byte
	payload [maxControlPayload]byte
	n       int
	verdict error
}

// maxControlPayload is the payload limit of a control frame (RFC 6455
// section 5.5).
const maxControlPayload = 125

// closeVerdict is the read error of a well-formed close frame from the
// client: code is 1005 when it had no payload.
type closeVerdict struct {
	code   int
	reason string
}

func (v *closeVerdict) Error() string {
	return fmt.Sprintf("client closed with %d %q", v.code, v.reason)
}

// verdict returns the error a read ends with once a close frame was
// judged, nil before.
func (f *frameScan) verdict() error {
	if f.cf == nil {
		return nil
	}
	return f.cf.verdict
}

// scan follows the frames in b, bytes just read (follow). A panic in it
// fails this read and every later one with a readerFailure (failure.go).
func (f *frameScan) scan(b []byte) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			rf := &readerFailure{failure{op: opReader, panic: p, stack: debug.Stack()}}
			f.cf = &closeRead{verdict: rf}
			n, err = 0, rf
		}
	}()
	return f.follow(b)
}

// follow follows the frames in b, bytes just read. It returns how many of
// them go on to gorilla: all of them, or, once a close frame is whole,
// those before its last byte, with the verdict.
func (f *frameScan) follow(b []byte) (int, error) {
	for i := 0; i < len(b); {
		if f.left > 0 {
			k := int(min(f.left, uint64(len(b)-i)))
			f.left -= uint64(k)
			i += k
			if cf := f.cf; cf != nil && cf.verdict == nil {
				for _, c := range b[i-k : i] {
					cf.payload[cf.n] = c ^ cf.mask[cf.n%4]
					cf.n++
				}
				if f.left == 0 {
					return i - 1, cf.judge()
				}
			}
			continue
		}
		f.head[f.n] = b[i]
		f.n++
		i++
		if f.n < headerSize(f.head[:f.n]) {
			continue
		}
		h := f.head[:f.n]
		f.n = 0
		f.left = payloadLength(h)
		if !judged(h) {
			continue
		}
		cf := &closeRead{}
		copy(cf.mask[:], h[len(h)-4:])
		f.cf = cf
		if f.left == 0 {
			return i - 1, cf.judge()
		}
	}
	return len(b), nil
}

// headerSize is the size of the frame header that starts with h.
func headerSize(h []byte) uint8 {
	if len(h) < 2 {
		return 2
	}
	size := uint8(2)
	switch h[1] & 0x7f {
	case 126:
		size += 2
	case 127:
		size += 8
	}
	if h[1]&0x80 != 0 { // masked
		size += 4
	}
	return size
}

// payloadLength is the payload length a whole header h gives.
func payloadLength(h []byte) uint64 {
	switch n := h[1] & 0x7f; n {
	case 126:
		return uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		return binary.BigEndian.Uint64(h[2:10])
	default:
		return uint64(n)
	}
}

// judged reports whether h is the header of a close frame judged here:
// final, no RSV bit, masked, at most 125 bytes. gorilla fails any other
// close frame on its header.
func judged(h []byte) bool {
	return h[0] == 0x80|0x8 && h[1]&0x80 != 0 && h[1]&0x7f <= maxControlPayload
}

// judge gives the verdict on the whole close frame (RFC 6455 sections
// 5.5.1 and 7.4).
func (cf *closeRead) judge() error {
	p := cf.payload[:cf.n]
	switch {
	case len(p) == 0:
		cf.verdict = &closeVerdict{code: closeNoStatus}
	case len(p) == 1:
		cf.verdict = fmt.Errorf("%w: a close frame of 1 byte", ErrProtocol)
	case !validCloseCode(int(binary.BigEndian.Uint16(p))):
		cf.verdict = fmt.Errorf("%w: close code %d", ErrProtocol, binary.BigEndian.Uint16(p))
	case !utf8.Valid(p[2:]):
		cf.verdict = fmt.Errorf("%w: a close reason that is not UTF-8", ErrInvalidUTF8)
	default:
		cf.verdict = &closeVerdict{code: int(binary.BigEndian.Uint16(p)), reason: string(p[2:])}
	}
	return cf.verdict
}

// closeNoStatus is the code of a close frame without one (1005); it is
// never sent.
const closeNoStatus = 1005

// validCloseCode reports whether a close frame may carry code (RFC 6455
// section 7.4 and the IANA registry): 1000 to 1003, 1007 to 1014 (1004
// is reserved, 1005, 1006 and 1015 are never sent), 3000 to 4999 (for
// libraries and applications).
func validCloseCode(code int) bool {
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999)
}

// checkedConn is a connection without direct writes (not TCP: TLS, say),
// whose close frames are judged all the same.
type checkedConn struct {
	net.Conn
	frames frameScan
}

func (c *checkedConn) Read(p []byte) (int, error) {
	if err := c.frames.verdict(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if m, verdict := c.frames.scan(p[:n]); verdict != nil {
			return m, verdict
		}
	}
	return n, err
}
