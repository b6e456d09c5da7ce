package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// WebSocket relays. A WebSocket upgrade for an actor that another node
// holds is sent on to that node, whose socket owner accepts it; this node
// then relays the socket's frames both ways. It relays them whole: each
// direction copies one frame at a time, under a lock, so that when this
// node stops it can end each relayed socket as the node's own sockets end,
// with a close frame (1012, service restart) to the client at a frame
// boundary, and one to the holder, instead of cutting the connections in
// the middle of a frame (which a client sees as 1006). Reading a frame's
// header costs a few nanoseconds; writes are batched while the source
// has more bytes buffered, so a burst of small frames is still written
// with few system calls.

// relay is one relayed socket.
type relay struct {
	client, peer net.Conn
	down, up     relayDir // peer to client, client to peer
	once         sync.Once
}

// relayDir is one direction of a relay.
type relayDir struct {
	mu     sync.Mutex // held while a frame is written
	src    *bufio.Reader
	dst    *bufio.Writer
	masked bool // frames written on dst must be masked (client to peer)
	closed bool // a close frame was written: nothing more is
}

// maxFrameHeader is the longest frame header: 2 bytes, 8 of length, 4 of
// mask.
const maxFrameHeader = 14

// copyFrames copies frames from src to dst until either fails or the
// direction is closed.
func (d *relayDir) copyFrames() error {
	var hdr [maxFrameHeader]byte
	for {
		if _, err := io.ReadFull(d.src, hdr[:2]); err != nil {
			return err
		}
		n := 2
		length := uint64(hdr[1] & 0x7f)
		switch length {
		case 126:
			if _, err := io.ReadFull(d.src, hdr[2:4]); err != nil {
				return err
			}
			length, n = uint64(binary.BigEndian.Uint16(hdr[2:4])), 4
		case 127:
			if _, err := io.ReadFull(d.src, hdr[2:10]); err != nil {
				return err
			}
			length, n = binary.BigEndian.Uint64(hdr[2:10]), 10
		}
		if hdr[1]&0x80 != 0 {
			if _, err := io.ReadFull(d.src, hdr[n:n+4]); err != nil {
				return err
			}
			n += 4
		}
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return net.ErrClosed
		}
		_, err := d.dst.Write(hdr[:n])
		if err == nil {
			_, err = io.CopyN(d.dst, d.src, int64(length))
		}
		if err == nil && d.src.Buffered() == 0 {
			err = d.dst.Flush()
		}
		d.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// closeWith writes a close frame with code and reason at a frame boundary
// of the direction, and closes it for further frames.
func (d *relayDir) closeWith(code int, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	payload := binary.BigEndian.AppendUint16(nil, uint16(code))
	payload = append(payload, reason[:min(len(reason), 123)]...)
	frame := []byte{0x88, byte(len(payload))}
	if d.masked {
		frame[1] |= 0x80
		mask := [4]byte{0x57, 0x4b, 0x31, 0x32} // a close frame reveals nothing to hide
		frame = append(frame, mask[:]...)
		for i := range payload {
			payload[i] ^= mask[i%4]
		}
	}
	frame = append(frame, payload...)
	if _, err := d.dst.Write(frame); err == nil {
		d.dst.Flush()
	}
}

// end closes the relay's connections (once).
func (r *relay) end() {
	r.once.Do(func() {
		r.client.Close()
		r.peer.Close()
	})
}

// relays are the relayed sockets of a Client, for CloseRelays.
type relays struct {
	mu     sync.Mutex
	all    map[*relay]struct{}
	closed bool // CloseRelays was called: a relay that begins now ends at once
	code   int
	reason string
}

func (rs *relays) add(r *relay) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return false
	}
	if rs.all == nil {
		rs.all = map[*relay]struct{}{}
	}
	rs.all[r] = struct{}{}
	return true
}

func (rs *relays) remove(r *relay) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.all, r)
}

// CloseRelays ends every WebSocket this node relays to another node's, and
// every one that begins from now on: the client gets a close frame with
// code and reason (a stop gives 1012, service restart, as the node's own
// sockets get), the holder one with the same code, each at a frame
// boundary, unless a frame takes more than a second to finish.
func (c *Client) CloseRelays(code int, reason string) {
	c.relays.mu.Lock()
	c.relays.closed, c.relays.code, c.relays.reason = true, code, reason
	all := make([]*relay, 0, len(c.relays.all))
	for r := range c.relays.all {
		all = append(all, r)
	}
	c.relays.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range all {
		wg.Go(func() {
			// A frame under way is waited for at most a second.
			deadline := time.Now().Add(time.Second)
			r.client.SetWriteDeadline(deadline)
			r.peer.SetWriteDeadline(deadline)
			r.down.closeWith(code, reason)
			r.up.closeWith(code, reason)
			r.end()
		})
	}
	wg.Wait()
}

// Relay sends the WebSocket upgrade r for actor a to the node d that holds
// it and, once the holder accepted it, relays the socket until either side
// ends it or the node stops (CloseRelays). An answer other than 101 is
// relayed as Forward relays one, and judged the same way. The two
// descriptors a relayed socket holds while it lives, the client's and the
// holder's, are the caller's to count.
func (c *Client) Relay(w http.ResponseWriter, r *http.Request, a ownership.Actor, d actorhost.Elsewhere, last bool) (Sent, error) {
	if c.unsendable(w, r, a, d) {
		return Answered, nil
	}
	out := r.Clone(context.Background())
	out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = c.scheme(), d.Addr, d.Addr, ""
	out.Body, out.ContentLength = http.NoBody, 0
	c.header(out, d, nil)
	var peer net.Conn
	var err error
	dialer := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	if c.cfg.TLS != nil {
		td := tls.Dialer{NetDialer: &dialer, Config: c.cfg.TLS}
		peer, err = td.DialContext(r.Context(), "tcp", d.Addr)
	} else {
		peer, err = dialer.DialContext(r.Context(), "tcp", d.Addr)
	}
	if err != nil {
		c.cfg.Keeper.PeerUnreachable(d.Node)
		c.cfg.Keeper.RouteFailed(a, d.Node)
		c.peers.failed(d.Node, d.Addr, "relay", err)
		return NotSent, err
	}
	// The handshake is bounded as a forward's answer is, and ends early if
	// the holder is taken for dead meanwhile.
	peer.SetDeadline(time.Now().Add(answerTimeout))
	stopWatch := c.watchHolder(d.Node, func() { peer.Close() })
	res, br, err := handshake(peer, out)
	stopWatch()
	if err != nil {
		peer.Close()
		c.cfg.Keeper.RouteFailed(a, d.Node)
		c.peers.failed(d.Node, d.Addr, "relay", err)
		return Unknown, err
	}
	c.peers.answered(d.Node)
	if res.StatusCode != http.StatusSwitchingProtocols {
		defer peer.Close()
		defer res.Body.Close()
		// Judged as a forward's answer is, with no earlier try to ask
		// about: an upgrade has no key, and is not sent again once sent.
		if err := c.judgeAnswer(a, d, res.StatusCode, res.Header, last, false); errors.Is(err, ErrHolderRefused) {
			return Refused, err
		}
		for k, vs := range res.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(res.StatusCode)
		io.Copy(w, io.LimitReader(res.Body, c.cfg.MaxBody))
		return Answered, nil
	}
	peer.SetDeadline(time.Time{})
	client, cbuf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		peer.Close()
		return Answered, fmt.Errorf("relay: %w", err)
	}
	rl := &relay{client: client, peer: peer}
	rl.down = relayDir{src: br, dst: bufio.NewWriterSize(client, 32<<10)}
	rl.up = relayDir{src: cbuf.Reader, dst: bufio.NewWriterSize(peer, 32<<10), masked: true}
	defer rl.end()
	client.SetDeadline(time.Time{})
	if err := writeSwitching(rl.down.dst, res); err != nil {
		return Answered, nil
	}
	if !c.relays.add(rl) {
		// The node stops: the socket is closed as the others were.
		c.relays.mu.Lock()
		code, reason := c.relays.code, c.relays.reason
		c.relays.mu.Unlock()
		rl.down.closeWith(code, reason)
		rl.up.closeWith(code, reason)
		return Answered, nil
	}
	defer c.relays.remove(rl)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := rl.up.copyFrames()
		c.relayEnded("client", err)
		rl.end()
	}()
	err = rl.down.copyFrames()
	c.relayEnded("holder", err)
	rl.end()
	<-done
	return Answered, nil
}

// handshake writes the upgrade out on conn and reads the answer. The
// reader it returns holds what the peer sent after the answer.
func handshake(conn net.Conn, out *http.Request) (*http.Response, *bufio.Reader, error) {
	bw := bufio.NewWriter(conn)
	if err := out.Write(bw); err != nil {
		return nil, nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(conn, 32<<10)
	res, err := http.ReadResponse(br, out)
	if err != nil {
		return nil, nil, err
	}
	return res, br, nil
}

// writeSwitching writes the holder's 101 answer to the client.
func writeSwitching(w *bufio.Writer, res *http.Response) error {
	fmt.Fprintf(w, "HTTP/1.1 101 %s\r\n", http.StatusText(http.StatusSwitchingProtocols))
	if err := res.Header.Write(w); err != nil {
		return err
	}
	if _, err := w.WriteString("\r\n"); err != nil {
		return err
	}
	return w.Flush()
}

// relayEnded logs why a relayed socket ended, when it was not one side
// closing it.
func (c *Client) relayEnded(side string, err error) {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	c.log.Debug("relayed websocket ended", slog.String("side", side), slog.Any("err", err))
}
