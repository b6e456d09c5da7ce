package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// Errors of Instance.Handle, for callers that branch on them. Each event
// error means the wasm instance was discarded.
var (
	// ErrTimeout: the guest ran past Config.EventTimeout and was stopped.
	ErrTimeout = errors.New("guest ran past its event timeout")
	// ErrGuest: the guest trapped, exited, panicked without recovering,
	// broke the ABI or reported failure.
	ErrGuest = errors.New("guest failed")
	// ErrClosed: the wasm instance was closed.
	ErrClosed = errors.New("wasm instance closed")
)

// Instance runs the events of one actor on a wasm instance of a Module,
// kept between events while the actor is resident. It implements
// actors.Resident. It starts the wasm instance at the first event, and again
// after one was discarded.
//
// An Instance is not safe for concurrent use: call it from one goroutine
// at a time, as an actor's events are (a wasm instance must never run two
// calls at once).
type Instance struct {
	m      *Module
	mod    api.Module                // nil: no wasm instance started
	mem    experimental.LinearMemory // mod's memory, if the host allocated it
	handle api.Function              // wasmkeep_on_request of mod
	socket api.Function              // wasmkeep_on_socket of mod, if exported
	closed bool
	log    *slog.Logger
}

// NewInstance returns an Instance of m with no wasm instance yet: it is
// started by the first event. log, if not nil, replaces the module's
// logger (for example to name the actor).
func (m *Module) NewInstance(log *slog.Logger) *Instance {
	if log == nil {
		log = m.log
	}
	return &Instance{m: m, log: log}
}

// Started reports whether a wasm instance is started (and not discarded
// since).
func (in *Instance) Started() bool { return in.mod != nil }

// Handle runs req on the guest with st as the actor's storage, and
// returns the guest's response. It implements the actors.Class contract
// for one actor.
//
// A guest that accepted the WebSocket upgrade (ws_accept) gets
// actors.AcceptSocket with its tags as its response, whatever it handed
// out with response_write. A module without wasmkeep_on_request, or a
// guest that registered no handler, answers 501 Not Implemented. Any error
// (the guest trapped, panicked, ran out of memory or time, or broke the
// ABI) discards the wasm instance, so that the next event starts a fresh
// one; the error wraps ErrTimeout, ErrGuest or ErrClosed, and the caller
// turns it into a 500.
func (in *Instance) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if in.closed {
		return nil, ErrClosed
	}
	if !in.m.onRequest {
		return notImplemented(), nil
	}
	ev := &event{req: encodeRequest(req), request: true, st: st, ws: socketsOf(ctx), log: in.log}
	code, err := in.call(ctx, "request", false, ev)
	if err != nil {
		return nil, err
	}
	if code == wire.NotHandled {
		return notImplemented(), nil
	}
	if ev.accepted {
		return actors.AcceptSocket(ev.accept...), nil
	}
	if !ev.responded {
		return nil, in.fail(ctx, ctx, "request", errors.New("returned without a response"))
	}
	resp, err := decodeResponse(ev.resp)
	if err != nil {
		return nil, in.fail(ctx, ctx, "request", err)
	}
	return resp, nil
}

// HandleSocket runs a socket event on the guest's wasmkeep_on_socket,
// with st as the actor's storage. It implements actors.SocketClass. A
// module without the export, or a guest that registered no socket
// handler, drops the event (nil). Errors are as for Handle.
func (in *Instance) HandleSocket(ctx context.Context, sev *actors.SocketEvent, st actors.Storage) error {
	if in.closed {
		return ErrClosed
	}
	if !in.m.onSocket {
		return nil
	}
	ev := &event{sock: encodeSocketEvent(sev), st: st, ws: socketsOf(ctx), log: in.log}
	_, err := in.call(ctx, "socket event", true, ev)
	return err
}

// call runs the guest export wasmkeep_on_request, or wasmkeep_on_socket
// if socket, for ev, starting a wasm instance if none is
// started, and returns its code: wire.OK or wire.NotHandled. Any other
// code, and any error, discards the wasm instance and is returned as an
// error (what names the event in it).
func (in *Instance) call(ctx context.Context, what string, socket bool, ev *event) (int32, error) {
	cctx := ctx
	if r := in.m.r; !r.cfg.NoEventTimeout {
		var cancel context.CancelFunc
		cctx, cancel = context.WithCancel(ctx)
		r.watch.start(in, time.Now().Add(r.cfg.EventTimeout), cancel)
		defer func() {
			r.watch.stop(in)
			cancel()
		}()
	}
	if in.mod == nil {
		if err := in.start(cctx); err != nil {
			return 0, in.fail(ctx, cctx, "start", err)
		}
	}
	fn := in.handle
	if socket {
		fn = in.socket
	}
	res, err := fn.Call(context.WithValue(cctx, eventKey{}, ev))
	if err != nil {
		return 0, in.fail(ctx, cctx, what, err)
	}
	switch code := int32(res[0]); code {
	case wire.OK, wire.NotHandled:
		return code, nil
	default:
		return 0, in.fail(ctx, cctx, what, fmt.Errorf("returned code %d", code))
	}
}

// start takes a started wasm instance of the module (pool.go).
func (in *Instance) start(ctx context.Context) error {
	mod, mem, err := in.m.take(ctx)
	if err != nil {
		return err
	}
	in.mod, in.mem = mod, mem
	in.handle, in.socket = mod.ExportedFunction(exportOnRequest), mod.ExportedFunction(exportOnSocket)
	return nil
}

// fail discards the wasm instance after an error and says why. ctx is the
// caller's context, cctx the one bounded by the event timeout.
func (in *Instance) fail(ctx, cctx context.Context, what string, err error) error {
	in.discard(context.WithoutCancel(ctx))
	kind := ErrGuest
	if cctx.Err() != nil && ctx.Err() == nil {
		kind = ErrTimeout
	}
	in.log.Warn("wasm instance discarded", slog.String("during", what), slog.Any("err", err))
	return fmt.Errorf("%w: %s: %w", kind, what, err)
}

func (in *Instance) discard(ctx context.Context) {
	if in.mod != nil {
		closeModule(ctx, in.mod, in.mem)
		in.mod, in.mem, in.handle, in.socket = nil, nil, nil, nil
	}
}

// Close discards the wasm instance, if any; Handle fails after it. It
// implements actors.Resident.
func (in *Instance) Close() {
	in.closed = true
	in.discard(context.Background())
}

func notImplemented() *actors.Response {
	return actors.Text(http.StatusNotImplemented, "class does not handle requests\n")
}

// NewResident returns the Instance that serves the events of actor a while
// it is resident. It implements actors.ResidentClass, so that a Module
// registered as a class gets one wasm instance per resident actor.
func (m *Module) NewResident(a ownership.Actor) actors.Resident {
	return m.NewInstance(m.log.With(slog.String("name", a.Name)))
}

// Handle runs one event on a wasm instance started for it alone and
// discarded after it. It makes a Module an actors.Class; Host does not call
// it, since it calls NewResident and keeps the wasm instance for the actor's
// residency (a fresh wasm instance per event costs a few milliseconds).
func (m *Module) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	in := m.NewInstance(nil)
	defer in.Close()
	return in.Handle(ctx, req, st)
}

// A Module is a class whose actors each get their own wasm instance, and
// an Instance takes socket events.
var (
	_ actors.ResidentClass = (*Module)(nil)
	_ actors.SocketClass   = (*Instance)(nil)
)
