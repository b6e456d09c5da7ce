package actorhost

import (
	"errors"
	"log/slog"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// socketOp is one queued send, broadcast or close.
type socketOp struct {
	kind   uint8 // opSend, opBroadcast, opClose
	id     sockets.ID
	tag    string
	text   bool
	data   []byte
	code   int
	reason string
}

const (
	opSend uint8 = iota + 1
	opBroadcast
	opClose
)

// eventSockets is the Sockets of one event: reads go to the owner, sends
// and closes wait in out until the event's output is released.
type eventSockets struct {
	owner *sockets.Owner
	actor ownership.Actor
	out   []socketOp
}

func (s *eventSockets) Send(id actors.SocketID, text bool, data []byte) {
	s.out = append(s.out, socketOp{kind: opSend, id: sockets.ID(id), text: text, data: append([]byte(nil), data...)})
}

func (s *eventSockets) Broadcast(tag string, text bool, data []byte) {
	s.out = append(s.out, socketOp{kind: opBroadcast, tag: tag, text: text, data: append([]byte(nil), data...)})
}

func (s *eventSockets) Close(id actors.SocketID, code int, reason string) {
	s.out = append(s.out, socketOp{kind: opClose, id: sockets.ID(id), code: code, reason: reason})
}

func (s *eventSockets) List(tag string) []actors.SocketInfo {
	list := s.owner.List(s.actor, tag)
	out := make([]actors.SocketInfo, len(list))
	for i, si := range list {
		out[i] = actors.SocketInfo{ID: actors.SocketID(si.ID), Tags: si.Tags, Attachment: si.Attachment, URL: si.URL}
	}
	return out
}

func (s *eventSockets) SetAttachment(id actors.SocketID, data []byte) error {
	return s.owner.SetAttachment(s.actor, sockets.ID(id), data)
}

func (s *eventSockets) Attachment(id actors.SocketID) ([]byte, error) {
	return s.owner.Attachment(s.actor, sockets.ID(id))
}

func (s *eventSockets) SetAutoResponse(request, response string) error {
	return s.owner.SetAutoResponse(s.actor, sockets.AutoResponse{Request: request, Response: response})
}

func (s *eventSockets) LastAutoResponse(id actors.SocketID) (time.Time, error) {
	return s.owner.LastAutoResponse(s.actor, sockets.ID(id))
}

// flushSockets carries out the queued operations: the event's output is
// released. A socket that closed meanwhile is passed over. What the owner
// refuses as invalid is logged; a close it refuses (a code or reason that
// cannot be sent) closes the socket with 1011 instead.
func flushSockets(owner *sockets.Owner, a ownership.Actor, ops []socketOp, log func() *slog.Logger) {
	for _, op := range ops {
		var err error
		switch op.kind {
		case opSend:
			err = owner.Send(a, op.id, op.text, op.data)
		case opBroadcast:
			_, err = owner.Broadcast(a, op.tag, op.text, op.data)
		case opClose:
			if err = owner.Close(a, op.id, op.code, op.reason); errors.Is(err, sockets.ErrInvalid) {
				log().Warn("socket closed with 1011: the actor's close code or reason cannot be sent",
					slog.Any("socket", op.id), slog.Int("code", op.code), slog.Any("err", err))
				_ = owner.Close(a, op.id, 1011, "")
				continue
			}
		}
		if errors.Is(err, sockets.ErrInvalid) {
			log().Warn("socket message not sent: the node cannot send it", slog.Any("socket", op.id), slog.Any("err", err))
		}
	}
}
