package actors

import (
	"context"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/eventctx"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// event is what the node's runtime puts in the context of each event it
// runs: what ActorOf, SocketsOf, Call, Fetch, the alarms and SQL reach
// through it.
type event interface {
	Actor() ownership.Actor
	// Sockets is nil on a node that serves no sockets.
	Sockets() Sockets
	Call(ctx context.Context, to ownership.Actor, req *Request) (*Response, error)
	Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error)
	DialSocket(ctx context.Context, d *SocketDial) (SocketID, error)
	Secret(name string) ([]byte, bool)
	SetAlarm(name string, at time.Time) error
	GetAlarm(name string) (time.Time, bool, error)
	DeleteAlarm(name string) error
	ListAlarms() ([]Alarm, error)
	SQLExec(ctx context.Context, query string, args []any) (SQLResult, error)
	SQLQuery(ctx context.Context, query string, args []any) (*SQLRows, error)
	SQLTransaction(ctx context.Context, fn func() error) error
}

// eventOf returns the event ctx belongs to, nil outside one.
func eventOf(ctx context.Context) event {
	ev, _ := ctx.Value(eventctx.Key{}).(event)
	return ev
}
