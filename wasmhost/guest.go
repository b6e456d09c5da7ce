package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// Errors of Guest.Handle and of the Residents of a class in class
// isolation, for callers that branch on them. ErrTimeout and ErrGuest mean
// the guest was discarded.
var (
	// ErrTimeout: the guest ran past Config.EventTimeout and was stopped.
	ErrTimeout = errors.New("guest ran past its event timeout")
	// ErrGuest: the guest trapped, exited, panicked without recovering
	// or broke the ABI.
	ErrGuest = errors.New("guest failed")
	// ErrHandler: the guest's handler reported that it could not serve
	// the event (its export returned 1: a C handler that returned NULL, a
	// Go guest's handler that returned nil). The event fails (500, its
	// writes discarded); the guest returned in order and is kept.
	ErrHandler = errors.New("the guest's handler reported a failure (returned 1)")
	// ErrClosed: the guest (or the class's module) was closed.
	ErrClosed = errors.New("guest closed")
	// ErrWait: the event's context ended while it waited for the shared
	// guest its actor is placed on (class isolation); the event did not
	// run, and nothing was discarded.
	ErrWait = errors.New("event gave up waiting for its shared guest")
)

// wasm is one started guest of a Module, and the guest exports the host
// calls on it. It must never run two calls at once. wazero gives each
// export looked up a call stack of its own (10 KiB, zeroed): the exports
// but wasmkeep_on_request are looked up at their first call, and
// wasmkeep_on_leave is never called in isolation actor.
type wasm struct {
	mod     api.Module
	mem     experimental.LinearMemory // mod's memory, if the host allocated it
	out     *guestOut                 // what the guest writes to stdout and stderr
	request api.Function              // wasmkeep_on_request, if exported
	socket  api.Function              // wasmkeep_on_socket, once looked up
	alarm   api.Function              // wasmkeep_on_alarm, once looked up
	leave   api.Function              // wasmkeep_on_leave, once looked up
	stack   [1]uint64                 // a call's argument, then its result
}

// export returns the export name of w, looked up into *fn at its first
// use; nil if the module does not export it.
func (w *wasm) export(fn *api.Function, name string) api.Function {
	if *fn == nil {
		*fn = w.mod.ExportedFunction(name)
	}
	return *fn
}

// startWasm starts a guest of m: taken from the pool of started ones
// (pool.go) if pooled, else started now.
func (m *Module) startWasm(ctx context.Context, pooled bool) (*wasm, error) {
	var st started
	var err error
	if pooled {
		st, err = m.take(ctx)
	} else {
		st, err = m.start(ctx)
	}
	if err != nil {
		return nil, err
	}
	return &wasm{mod: st.mod, mem: st.mem, out: st.out, request: st.mod.ExportedFunction(exportOnRequest)}, nil
}

func (w *wasm) close(ctx context.Context) { closeModule(ctx, w.mod, w.mem) }

// call calls fn, an export of w, for ev (its context too, see bound),
// with the event's actor id as its argument, and returns the guest's code.
func (w *wasm) call(fn api.Function, ev *event) (int32, error) {
	w.stack[0] = ev.actor.id
	if err := fn.CallWithStack(ev, w.stack[:]); err != nil {
		return 0, err
	}
	return int32(w.stack[0]), nil
}

// eventKind says which export an event calls.
type eventKind uint8

const (
	requestEvent eventKind = iota // wasmkeep_on_request
	socketEvent                   // wasmkeep_on_socket
	alarmEvent                    // wasmkeep_on_alarm
)

// exec runs ev on w (the export of its kind) and checks what the guest
// handed out. It returns wire.OK or wire.NotHandled; an error means the
// guest must be discarded.
func (w *wasm) exec(kind eventKind, ev *event) (int32, error) {
	fn := w.request
	switch kind {
	case socketEvent:
		fn = w.export(&w.socket, exportOnSocket)
	case alarmEvent:
		fn = w.export(&w.alarm, exportOnAlarm)
	}
	code, err := w.call(fn, ev)
	if err != nil {
		return 0, err
	}
	switch code {
	case wire.OK, wire.NotHandled:
		return code, ev.settle(code)
	case wire.Failed:
		return code, nil // the event fails; the guest is kept (ErrHandler)
	default:
		return 0, fmt.Errorf("returned code %d, which the ABI does not define (0 served, 1 failed, 2 not handled)", code)
	}
}

// settle checks what the guest handed out in a request event that
// returned code, and decodes its response. An error is an ABI violation.
func (ev *event) settle(code int32) error {
	if !ev.request || code == wire.NotHandled || ev.accepted {
		return nil
	}
	if !ev.responded {
		return errors.New("returned without a response")
	}
	resp, err := decodeResponse(ev.resp)
	if err != nil {
		return err
	}
	ev.response = resp
	return nil
}

// bound makes ev the context of its call: ctx, the caller's, bounded by
// the event timeout from now on. Pass ev to unbound when the call is over.
func (r *Runtime) bound(ctx context.Context, ev *event) context.Context {
	ev.parent = ctx
	if !r.cfg.NoEventTimeout {
		r.watch.start(ev, time.Now().Add(r.cfg.EventTimeout))
	}
	return ev
}

// unbound ends the bound of ev's call.
func (r *Runtime) unbound(ev *event) {
	if !r.cfg.NoEventTimeout {
		r.watch.stop(ev)
	}
	ev.release()
}

// eventError is the error of an event whose guest call failed with err:
// ErrTimeout if the bound (cctx) ended it while the caller (ctx) still
// waited, else ErrGuest.
func eventError(ctx, cctx context.Context, what string, err error) error {
	kind := ErrGuest
	if cctx.Err() != nil && ctx.Err() == nil {
		kind = ErrTimeout
	}
	return fmt.Errorf("%w: %s: %w", kind, what, err)
}

// runner runs an event on the guest that serves its actor.
type runner interface {
	run(ctx context.Context, what string, kind eventKind, ev *event) (int32, error)
}

// handleOn runs req, an event of the actor ref, on the guest that run
// serves it on; see Guest.Handle.
func (m *Module) handleOn(ctx context.Context, run runner, ref *actorRef, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if !m.onRequest {
		return notImplemented(), nil
	}
	ev := &event{actor: ref, minor: m.minor, req: encodeRequest(req), request: true, st: st, ws: socketsOf(ctx)}
	code, err := run.run(ctx, "request", requestEvent, ev)
	if err != nil {
		return nil, err
	}
	if code == wire.Failed {
		return nil, fmt.Errorf("%w: request", ErrHandler)
	}
	resp := ev.response
	switch {
	case code == wire.NotHandled:
		resp = notImplemented()
	case ev.accepted:
		resp = actors.AcceptSocket(ev.accept...)
	}
	if ev.rollback {
		// actors answers resp and discards the writes and output (and
		// fails the event if resp accepts the WebSocket).
		return nil, actors.Rollback(resp)
	}
	return resp, nil
}

// handleSocketOn runs a socket event of the actor ref on the guest
// that run serves it on; see Guest.HandleSocket.
func (m *Module) handleSocketOn(ctx context.Context, run runner, ref *actorRef, sev *actors.SocketEvent, st actors.Storage) error {
	if !m.onSocket {
		return nil
	}
	ev := &event{actor: ref, minor: m.minor, sock: encodeSocketEvent(sev, m.minor), st: st, ws: socketsOf(ctx)}
	code, err := run.run(ctx, "socket event", socketEvent, ev)
	if err != nil {
		return err
	}
	if code == wire.Failed {
		return fmt.Errorf("%w: socket event", ErrHandler)
	}
	if ev.rollback {
		return actors.Rollback(nil)
	}
	return nil
}

// handleAlarmOn runs an alarm event of the actor ref on the guest that
// run serves it on; see Guest.HandleAlarm.
func (m *Module) handleAlarmOn(ctx context.Context, run runner, ref *actorRef, a actors.Alarm, st actors.Storage) error {
	if !m.onAlarm {
		return actors.ErrAlarmsNotHandled
	}
	ev := &event{actor: ref, minor: m.minor, alarm: encodeAlarm(a), st: st, ws: socketsOf(ctx)}
	code, err := run.run(ctx, "alarm", alarmEvent, ev)
	if err != nil {
		return err
	}
	switch {
	case code == wire.Failed:
		return fmt.Errorf("%w: alarm", ErrHandler)
	case code == wire.NotHandled:
		return actors.ErrAlarmsNotHandled
	case ev.rollback:
		return actors.Rollback(nil)
	}
	return nil
}

// A Guest is the guest of one actor alone (isolation actor): its Module,
// started at the actor's first event and kept between events while the
// actor is resident, and started again after a failure discarded it. It
// implements actors.Resident.
//
// A Guest is not safe for concurrent use: call it from one goroutine
// at a time, as an actor's events are (a guest must never run two
// calls at once).
type Guest struct {
	m      *Module
	w      *wasm // nil: no guest started
	ref    *actorRef
	closed bool
}

// NewGuest returns a Guest of m, not started yet: its first event starts
// it. log, if not nil, replaces the module's logger (for example to name
// the actor). Whatever the module declares, the Guest serves one actor
// alone; its events name an actor of the class with an empty name.
func (m *Module) NewGuest(log *slog.Logger) *Guest {
	if log == nil {
		log = m.log
	}
	return &Guest{m: m, ref: m.r.newActorRef(m.class, "", log, false)}
}

// Started reports whether the Guest is started (and not discarded since).
func (g *Guest) Started() bool { return g.w != nil }

// Handle runs req on the guest with st as the actor's storage, and
// returns the guest's response. It implements the actors.Class contract
// for one actor.
//
// A guest that accepted the WebSocket upgrade (ws_accept) gets
// actors.AcceptSocket with its tags as its response, whatever it handed
// out with response_write. A module without wasmkeep_on_request, or a
// guest that registered no handler, answers 501 Not Implemented. An event
// whose guest called event_rollback returns actors.Rollback of the
// guest's response as its error, and keeps the guest: actors answers that
// response and discards the event's writes and socket output. A handler
// that reports failure (ErrHandler) fails the event and keeps the guest.
// Any other error (the guest trapped, panicked, ran out of memory or time,
// or broke the ABI) discards the guest, so that the next event starts a
// fresh one; the error wraps ErrTimeout, ErrGuest or ErrClosed, and the
// caller turns it into a 500.
func (g *Guest) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if g.closed {
		return nil, ErrClosed
	}
	return g.m.handleOn(ctx, g, g.ref, req, st)
}

// HandleSocket runs a socket event on the guest's wasmkeep_on_socket,
// with st as the actor's storage. It implements actors.SocketHandler. A
// module without the export, or a guest that registered no socket
// handler, drops the event (nil). An event whose guest called
// event_rollback returns actors.Rollback(nil), and keeps the guest.
// Errors are as for Handle.
func (g *Guest) HandleSocket(ctx context.Context, sev *actors.SocketEvent, st actors.Storage) error {
	if g.closed {
		return ErrClosed
	}
	return g.m.handleSocketOn(ctx, g, g.ref, sev, st)
}

// HandleAlarm runs an alarm event on the guest's wasmkeep_on_alarm, with
// st as the actor's storage. It implements actors.AlarmHandler. A module
// without the export, or a guest that registered no alarm handler,
// returns actors.ErrAlarmsNotHandled (the alarm is given up); a handler
// that reports failure returns ErrHandler (the alarm is retried). Other
// errors are as for Handle.
func (g *Guest) HandleAlarm(ctx context.Context, a actors.Alarm, st actors.Storage) error {
	if g.closed {
		return ErrClosed
	}
	return g.m.handleAlarmOn(ctx, g, g.ref, a, st)
}

// run implements runner: it runs ev on the Guest, starting it if it is
// not started, within the event timeout. Any error discards the guest and
// is returned (what names the event in it).
func (g *Guest) run(ctx context.Context, what string, kind eventKind, ev *event) (int32, error) {
	r := g.m.r
	cctx := r.bound(ctx, ev)
	defer r.unbound(ev)
	if g.w == nil {
		w, err := g.m.startWasm(cctx, true)
		if err != nil {
			return 0, g.fail(ctx, cctx, "start", err)
		}
		g.w = w
	}
	code, err := g.w.exec(kind, ev)
	if err != nil {
		return 0, g.fail(ctx, cctx, what, err)
	}
	g.m.logOut(g.w.out, g.ref)
	return code, nil
}

// fail discards the guest after an error, counts it and says why. ctx is
// the caller's context, cctx the one bounded by the event timeout.
func (g *Guest) fail(ctx, cctx context.Context, what string, err error) error {
	var out string
	if g.w != nil {
		out = g.w.out.take() // a panic's message, say
		err = g.m.atMemoryLimit(g.w, err, out)
	}
	g.discard(context.WithoutCancel(ctx))
	g.m.failed(0)
	g.ref.logger().Warn("guest discarded", failAttrs(what, err, out)...)
	return eventError(ctx, cctx, what, err)
}

// growStep is how much a guest may ask its memory to grow by at once: a
// failure within it of the limit is taken as the limit's.
const growStep = 4<<20 + pageSize

// atMemoryLimit adds to err, a failure of the guest w that wrote out
// last, that its linear memory had reached the limit, when it had: a guest that cannot grow dies
// of it (a Go guest with "out of memory", as a trap), and its user must
// learn which knob raises it.
func (m *Module) atMemoryLimit(w *wasm, err error, out string) error {
	mem := w.mod.Memory()
	if mem == nil {
		return err
	}
	// A guest asks for more than a page at a time (a Go guest's heap
	// grows by arenas of 4 MiB, and one large allocation asks for all it
	// needs): within that of the limit it was there, and a guest that
	// said it ran out of memory was too.
	limit := m.r.cfg.MemoryLimit / pageSize * pageSize
	if int64(mem.Size())+growStep <= limit && !strings.Contains(out, "out of memory") {
		return err
	}
	return fmt.Errorf("%w (its memory had reached the limit of %d MiB a guest may use: wasmkeep serve --wasm-memory sets it)", err, limit>>20)
}

// failAttrs are the attributes of a guest's failure in the log: what it
// was doing, the error, and what it wrote last (a Go guest's panic value
// and stack, for one), if anything.
func failAttrs(what string, err error, out string) []any {
	attrs := []any{slog.String("during", what), slog.Any("err", err)}
	if out != "" {
		attrs = append(attrs, slog.String("output", out))
	}
	return attrs
}

func (g *Guest) discard(ctx context.Context) {
	if g.w != nil {
		g.w.close(ctx)
		g.w = nil
	}
}

// Close discards the guest, if started; Handle fails after it. It
// implements actors.Resident.
func (g *Guest) Close() {
	g.closed = true
	g.discard(context.Background())
}

func notImplemented() *actors.Response {
	return actors.Text(http.StatusNotImplemented, "class does not handle requests\n")
}

// NewResident returns the Resident that serves the events of actor a
// while it is resident. It implements actors.ResidentClass: in isolation
// actor it is a Guest of its own; in isolation class, a member of the
// class's shared guests (shared.go).
func (m *Module) NewResident(a ownership.Actor) actors.Resident {
	if m.isolation == IsolationClass {
		return m.shared.newMember(a)
	}
	return &Guest{m: m, ref: m.r.newActorRef(m.class, a.Name, m.log, true)}
}

// Handle runs one event on a guest started for it alone and discarded after
// it. It makes a Module an actors.Class; Host does not call it, since it
// calls NewResident and keeps the actor's place for its residency (a fresh
// guest per event costs a few milliseconds).
func (m *Module) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	g := m.NewGuest(nil)
	defer g.Close()
	return g.Handle(ctx, req, st)
}

// A Module is a class whose actors each get a Resident, and Residents take
// socket events.
var (
	_ actors.ResidentClass = (*Module)(nil)
	_ actors.SocketHandler = (*Guest)(nil)
	_ actors.SocketHandler = (*member)(nil)
)
