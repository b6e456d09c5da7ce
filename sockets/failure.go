package sockets

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Failure of the socket owner of one actor. A room (rooms.go) is not an
// actor of the node's supervision tree, so no supervisor restarts it: its
// failure is contained where it happens. Each boundary of a room recovers
// a panic: the operations that act for one actor (actor.go; CloseActor
// and CloseAll, per socket) and the goroutines of one socket (its reader,
// its writer, the pinger's work for it). The reader's boundary is in what
// it calls out of line (the reading of a message and the Sink's Message,
// the scan of the bytes read, the socket's end), not around its loop,
// whose stack an idle socket keeps: a deferred call there doubled it to
// 4 KiB (see socket.read); a panic of gorilla's own framing, between
// them, is not recovered. Such a panic is logged once at
// error level with the actor, the operation and the stack, counted
// (wasmkeep_websocket_owner_failures_total{op}, and Config.Failed, which
// the node counts as the failures of the tree's role sockets), and closes
// every socket of the room with 1011 as a fault closes a socket
// (socket.fail, ErrInternal): Sink.Gone for each, then its terminal
// Error, so the node's count of the actor's open sockets reaches zero and
// a parked record is released as when its clients leave. An upgrade under
// way is closed once open. Other rooms and the node carry on, and the room
// takes new sockets afterwards.
//
// What the failure cannot trust it does not wait for: a broadcast gives up
// the claims it holds before the room's sockets close (abandon), a socket
// forgets its writer that failed (the close gets no writer: fail writes
// it), and a socket whose reader failed is ended on that goroutine
// (endReader). A panic while the failure closes the sockets (in the Sink's
// Gone, say) is not a failure of its own: the connections left are closed
// without a close frame. A panic in the room on another goroutine
// meanwhile is part of the failure under way. No lock of the package is
// held around a call into the node (the Sink, Config.Failed), so a panic
// there leaves none held.
//
// A boundary costs a deferred call (open-coded: nanoseconds); nothing else
// is spent per message.

// Where a room fails: the label of wasmkeep_websocket_owner_failures_total.
const (
	opSend         = "send"
	opBroadcast    = "broadcast"
	opClose        = "close"
	opCloseActor   = "close_actor"
	opCloseAll     = "close_all"
	opList         = "list"
	opAttachment   = "attachment"
	opAutoResponse = "auto_response"
	opReader       = "reader"
	opWriter       = "writer"
	opPinger       = "pinger"
)

// readerStage is how far a socket's reader got in ending it (end).
type readerStage uint8

const (
	stageReading readerStage = iota
	stageEnding              // end began: the reader's count is done
	stageFreed               // end freed the slot
)

// failure is one panic recovered at a boundary of a's room.
type failure struct {
	actor ownership.Actor
	op    string
	panic any
	stack []byte // the panic's: taken in the function that recovered it
}

// fault is a point where a test injects a failure of a's room at op
// (Config.faults).
func (o *Owner) fault(a ownership.Actor, op string) {
	if o.faults != nil {
		o.faults(a, op)
	}
}

// contain is the boundary of operation op for a (deferred): a panic in it
// is a failure of a's room, and the operation returns ErrInternal in err
// (nil: it returns no error).
func (o *Owner) contain(a ownership.Actor, op string, err *error) {
	if p := recover(); p != nil {
		e := o.recovered(a, op, p)
		if err != nil {
			*err = e
		}
	}
}

// recovered contains p, recovered while op acted for a, and returns the
// operation's error. Its caller is the deferred function that recovered
// p, so that the stack is the panic's.
func (o *Owner) recovered(a ownership.Actor, op string, p any) error {
	o.roomFailed(o.rooms.find(a), failure{actor: a, op: op, panic: p, stack: debug.Stack()}, nil)
	return fmt.Errorf("socket owner of %s failed in %s: %w", a, op, ErrInternal)
}

// containSocket is the boundary of what op does for socket s on a
// goroutine serving many (deferred): a panic is a failure of s's room.
func (o *Owner) containSocket(s *socket, op string) {
	if p := recover(); p != nil {
		o.roomFailed(s.room, failure{actor: s.actor, op: op, panic: p, stack: debug.Stack()}, nil)
	}
}

// readerFailure is the read error of a panic recovered on a socket's
// reader goroutine while it read a message (socket.receive) or scanned
// the bytes read (frameScan.scan): the reader's room fails once the error
// reaches it (socket.finish).
type readerFailure struct{ failure }

func (e *readerFailure) Error() string {
	return fmt.Sprintf("reader failed: %v", e.panic)
}

// readerFailed turns a panic of the reader's code into its read error
// (deferred).
func readerFailed(err *error) {
	if p := recover(); p != nil {
		*err = &readerFailure{failure{op: opReader, panic: p, stack: debug.Stack()}}
	}
}

// readPanicked is the boundary of the socket's end on its reader
// goroutine (deferred in finish): a panic is a failure of its room, and
// what is left of the end is done here.
func (s *socket) readPanicked() {
	if p := recover(); p != nil {
		s.o.roomFailed(s.room, failure{actor: s.actor, op: opReader, panic: p, stack: debug.Stack()}, s)
	}
}

// writeEnded ends a writer goroutine (deferred in write), and is its
// boundary: a writer that panicked is forgotten by its socket (and, since
// it may have stopped inside a frame, nothing more is written directly),
// and its room fails.
func (s *socket) writeEnded() {
	if p := recover(); p != nil {
		f := failure{actor: s.actor, op: opWriter, panic: p, stack: debug.Stack()}
		protect(func() {
			if s.wc != nil {
				s.wc.markBroken()
			}
			s.mu.Lock()
			s.writing = false
			s.mu.Unlock()
		})
		s.o.roomFailed(s.room, f, nil)
		s.o.stoppedWriting()
	}
	s.o.wg.Done()
}

// roomFailed contains failure f of room r (nil: a has no room, and
// nothing is closed): see the top of this file. reader, if set, is the
// socket of r whose reader failed, ended last, on its goroutine.
func (o *Owner) roomFailed(r *actorSockets, f failure, reader *socket) {
	if reader != nil {
		defer o.endReader(reader)
	}
	if r != nil {
		if !r.failing.CompareAndSwap(false, true) {
			protect(func() {
				o.log.Warn("socket owner of an actor: a panic while its failure is handled",
					slog.String("class", f.actor.Class), slog.String("name", f.actor.Name), slog.String("op", f.op),
					slog.String("panic", fmt.Sprint(f.panic)))
			})
			return
		}
		defer r.failing.Store(false) // before the reader's end
	}
	protect(func() {
		o.m.failures.WithLabelValues(f.op).Inc()
		o.log.Error("socket owner of an actor failed: its sockets close with 1011",
			slog.String("class", f.actor.Class), slog.String("name", f.actor.Name), slog.String("op", f.op),
			slog.String("panic", fmt.Sprint(f.panic)), slog.String("stack", string(f.stack)))
	})
	if h := o.cfg.Failed; h != nil {
		protect(func() { h(f.actor, f.op) })
	}
	var list []*socket
	if r != nil {
		protect(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.dead {
				return
			}
			for _, p := range r.pending {
				p.failed = true
			}
			list = r.socketsLocked(nil)
		})
	}
	closed := 0
	if p := protect(func() {
		for _, s := range list {
			if s != reader {
				s.fail(ErrInternal)
			}
			closed++
		}
	}); p != nil {
		protect(func() {
			o.log.Error("socket owner of an actor failed closing its sockets: the rest are dropped without a close frame",
				slog.String("class", f.actor.Class), slog.String("name", f.actor.Name),
				slog.String("panic", fmt.Sprint(p)), slog.Int("sockets", len(list)-closed))
		})
		for _, s := range list[closed:] {
			if s != reader {
				protect(func() { _ = s.conn.NetConn().Close() })
			}
		}
	}
}

// endReader ends socket s, whose reader goroutine failed, on that
// goroutine: as its reader would have (end), telling the client 1011; or,
// if end had begun or fails too, by what is left of it: the slot freed,
// the connection closed.
func (o *Owner) endReader(s *socket) {
	if s.stage == stageReading && protect(func() { s.end(ErrInternal) }) == nil {
		return
	}
	if s.stage != stageFreed {
		s.stage = stageFreed
		protect(func() { o.free(s) })
	}
	protect(func() { _ = s.conn.NetConn().Close() })
}

// protect runs f and returns its panic, recovered, or nil.
func protect(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
