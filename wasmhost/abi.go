package wasmhost

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// The host side of the guest ABI (ABI.md): the functions of the host
// module "wasmkeep". The ABI is a pull model: the host never allocates in
// guest memory; it tells the guest how many bytes to expect, and the
// guest passes a buffer of its own to be filled.

// abiModule is the name guests import the host functions from.
const abiModule = "wasmkeep"

// event is the host's state for the event a guest call is serving. It is
// the call's context too (so that one host module serves every guest):
// the caller's context, with the event for the host functions (Value) and
// the stop of the event timeout (Err, Done), which costs an event no
// context of its own. Invariant: but for the stop, an event is touched only
// by the goroutine that calls the guest, while the call runs.
type event struct {
	parent  context.Context // the caller's
	stopped atomic.Bool     // the event timeout stopped the call
	mu      sync.Mutex      // guards done and unwatch
	done    chan struct{}   // made by the first Done
	unwatch func() bool     // ends the watch of parent's Done, if any

	actor     *actorRef // the actor the event is for
	minor     uint32    // the ABI minor version of the guest's module: its encodings
	leave     bool      // the actor left memory: a call of wasmkeep_on_leave
	req       []byte    // encoded request; nil in a socket event
	resp      []byte    // encoded response, once the guest handed it out
	responded bool
	response  *actors.Response // resp decoded, once the call returned
	rollback  bool             // event_rollback: discard the event's writes and output
	st        actors.Storage
	value     []byte // value of the last storage_get_len, for storage_get_read
	list      []byte // encoded result of the last storage_list_len, for storage_list_read
	many      []byte // encoded values of the last storage_get_many_len, for storage_get_many_read
	sql       []byte // encoded result of the last sql_exec_len, for sql_exec_read

	// WebSockets (sockets.go).
	request  bool           // a request event (else a socket event)
	sock     []byte         // encoded socket event; nil in a request event
	accept   []string       // tags of ws_accept, if accepted is set
	accepted bool           // ws_accept marked the response as accepting the upgrade
	ws       actors.Sockets // the actor's sockets, from the event's context
	wsList   []byte         // encoded result of the last ws_list_len, for ws_list_read
	att      []byte         // attachment found by the last ws_attachment_len

	call []byte // encoded response of the last actor_call, for actor_call_read
	// fetched is the encoded response of the last http_fetch, for
	// http_fetch_read.
	fetched []byte
	// secret is the value of the last secret_len, for secret_read.
	secret []byte
	// alarm is the encoded alarm of an alarm event (alarm_event_read);
	// alarms the encoded list of the last alarm_list_len.
	alarm, alarms []byte
}

type eventKey struct{}

// errStopped is the Err of an event's context once its time is up.
var errStopped = errors.New("event timeout")

// Deadline implements context.Context.
func (ev *event) Deadline() (time.Time, bool) { return ev.parent.Deadline() }

// Value implements context.Context: the event, for the host functions.
func (ev *event) Value(key any) any {
	if _, ok := key.(eventKey); ok {
		return ev
	}
	return ev.parent.Value(key)
}

// Err implements context.Context: errStopped once the event timeout
// stopped the call, else the caller's context's Err. The meter's check
// calls it at every few thousand loop heads.
func (ev *event) Err() error {
	if ev.stopped.Load() {
		return errStopped
	}
	return ev.parent.Err()
}

// Done implements context.Context. Few events ask (an actor call does):
// the channel is made then, closed when the timeout stops the call or the
// caller's context is done.
func (ev *event) Done() <-chan struct{} {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.done == nil {
		ev.done = make(chan struct{})
		if ev.stopped.Load() {
			close(ev.done)
		} else if ev.parent.Done() != nil {
			ev.unwatch = context.AfterFunc(ev.parent, ev.closeDone)
		}
	}
	return ev.done
}

// closeDone closes the channel of Done, once.
func (ev *event) closeDone() {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	select {
	case <-ev.done:
	default:
		close(ev.done)
	}
}

// stop stops the call: its guest traps at its next meter check.
func (ev *event) stop() {
	ev.stopped.Store(true)
	ev.mu.Lock()
	made := ev.done != nil
	ev.mu.Unlock()
	if made {
		ev.closeDone()
	}
}

// release ends the watch of the caller's context that Done started.
func (ev *event) release() {
	ev.mu.Lock()
	unwatch := ev.unwatch
	ev.unwatch = nil
	ev.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
}

// logger is the log of the event's actor.
func (ev *event) logger() *slog.Logger { return ev.actor.logger() }

// actorRef is a resident actor as guests see it: the id its events carry
// (unique in the runtime: one per residency), and its class and name,
// encoded for event_actor_read. It is made once per residency and not
// changed after, but for its logger, made at its first use.
type actorRef struct {
	id    uint64
	enc   []byte // class string, name string
	name  string // "": the base logger names the actor already, or none
	base  *slog.Logger
	named atomic.Pointer[slog.Logger]
}

// newActorRef returns the reference of a new residency of the actor name
// of class, logging to base (with the actor's name added, if named).
func (r *Runtime) newActorRef(class, name string, base *slog.Logger, named bool) *actorRef {
	enc := make([]byte, 0, 8+len(class)+len(name))
	enc = wire.AppendString(wire.AppendString(enc, class), name)
	ref := &actorRef{id: r.ids.Add(1), enc: enc, base: base}
	if named {
		ref.name = name
	}
	return ref
}

// logger returns the actor's logger, made at its first use: most actors
// never log, and a logger per resident actor would cost them memory.
func (ref *actorRef) logger() *slog.Logger {
	if ref.name == "" {
		return ref.base
	}
	if l := ref.named.Load(); l != nil {
		return l
	}
	l := ref.base.With(slog.String("name", ref.name))
	ref.named.CompareAndSwap(nil, l)
	return ref.named.Load()
}

// errNoEvent fails a host call made outside an event (for example from a
// guest's initialisers).
var errNoEvent = errors.New("wasmkeep host function called outside an event")

// errOutOfRange fails a host call given memory outside the guest's.
var errOutOfRange = errors.New("wasmkeep host function given memory out of range")

// errLeave fails a host call that acts for an actor (its storage, its
// sockets, its calls) made while the guest is told that actor left memory.
var errLeave = errors.New("wasmkeep host function called in wasmkeep_on_leave, where only event_actor_len, event_actor_read and log may be")

// frameOf returns the event a host call serves, whatever its kind. A
// panic inside a host function fails the guest call with an error, which
// discards the guest, which broke the ABI.
func frameOf(ctx context.Context) *event {
	ev, ok := ctx.Value(eventKey{}).(*event)
	if !ok {
		panic(errNoEvent)
	}
	return ev
}

// eventOf returns the request or socket event a host call serves: the
// host functions that act for an actor take it from here, and so act for
// the event's actor alone, whatever the guest asks.
func eventOf(ctx context.Context) *event {
	ev := frameOf(ctx)
	if ev.leave {
		panic(errLeave)
	}
	return ev
}

// read returns a copy of n bytes of guest memory at ptr (Memory().Read
// aliases guest memory, which the guest may change or grow later).
func read(mod api.Module, ptr, n uint32) []byte {
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		panic(errOutOfRange)
	}
	return slices.Clone(b)
}

// write copies src into the guest buffer at ptr of capacity n and returns
// the number of bytes copied.
func write(mod api.Module, ptr, n uint32, src []byte) uint32 {
	if uint64(len(src)) < uint64(n) {
		n = uint32(len(src))
	}
	if !mod.Memory().Write(ptr, src[:n]) {
		panic(errOutOfRange)
	}
	return n
}

const i32 = api.ValueTypeI32

const i64 = api.ValueTypeI64

// hostFunc exports f as the host function name.
type hostFunc func(name string, f api.GoModuleFunc, params, results []api.ValueType)

func instantiateABI(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(abiModule)
	fn := func(name string, f api.GoModuleFunc, params, results []api.ValueType) {
		b.NewFunctionBuilder().WithGoModuleFunction(f, params, results).Export(name)
	}
	socketFunctions(fn)
	callFunctions(fn)
	fetchFunctions(fn)
	dialFunctions(fn)
	secretFunctions(fn)
	alarmFunctions(fn)
	meterFunction(fn)
	// abi_version() -> i32
	fn("abi_version", func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = api.EncodeU32(wire.Version)
	}, nil, []api.ValueType{i32})
	// event_actor_len() -> i32: the size of the encoded actor of the
	// event (its class and name).
	fn("event_actor_len", func(ctx context.Context, _ api.Module, stack []uint64) {
		stack[0] = api.EncodeU32(uint32(len(frameOf(ctx).actor.enc)))
	}, nil, []api.ValueType{i32})
	// event_actor_read(ptr, len) -> i32: copies the encoded actor into the
	// buffer.
	fn("event_actor_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := frameOf(ctx)
		stack[0] = api.EncodeU32(write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), ev.actor.enc))
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// request_len() -> i32: the size of the encoded request.
	fn("request_len", func(ctx context.Context, _ api.Module, stack []uint64) {
		stack[0] = api.EncodeU32(uint32(len(eventOf(ctx).req)))
	}, nil, []api.ValueType{i32})
	// request_read(ptr, len) -> i32: copies the request into the buffer.
	fn("request_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		stack[0] = api.EncodeU32(write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), ev.req))
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// response_write(ptr, len) -> i32: 0, or 1 if a response was already
	// handed out or the event is not a request.
	fn("response_write", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		if ev.responded || !ev.request {
			stack[0] = 1
			return
		}
		ev.resp = read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
		ev.responded = true
		stack[0] = 0
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	storageFunctions(fn)
	sqlFunctions(fn)
	// event_rollback(): the event's writes and socket output are to be
	// discarded, its response answered all the same.
	fn("event_rollback", func(ctx context.Context, _ api.Module, _ []uint64) {
		eventOf(ctx).rollback = true
	}, nil, nil)
	// log(level, msg, msg_len)
	fn("log", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := frameOf(ctx)
		msg := read(mod, api.DecodeU32(stack[1]), api.DecodeU32(stack[2]))
		ev.logger().Log(ctx, slog.Level(api.DecodeI32(stack[0])), string(msg), slog.Bool("guest", true))
	}, []api.ValueType{i32, i32, i32}, nil)
	_, err := b.Instantiate(ctx)
	return err
}

// encodeRequest lays req out as ABI.md describes: method, path, query,
// headers sorted by name, body.
func encodeRequest(req *actors.Request) []byte {
	query := req.Query.Encode()
	b := make([]byte, 0, 20+len(req.Method)+len(req.Path)+len(query)+headerSize(req.Header)+len(req.Body))
	b = wire.AppendString(b, req.Method)
	b = wire.AppendString(b, req.Path)
	b = wire.AppendString(b, query)
	b = appendHeader(b, req.Header)
	return wire.AppendBytes(b, req.Body)
}

// headerSize is how many bytes appendHeader adds for h.
func headerSize(h http.Header) int {
	n := 4
	for name, vs := range h {
		for _, v := range vs {
			n += 8 + len(name) + len(v)
		}
	}
	return n
}

// appendHeader lays h out as ABI.md's headers: a count of fields, then
// each field (name, value), sorted by name, one per value.
func appendHeader(b []byte, h http.Header) []byte {
	names := make([]string, 0, len(h))
	fields := 0
	for name, vs := range h {
		names = append(names, name)
		fields += len(vs)
	}
	slices.Sort(names)
	b = wire.AppendU32(b, uint32(fields))
	for _, name := range names {
		for _, v := range h[name] {
			b = wire.AppendString(b, name)
			b = wire.AppendString(b, v)
		}
	}
	return b
}

// errBadResponse fails an event whose guest handed out a response that
// does not decode.
var errBadResponse = errors.New("guest response malformed")

func decodeResponse(b []byte) (*actors.Response, error) {
	r := wire.NewReader(b)
	status := r.U32()
	n := r.Count(8)
	h := make(http.Header, n)
	for range n {
		name, value := r.String(), r.String()
		h.Add(name, value)
	}
	body := r.Bytes()
	if r.Err() {
		return nil, errBadResponse
	}
	if status == 0 {
		status = http.StatusOK
	}
	if status < 100 || status > 999 {
		return nil, errBadResponse
	}
	return &actors.Response{Status: int(status), Header: h, Body: body}, nil
}
