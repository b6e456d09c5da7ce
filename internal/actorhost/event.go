package actorhost

import (
	"context"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// eventValues is what an event's context carries (under eventctx.Key),
// for package actors' ActorOf, SocketsOf, Call and SQL, and for the wasm
// host's SQL statements.
type eventValues struct {
	actor ownership.Actor
	socks eventSockets // owner nil: the node serves no sockets
	call  eventCall
	// alarmsSet counts the actors.SetAlarm calls of the event.
	alarmsSet int64
}

// Actor is the event's actor.
func (ev *eventValues) Actor() ownership.Actor { return ev.actor }

// Sockets is the event's sockets, nil on a node without a socket owner.
func (ev *eventValues) Sockets() actors.Sockets {
	if ev.socks.owner == nil {
		return nil
	}
	return &ev.socks
}

// Call sends a call from the event (see call.go).
func (ev *eventValues) Call(ctx context.Context, to ownership.Actor, req *actors.Request) (*actors.Response, error) {
	return ev.call.call(ctx, to, req)
}

// Fetch sends an outbound HTTP request from the event (see call.go).
func (ev *eventValues) Fetch(ctx context.Context, req *actors.FetchRequest) (*actors.FetchResponse, error) {
	return ev.call.fetch(ctx, req)
}

// DialSocket opens an outbound socket from the event (see dial.go).
func (ev *eventValues) DialSocket(ctx context.Context, d *actors.SocketDial) (actors.SocketID, error) {
	return ev.call.dial(ctx, ev.socks.owner, d)
}

// Secret is actors.Secret for the event.
func (ev *eventValues) Secret(name string) ([]byte, bool) {
	return ev.call.ra.h.secret(name)
}

// SQLExec is actors.SQLDB.Exec.
func (ev *eventValues) SQLExec(ctx context.Context, query string, args []any) (actors.SQLResult, error) {
	return ev.sqlDB(ctx).Exec(query, args...)
}

// SQLQuery is actors.SQLDB.Query.
func (ev *eventValues) SQLQuery(ctx context.Context, query string, args []any) (*actors.SQLRows, error) {
	return ev.sqlDB(ctx).Query(query, args...)
}

// SQLTransaction is actors.SQLDB.Transaction.
func (ev *eventValues) SQLTransaction(ctx context.Context, fn func() error) error {
	return ev.sqlDB(ctx).Transaction(fn)
}

// SQLStatement runs one statement for a caller that cannot tell whether
// it reads or writes (a wasm guest's host call), bounding the rows it
// holds; see sqlDB.Statement.
func (ev *eventValues) SQLStatement(ctx context.Context, query string, maxSize int, args []any) (actors.SQLResult, *actors.SQLRows, error) {
	return ev.sqlDB(ctx).Statement(query, maxSize, args...)
}

// sqlDB is the actor's SQL database in the event ev carries.
func (ev *eventValues) sqlDB(ctx context.Context) *actorstore.DB {
	var s *actorstore.SQL
	var t *actorstore.Txn
	if ev != nil && ev.call.ra != nil {
		s = &ev.call.ra.sql
	}
	if ev != nil {
		t = ev.call.t
	}
	return actorstore.NewDB(ctx, s, t)
}
