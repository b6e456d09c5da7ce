package actorhost

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/eventctx"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// frontActor names the front where an actor is expected: the egress's
// bound on one actor's requests in flight holds the front's together.
var frontActor = ownership.Actor{Class: "front", Name: "front"}

// FrontContext returns ctx made the context of a front's request (see
// actors.Front): actors.Call and actors.Fetch reach actors and services
// from it as from an actor's event, with nothing to commit first; what
// only an actor's event can do fails with actors.ErrNotInActor.
func (h *Host) FrontContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, eventctx.Key{}, &frontEvent{h: h})
}

// frontEvent is what a front's context carries under eventctx.Key.
type frontEvent struct{ h *Host }

func (*frontEvent) Actor() ownership.Actor  { return ownership.Actor{} }
func (*frontEvent) Sockets() actors.Sockets { return nil }

// Call routes a call from the front, bounded by the node's call timeout.
func (f *frontEvent) Call(ctx context.Context, to ownership.Actor, req *actors.Request) (*actors.Response, error) {
	if f.h.cfg.Caller == nil {
		return nil, fmt.Errorf("%w: this node routes no calls", actors.ErrCallFailed)
	}
	cctx, cancel := context.WithTimeout(ctx, f.h.cfg.CallTimeout)
	defer cancel()
	return f.h.cfg.Caller.Call(cctx, f.h, to, req)
}

// Fetch sends an outbound request from the front: nothing to commit first.
func (f *frontEvent) Fetch(ctx context.Context, req *actors.FetchRequest) (*actors.FetchResponse, error) {
	if f.h.cfg.Fetcher == nil {
		return nil, fmt.Errorf("%w: this node sends no outbound requests", actors.ErrFetchRefused)
	}
	if err := f.h.cfg.Fetcher.Check(req); err != nil {
		return nil, err
	}
	return f.h.cfg.Fetcher.Fetch(ctx, frontActor, req)
}

// Secret is actors.Secret for the front.
func (f *frontEvent) Secret(name string) ([]byte, bool) { return f.h.secret(name) }

func (*frontEvent) DialSocket(context.Context, *actors.SocketDial) (actors.SocketID, error) {
	return 0, actors.ErrNotInActor
}
func (*frontEvent) SetAlarm(string, time.Time) error { return actors.ErrNotInActor }
func (*frontEvent) GetAlarm(string) (time.Time, bool, error) {
	return time.Time{}, false, actors.ErrNotInActor
}
func (*frontEvent) DeleteAlarm(string) error            { return actors.ErrNotInActor }
func (*frontEvent) ListAlarms() ([]actors.Alarm, error) { return nil, actors.ErrNotInActor }
func (*frontEvent) SQLExec(context.Context, string, []any) (actors.SQLResult, error) {
	return actors.SQLResult{}, actors.ErrNotInActor
}
func (*frontEvent) SQLQuery(context.Context, string, []any) (*actors.SQLRows, error) {
	return nil, actors.ErrNotInActor
}
func (*frontEvent) SQLTransaction(context.Context, func() error) error { return actors.ErrNotInActor }

// secret is the node's secret name, if it has one open.
func (h *Host) secret(name string) ([]byte, bool) {
	if h.cfg.Secrets == nil {
		return nil, false
	}
	return h.cfg.Secrets.Secret(name)
}
