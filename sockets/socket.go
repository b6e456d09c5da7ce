package sockets

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Faults the node closes a socket for; Sink.Error receives one of them
// (errors.Is), and CloseCode tells the code the client was sent.
var (
	// ErrMessageTooBig: the client sent a message over MaxMessage (1009).
	ErrMessageTooBig = errors.New("message over the size limit")
	// ErrSlowReader: the socket's send queue was full, or one write took
	// longer than WriteTimeout (1013).
	ErrSlowReader = errors.New("client reads too slowly")
	// ErrPingTimeout: the client sent nothing, not even a pong, within
	// PongTimeout of a ping (1011).
	ErrPingTimeout = errors.New("no pong within the pong timeout")
	// ErrProtocol: the client broke the WebSocket protocol (1002).
	ErrProtocol = errors.New("websocket protocol error")
	// ErrInvalidUTF8: the client sent a text message, or a close reason,
	// that is not UTF-8 (1007, invalid frame payload data). Send and
	// Broadcast refuse such a text message with it too (and ErrInvalid),
	// without closing the socket.
	ErrInvalidUTF8 = errors.New("invalid UTF-8 in a text message or close reason")
	// ErrInternal: the socket owner of the socket's actor failed (a panic
	// recovered while acting for its sockets, failure.go), and closed every
	// socket of that actor (1011, internal error). An operation that
	// failed returns it too.
	ErrInternal = errors.New("internal error")
)

// CloseCode returns the close code the node sends for a fault, 0 for any
// other error.
func CloseCode(err error) int {
	switch {
	case errors.Is(err, ErrMessageTooBig):
		return websocket.CloseMessageTooBig
	case errors.Is(err, ErrSlowReader):
		return websocket.CloseTryAgainLater
	case errors.Is(err, ErrPingTimeout):
		return websocket.CloseInternalServerErr
	case errors.Is(err, ErrProtocol):
		return websocket.CloseProtocolError
	case errors.Is(err, ErrInvalidUTF8):
		return websocket.CloseInvalidFramePayloadData
	case errors.Is(err, ErrInternal):
		return websocket.CloseInternalServerErr
	}
	return 0
}

// faultLabel is the metric label of a fault.
func faultLabel(err error) string {
	switch {
	case errors.Is(err, ErrMessageTooBig):
		return "message_too_big"
	case errors.Is(err, ErrSlowReader):
		return "slow_reader"
	case errors.Is(err, ErrPingTimeout):
		return "ping_timeout"
	case errors.Is(err, ErrInvalidUTF8):
		return "invalid_utf8"
	case errors.Is(err, ErrInternal):
		return "internal_error"
	}
	return "protocol_error"
}

type frameKind uint8

const (
	textFrame frameKind = iota + 1
	binaryFrame
	pingFrame
	closeFrame
	// restFrame: write the tail of a frame written directly in part,
	// which wc keeps (rest bytes of it, counted in queued).
	restFrame
)

// frame is one queued write. data is never modified once queued (a
// broadcast shares it between sockets).
type frame struct {
	kind   frameKind
	data   []byte
	code   int
	reason string
	rest   int // restFrame: the length of the tail
}

// held is what f holds until written, in bytes.
func (f *frame) held() int { return len(f.data) + f.rest }

// socket is one accepted WebSocket. Its reader goroutine lives as long as
// its slot; a writer goroutine runs only while the queue is non-empty.
type socket struct {
	o     *Owner
	id    ID
	actor ownership.Actor
	room  *actorSockets // its actor's; kept while the socket is in it
	tags  []string
	conn  *websocket.Conn
	wc    *wireConn // conn's connection, for direct writes (direct.go)
	url   string    // an outbound socket's (dial.go); "" for an accepted one

	answered atomic.Bool  // something arrived since the last ping
	pingTick atomic.Int64 // the wheel tick of the last ping
	lastAuto atomic.Int64 // Unix nanoseconds of the last auto-response; 0: none

	mu sync.Mutex
	// closing: Gone has been (or is being) called. Invariant: set once, by
	// closingLocked, whose caller then calls announce; goneDone is closed
	// once Gone has returned (or panicked).
	closing  bool
	goneDone chan struct{}
	// freed: the reader ended and the slot is gone. Invariant: no writer
	// or abort is started once it is set, so every wg.Add happens while
	// the reader's own count is held.
	freed     bool
	writing   bool // a writer goroutine runs
	closeSent bool // a close frame was written or handed to a goroutine to write
	aborted   bool // the connection is being dropped
	// stage is how far the reader got in ending the socket, for a reader
	// that fails (failure.go); read and written by the reader only, not
	// under mu.
	stage readerStage
	fault error
	queue []frame
	// queued: the bytes the socket holds until written, those of queue
	// and of the frame being written (inflight of them), counted in the
	// node's total too (queued.go). Invariant: changed only by hold,
	// release and dropQueue.
	queued     int
	inflight   int
	attachment []byte
}

func (o *Owner) newSocket(id ID, r *actorSockets, tags []string, conn *websocket.Conn) *socket {
	s := &socket{o: o, id: id, actor: r.actor, room: r, conn: conn}
	if len(tags) > 0 {
		s.tags = slices.Clone(tags)
	}
	s.answered.Store(true)
	conn.SetReadLimit(int64(o.cfg.MaxMessage))
	conn.SetPongHandler(func(string) error { s.answered.Store(true); return nil })
	conn.SetCloseHandler(s.peerClosed)
	return s
}

// read is the socket's reader goroutine: it delivers messages until the
// connection ends, then frees the slot and sends the terminal event.
//
// Invariant: read's own frame stays small, so that an idle reader (parked
// in the kernel read under NextReader) fits the goroutine's first 2 KiB
// stack: a message is read and delivered in receive, and the end of a
// socket handled in end, both kept out of line. Inlining them doubled the
// stack to 4 KiB (BenchmarkIdleSocketMemory reports it as
// stack-B/socket), and so did a frame of 16 bytes more in wireConn.Read,
// under gorilla's read of the next frame header: the idle stack has
// almost no room left. A deferred recover in read doubled it too, so the
// boundary of the reader's room (failure.go) is in what read calls out of
// line.
func (s *socket) read() {
	for {
		typ, r, err := s.conn.NextReader()
		if err == nil {
			err = s.receive(typ == websocket.TextMessage, r)
		}
		if err != nil {
			s.finish(err)
			return
		}
	}
}

// finish ends the socket once reading ended with err: a failure of the
// reader's code (readerFailure) fails its room, which ends the socket;
// anything else ends it here (end). It is the boundary of the reader's
// room for the end.
//
//go:noinline
func (s *socket) finish(err error) {
	defer s.readPanicked()
	var rf *readerFailure
	if errors.As(err, &rf) {
		rf.actor = s.actor
		s.o.roomFailed(s.room, rf.failure, s)
		return
	}
	s.end(err)
}

// end frees the slot and sends the terminal event. err is what ended
// the reading: the client's close (a closeVerdict, echoed here), a fault
// (closed here with its code unless gorilla did), or the connection's
// end.
//
//go:noinline
func (s *socket) end(err error) {
	defer s.o.wg.Done()
	s.stage = stageEnding
	var peer *closeVerdict
	if errors.As(err, &peer) {
		s.peerClosed(peer.code, peer.reason)
	}
	readErr, sent := readFault(err)
	s.mu.Lock()
	first := s.closingLocked()
	tell := false // the client is told why, unless a close frame went already
	if s.fault == nil {
		s.fault = readErr
		tell = readErr != nil && !sent && !s.closeSent
		s.closeSent = s.closeSent || tell
	}
	s.freed = true
	s.dropQueueLocked()
	fault, announced := s.fault, s.goneDone
	s.mu.Unlock()

	if tell {
		_ = s.conn.WriteControl(websocket.CloseMessage, faultClose(fault), time.Now().Add(s.o.cfg.WriteTimeout))
	}
	sink := s.o.cfg.Sink
	if first {
		s.announce()
		if fault != nil {
			s.o.m.nodeCloses.WithLabelValues(faultLabel(fault)).Inc()
		}
	} else {
		<-announced // Gone comes before the terminal event
	}
	s.o.free(s)
	s.stage = stageFreed
	_ = s.conn.NetConn().Close()

	var ce *websocket.CloseError
	switch {
	case fault != nil:
		s.o.m.closed.WithLabelValues(codeLabel(CloseCode(fault))).Inc()
		sink.Error(s.actor, s.id, fault)
	case peer != nil:
		s.o.m.closed.WithLabelValues(codeLabel(peer.code)).Inc()
		sink.Close(s.actor, s.id, peer.code, peer.reason, true)
	case errors.As(err, &ce) && ce.Code != websocket.CloseAbnormalClosure:
		s.o.m.closed.WithLabelValues(codeLabel(ce.Code)).Inc()
		sink.Close(s.actor, s.id, ce.Code, ce.Text, true)
	default:
		s.o.m.closed.WithLabelValues(codeLabel(websocket.CloseAbnormalClosure)).Inc()
		sink.Close(s.actor, s.id, websocket.CloseAbnormalClosure, "", false)
	}
}

// receive reads one data message from r and hands it to the Sink, unless
// the auto-response answers it. A text message is checked as it comes
// (utf8.go): the first bytes that cannot be UTF-8 fail the socket with
// 1007, before the rest of the message is read, and the Sink never sees
// the message. A panic in it ends the reading with a readerFailure.
//
//go:noinline
func (s *socket) receive(text bool, r io.Reader) (err error) {
	defer readerFailed(&err)
	data, err := readMessage(r, text)
	if err != nil {
		return err
	}
	s.answered.Store(true)
	s.o.fault(s.actor, opReader)
	s.o.m.messagesIn.Inc()
	s.o.m.bytesIn.Add(float64(len(data)))
	if text && s.autoRespond(data) {
		return nil
	}
	if s.o.cfg.Sink.Message(s.actor, s.id, text, data) != nil {
		_ = s.o.Close(s.actor, s.id, 1012, UndeliveredReason)
	}
	return nil
}

// readFault maps a read error to the fault it reveals, nil for the
// client's close or a connection that ended; sent reports that gorilla
// sent the close frame of the fault already.
func readFault(err error) (fault error, sent bool) {
	var ce *websocket.CloseError
	var cv *closeVerdict
	var ne net.Error
	switch {
	case errors.Is(err, ErrProtocol), errors.Is(err, ErrInvalidUTF8), errors.Is(err, ErrInternal):
		return err, false // found here: a close frame's verdict, a text message, or the reader's failure
	case errors.Is(err, websocket.ErrReadLimit):
		return ErrMessageTooBig, true // gorilla sent the 1009 close frame
	case errors.As(err, &cv), errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, net.ErrClosed):
		return nil, false
	}
	return fmt.Errorf("%w: %w", ErrProtocol, err), true // gorilla sent the 1002 close frame
}

// faultClose is the payload of the close frame sent for a fault: its code
// and its text, cut to MaxCloseReason bytes of UTF-8.
func faultClose(fault error) []byte {
	reason := strings.ToValidUTF8(fault.Error(), "?")
	if len(reason) > MaxCloseReason {
		cut := MaxCloseReason
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut]
	}
	return websocket.FormatCloseMessage(CloseCode(fault), reason)
}

// peerClosed answers the client's close frame (the start or the answer
// of the close handshake), on the reader goroutine. It is also gorilla's
// close handler, which only a close frame that reached gorilla would
// call; none does (closeframe.go).
func (s *socket) peerClosed(code int, _ string) error {
	s.mu.Lock()
	first := s.closingLocked()
	echo := !s.closeSent
	s.closeSent = true
	s.dropQueueLocked()
	s.mu.Unlock()
	if first {
		s.announce()
	}
	if echo {
		_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(s.o.cfg.WriteTimeout))
	}
	return nil
}

// send writes a data message directly (direct.go) if nothing is queued
// or being written, else queues it. A full queue closes the socket with
// 1013.
func (s *socket) send(kind frameKind, data []byte) error {
	if s.claimDirect(len(data)) {
		rest, err := s.wc.tryWrite(kind, data, s.url != "")
		return s.directDone(kind, data, rest, err)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return fmt.Errorf("send on socket %v of %s: %w", s.id, s.actor, ErrClosing)
	}
	return s.enqueueLocked(kind, data)
}

// claimDirect reports whether a message of size bytes may be written
// directly: nothing is queued or being written. If so, what is sent
// meanwhile is queued behind it, and the caller ends the write with
// directDone.
func (s *socket) claimDirect(size int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.writing || len(s.queue) > 0 || s.freed || s.aborted || s.wc == nil || size > maxDirect {
		return false
	}
	s.writing = true
	return true
}

// directDone ends a direct write of a data message (claimDirect): the
// tail left (rest bytes) is written first by a writer goroutine, and a
// message not written at all (err) is queued, unless the socket started
// closing meanwhile (ErrClosing). What was queued meanwhile gets a writer.
func (s *socket) directDone(kind frameKind, data []byte, rest int, err error) error {
	if err == nil {
		s.o.m.messagesOut.Inc()
		s.o.m.bytesOut.Add(float64(len(data)))
	}
	s.mu.Lock()
	s.writing = false
	if err == nil || s.closing {
		if rest > 0 && !s.freed && !s.aborted {
			// The writer completes the frame before anything queued
			// meanwhile.
			s.queue = slices.Insert(s.queue, 0, frame{kind: restFrame, rest: rest})
			s.holdLocked(rest)
		}
		// What was queued meanwhile (a close frame too) could not
		// start a writer while this write ran.
		if len(s.queue) > 0 {
			s.startWriterLocked()
		}
		over := s.o.overTotal()
		s.mu.Unlock()
		if over {
			s.o.shed(nil)
		}
		if err != nil {
			return fmt.Errorf("send on socket %v of %s: %w", s.id, s.actor, ErrClosing)
		}
		return nil
	}
	return s.enqueueLocked(kind, data) // not written: queued
}

// enqueueLocked queues a data message for the writer and releases s.mu.
// Past the node's total (Config.SendQueueTotal) the sockets that hold the
// most are closed (queued.go), this one too if it is among them.
func (s *socket) enqueueLocked(kind frameKind, data []byte) error {
	// Invariant: a message of at most MaxMessage fits an empty queue.
	if queued := s.queued; queued > 0 && queued+len(data) > s.o.cfg.SendQueue {
		s.mu.Unlock()
		s.fail(ErrSlowReader)
		return fmt.Errorf("send on socket %v of %s: %d bytes queued, limit %d: %w", s.id, s.actor, queued, s.o.cfg.SendQueue, ErrSlowReader)
	}
	s.queue = append(s.queue, frame{kind: kind, data: data})
	s.holdLocked(len(data))
	s.startWriterLocked()
	over := s.o.overTotal()
	s.mu.Unlock()
	if over && s.o.shed(s) {
		return fmt.Errorf("send on socket %v of %s: it held the most of the node's send queues, over their total %d: %w", s.id, s.actor, s.o.cfg.SendQueueTotal, ErrSlowReader)
	}
	return nil
}

// close starts the close handshake after what is queued; label counts it.
func (s *socket) close(code int, reason, label string) error {
	s.mu.Lock()
	if !s.closingLocked() {
		s.mu.Unlock()
		return fmt.Errorf("close socket %v of %s: %w", s.id, s.actor, ErrClosing)
	}
	s.queue = append(s.queue, frame{kind: closeFrame, code: code, reason: reason})
	s.startWriterLocked()
	s.mu.Unlock()
	s.announce()
	s.o.m.nodeCloses.WithLabelValues(label).Inc()
	return nil
}

// closingLocked marks the socket closing. When it reports true the caller
// is the one to call announce, once it has released s.mu.
func (s *socket) closingLocked() bool {
	if s.closing {
		return false
	}
	s.closing = true
	s.goneDone = make(chan struct{}) // only now: an idle socket has none
	return true
}

// announce calls Sink.Gone, then lets the terminal event go (end waits for
// it when another goroutine started the close), also if Gone panics.
func (s *socket) announce() {
	defer close(s.goneDone)
	s.o.cfg.Sink.Gone(s.actor)
}

// ping queues a ping ahead of any data.
func (s *socket) ping(tick int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.freed {
		return
	}
	s.answered.Store(false)
	s.pingTick.Store(tick)
	s.queue = slices.Insert(s.queue, 0, frame{kind: pingFrame})
	s.startWriterLocked()
}

func (s *socket) startWriterLocked() {
	if s.writing || s.freed || s.aborted {
		return
	}
	s.writing = true
	s.o.wg.Add(1)
	s.o.writers.Go(s.write)
}

// maxIdleWriters bounds the writer goroutines kept waiting for a socket
// to write, with the stacks they grew (about 8 KiB each), and writerIdle
// how long each waits.
const (
	maxIdleWriters = 128
	writerIdle     = 10 * time.Second
)

// write empties the queue, on a writer goroutine (Owner.writers).
func (s *socket) write() {
	defer s.writeEnded()
	for {
		s.mu.Lock()
		if s.inflight > 0 { // the frame written last
			s.releaseLocked(s.inflight)
			s.inflight = 0
		}
		if len(s.queue) == 0 || s.aborted || s.freed {
			s.writing = false
			s.dropQueueLocked()
			s.mu.Unlock()
			s.o.stoppedWriting()
			return
		}
		f := s.queue[0]
		s.queue[0] = frame{}
		s.queue = s.queue[1:]
		s.inflight = f.held() // held until written
		skip := f.kind == closeFrame && s.closeSent
		if f.kind == closeFrame {
			s.closeSent = true
		}
		s.mu.Unlock()
		if skip {
			continue
		}
		s.o.fault(s.actor, opWriter)
		if err := s.writeFrame(f); err != nil {
			// gorilla writes a large frame past wireConn.Write (with
			// writev): the stream may end inside it either way.
			if s.wc != nil {
				s.wc.markBroken()
			}
			s.mu.Lock()
			s.writing = false
			closing := s.closing
			s.mu.Unlock()
			var ne net.Error
			if !closing && errors.As(err, &ne) && ne.Timeout() {
				s.fail(ErrSlowReader)
			} else {
				s.drop()
			}
			s.o.stoppedWriting()
			return
		}
	}
}

// stoppedWriting tells a test that a writer goroutine stopped.
func (o *Owner) stoppedWriting() {
	if o.writerStopped != nil {
		o.writerStopped()
	}
}

func (s *socket) writeFrame(f frame) error {
	deadline := time.Now().Add(s.o.cfg.WriteTimeout)
	switch f.kind {
	case restFrame:
		return s.wc.flush(deadline)
	case pingFrame:
		return s.conn.WriteControl(websocket.PingMessage, nil, deadline)
	case closeFrame:
		err := s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(f.code, f.reason), deadline)
		if err == nil {
			// Bounded wait for the client's close frame; the reader then
			// ends on the deadline (a transient timer, only while closing).
			err = s.conn.SetReadDeadline(time.Now().Add(s.o.cfg.WriteTimeout))
		}
		return err
	}
	typ := websocket.BinaryMessage
	if f.kind == textFrame {
		typ = websocket.TextMessage
	}
	if err := s.conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	if err := s.conn.WriteMessage(typ, f.data); err != nil {
		return err
	}
	s.o.m.messagesOut.Inc()
	s.o.m.bytesOut.Add(float64(len(f.data)))
	return nil
}

// fail closes the socket for a fault: the queue is dropped, the client is
// sent the fault's close code (best effort, bounded by WriteTimeout) and
// the connection is closed, which ends the reader.
func (s *socket) fail(fault error) {
	s.mu.Lock()
	if s.aborted || s.freed {
		s.mu.Unlock()
		return
	}
	s.aborted = true
	first := s.closingLocked()
	if s.fault == nil {
		s.fault = fault
	}
	s.dropQueueLocked()
	sendClose := !s.closeSent
	s.closeSent = true
	s.o.wg.Add(1)
	s.mu.Unlock()
	// Started before Gone: the connection closes even if the Sink panics.
	go func() {
		defer s.o.wg.Done()
		if sendClose {
			_ = s.conn.WriteControl(websocket.CloseMessage, faultClose(fault), time.Now().Add(s.o.cfg.WriteTimeout))
		}
		_ = s.conn.NetConn().Close()
	}()
	if first {
		s.announce()
		s.o.m.nodeCloses.WithLabelValues(faultLabel(fault)).Inc()
	}
}

// drop closes the connection at once; the reader then frees the slot.
func (s *socket) drop() {
	s.mu.Lock()
	s.aborted = true
	s.dropQueueLocked()
	s.mu.Unlock()
	_ = s.conn.NetConn().Close()
}

// autoRespond answers data with the actor's auto-response if it is the
// request, without the Sink.
func (s *socket) autoRespond(data []byte) bool {
	ar := s.room.auto.Load()
	if ar == nil || string(data) != ar.Request {
		return false
	}
	s.lastAuto.Store(s.o.cfg.Clock().UnixNano())
	s.o.m.autoResponses.Inc()
	_ = s.send(textFrame, ar.response) // closing: nothing to answer
	return true
}
