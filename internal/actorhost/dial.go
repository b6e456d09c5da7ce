package actorhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/sockets"
)

// Outbound sockets (actors.DialSocket). The socket belongs to the node's
// socket owner, in its actor's room, as an accepted socket does; what the
// runtime adds is the actor's record of it (actorstore.DialRecord), so
// that its close reaches the actor exactly once, wherever the actor is:
//
//   - The record is written, and committed, once the socket is open and
//     before DialSocket returns; the close or error event of a dialed
//     socket deletes it, and is dropped if it finds none (it was told
//     already).
//   - When the actor's state loads (it wakes, here or elsewhere), its
//     first event reads its records: each whose socket is not open in this
//     node's socket owner names a socket that closed while the actor was
//     away (a drain, a move, a lost lease, a node that ended): its close
//     event is delivered then, with code 1006 and the URL and tags it was
//     dialed with.

// SocketChecker is what DialSocket asks of the node's egress before
// anything is committed: whether a socket may be dialed to the URL at all
// (package egress; the dial checks the address again).
type SocketChecker interface {
	CheckSocket(rawURL string) error
}

// dialGonePatience is how long the close event of a socket found gone is
// tried again while its actor is refused for a reason that may pass.
const dialGonePatience = 30 * time.Second

// dialGoneCode is the close code of a socket found gone at a wake: its
// close was not seen where the actor was.
const dialGoneCode = 1006

// dial opens an outbound socket from the event.
func (ec *eventCall) dial(ctx context.Context, owner *sockets.Owner, d *actors.SocketDial) (actors.SocketID, error) {
	ra := ec.ra
	if owner == nil {
		return 0, actors.ErrNoSockets
	}
	check, _ := ra.h.cfg.Fetcher.(SocketChecker)
	if check == nil {
		return 0, fmt.Errorf("%w: this node opens no outbound sockets", actors.ErrFetchRefused)
	}
	if err := check.CheckSocket(d.URL); err != nil {
		return 0, err
	}
	if err := sockets.CheckTags(d.Tags); err != nil {
		return 0, fmt.Errorf("%w: %w", actors.ErrBadFetch, err)
	}
	dials, err := ec.t.Dials()
	if err != nil {
		return 0, err
	}
	if len(dials) >= actors.MaxDialed {
		return 0, fmt.Errorf("%w: the actor has %d outbound sockets open, the most it may have", actors.ErrLimit, len(dials))
	}
	if err := ec.commitPoint(); err != nil {
		return 0, err
	}
	ec.earlier = true // dialed: the service may act on the connection
	ec.m.stage.Store(stageCalled)
	id, err := owner.Dial(ctx, ra.actor, sockets.DialRequest{URL: d.URL, Header: d.Header, Tags: d.Tags})
	if err != nil {
		return 0, dialError(ra.h, ra.actor, err)
	}
	rec := actorstore.DialRecord{Stamp: owner.Stamp(), ID: uint64(id), URL: d.URL, Tags: slices.Clone(d.Tags)}
	if err := ec.t.PutDial(rec); err != nil {
		_ = owner.Close(ra.actor, id, 1011, "")
		return 0, err
	}
	// The record is durable before the actor can name the socket: its
	// close then reaches the actor wherever it is.
	if err := ec.commitPoint(); err != nil {
		_ = owner.Close(ra.actor, id, 1011, "")
		return 0, err
	}
	return actors.SocketID(id), nil
}

// dialError is the class's error for a dial the socket owner failed.
func dialError(h *Host, a ownership.Actor, err error) error {
	switch {
	case errors.Is(err, actors.ErrFetchRefused):
		return err
	case errors.Is(err, sockets.ErrInvalid):
		return fmt.Errorf("%w: %w", actors.ErrBadFetch, err)
	case errors.Is(err, sockets.ErrTooManySockets), errors.Is(err, sockets.ErrShutDown):
		return h.unavailable(a, err.Error())
	case errors.Is(err, sockets.ErrNoDial):
		return fmt.Errorf("%w: %w", actors.ErrFetchRefused, err)
	}
	return fmt.Errorf("%w: %w", actors.ErrFetchFailed, err)
}

// dialEnded prepares the close or error event ev of a dialed socket for
// the class: it deletes the socket's record, and gives the event the URL
// and tags the record kept. It reports false when there is no record: the
// actor was told of the close already (the event is dropped). stamp is
// the socket owner the socket was open in.
func dialEnded(t *actorstore.Txn, stamp uint64, ev *actors.SocketEvent) (*actors.SocketEvent, bool, error) {
	rec, ok, err := t.Dial(stamp, uint64(ev.Socket))
	if err != nil || !ok {
		return nil, false, err
	}
	t.DeleteDial(stamp, uint64(ev.Socket))
	out := *ev
	out.URL, out.Tags = rec.URL, rec.Tags
	return &out, true, nil
}

// dialsGone finds, in the first event after the actor's state loaded
// (through that event's reads, as the class's own would: a record in a run
// may need the bucket), the outbound sockets its records name that are not
// open in this node's socket owner, and delivers each one's close event,
// after the events waiting for the load. A read that fails tries again at
// the next event.
func (ra *residentActor) dialsGone(t *actorstore.Txn) {
	owner := ra.h.sockets
	if owner == nil {
		return
	}
	dials, err := t.Dials()
	if err != nil || t.Fault() != nil {
		ra.dialCheck = true
		ra.log().Warn("outbound socket records not read; read again at the next event", slog.Any("err", errors.Join(err, t.Fault())))
		return
	}
	for _, d := range dials {
		if d.Stamp == owner.Stamp() && owner.Holds(ra.actor, sockets.ID(d.ID)) {
			continue // open here, or closing: its own close event is on its way
		}
		go ra.h.deliverDialGone(ra.actor, d)
	}
}

// deliverDialGone delivers the close event of the outbound socket d of a,
// found gone when a woke, with the patience of any socket event.
func (h *Host) deliverDialGone(a ownership.Actor, d actorstore.DialRecord) {
	ev := &actors.SocketEvent{Kind: actors.SocketClose, Socket: actors.SocketID(d.ID), Code: dialGoneCode,
		Reason: "the connection ended while its actor was away from its node"}
	ctx := context.Background()
	at, err := h.dispatch(ctx, a, dialGonePatience, func(gen ownership.Generation, state *ownership.Sealed) error {
		return h.run(ctx, &eventMsg{ctx: ctx, actor: a, gen: gen, sealed: state, sock: ev, dialStamp: d.Stamp}).err
	})
	switch {
	case at != nil:
		// Held elsewhere now: its next wake there tells it.
	case err != nil:
		h.log.Warn("close event of an outbound socket not delivered; the actor's next wake tries again",
			slog.String("class", a.Class), slog.String("name", a.Name), slog.Any("socket", d.ID), slog.Any("err", err))
	}
}
