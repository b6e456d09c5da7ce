package ingress

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
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

// relays are the relayed sockets of a Handler, for CloseRelays.
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
func (h *Handler) CloseRelays(code int, reason string) {
	h.relays.mu.Lock()
	h.relays.closed, h.relays.code, h.relays.reason = true, code, reason
	all := make([]*relay, 0, len(h.relays.all))
	for r := range h.relays.all {
		all = append(all, r)
	}
	h.relays.mu.Unlock()
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

// relaySocket sends the upgrade r to the holder d and, once the holder
// accepted it, relays the socket until either side ends it or the node
// stops (CloseRelays). An answer other than 101 is relayed as forward
// relays one, and classified the same way.
func (h *Handler) relaySocket(w http.ResponseWriter, r *http.Request, a ownership.Actor, d actors.Elsewhere, last bool) (forwarded, error) {
	// A relayed socket holds two descriptors while it lives, the client's
	// and the peer's: both come out of the socket budget.
	if h.cfg.Sockets != nil {
		release, err := h.cfg.Sockets.Reserve(2)
		if err != nil {
			unavailable(w, 5*time.Second, "too many sockets on this node: "+err.Error())
			return forwardDone, nil
		}
		defer release()
	}
	out := r.Clone(context.Background())
	out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = "http", d.Addr, d.Addr, ""
	out.Header.Set(ForwardedHeader, string(h.cfg.Node))
	out.Header.Set(ForwardedToHeader, string(d.Node))
	setInstance(out.Header, d.Instance)
	out.Body, out.ContentLength = http.NoBody, 0
	if len(h.cfg.ClusterKey) > 0 {
		signRequest(out, nil, h.cfg.ClusterKey, time.Now())
	}
	dialer := net.Dialer{Timeout: peerDialTimeout, KeepAlive: 30 * time.Second}
	peer, err := dialer.DialContext(r.Context(), "tcp", d.Addr)
	if err != nil {
		h.cfg.Keeper.PeerUnreachable(d.Node)
		h.cfg.Keeper.RouteFailed(a, d.Node)
		h.peerLog.failed(d.Node, d.Addr, "relay", err)
		return forwardNotSent, err
	}
	// The handshake is bounded as a forward's answer is, and ends early if
	// the holder is taken for dead meanwhile.
	peer.SetDeadline(time.Now().Add(peerAnswerTimeout))
	stopWatch := h.watchHolder(d.Node, func() { peer.Close() })
	res, br, err := handshake(peer, out)
	stopWatch()
	if err != nil {
		peer.Close()
		h.cfg.Keeper.RouteFailed(a, d.Node)
		h.peerLog.failed(d.Node, d.Addr, "relay", err)
		return forwardUnknown, err
	}
	h.peerLog.answered(d.Node)
	if res.StatusCode != http.StatusSwitchingProtocols {
		defer peer.Close()
		defer res.Body.Close()
		if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get(NotRunHeader) != "" ||
			res.StatusCode == http.StatusUnauthorized && res.Header.Get(NotRunHeader) != "" {
			h.cfg.Keeper.RouteFailed(a, d.Node)
			if res.StatusCode == http.StatusUnauthorized {
				h.cfg.Keeper.PeerUnreachable(d.Node)
			}
			if !last {
				return forwardRefused, errHolderRefused
			}
		}
		for k, vs := range res.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(res.StatusCode)
		io.Copy(w, io.LimitReader(res.Body, h.cfg.MaxBody))
		return forwardDone, nil
	}
	peer.SetDeadline(time.Time{})
	client, cbuf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		peer.Close()
		return forwardDone, fmt.Errorf("relay: %w", err)
	}
	rl := &relay{client: client, peer: peer}
	rl.down = relayDir{src: br, dst: bufio.NewWriterSize(client, 32<<10)}
	rl.up = relayDir{src: cbuf.Reader, dst: bufio.NewWriterSize(peer, 32<<10), masked: true}
	defer rl.end()
	client.SetDeadline(time.Time{})
	if err := writeSwitching(rl.down.dst, res); err != nil {
		return forwardDone, nil
	}
	if !h.relays.add(rl) {
		// The node stops: the socket is closed as the others were.
		h.relays.mu.Lock()
		code, reason := h.relays.code, h.relays.reason
		h.relays.mu.Unlock()
		rl.down.closeWith(code, reason)
		rl.up.closeWith(code, reason)
		return forwardDone, nil
	}
	defer h.relays.remove(rl)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := rl.up.copyFrames()
		h.relayEnded("client", err)
		rl.end()
	}()
	err = rl.down.copyFrames()
	h.relayEnded("holder", err)
	rl.end()
	<-done
	return forwardDone, nil
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
func (h *Handler) relayEnded(side string, err error) {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	h.log.Debug("relayed websocket ended", slog.String("side", side), slog.Any("err", err))
}

// isUpgrade says whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }
