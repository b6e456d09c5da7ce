package actors

import (
	"context"
	"errors"
)

// An actor's SQL database, in the spirit of Durable Objects'
// ctx.storage.sql. During an event, SQL(ctx) is the actor's database:
// Exec runs statements, Query returns rows, Transaction runs a function's
// statements all or none. The database is SQLite, kept in the actor's own
// storage, so SQL writes are the event's writes: they commit with its
// key-value writes, or not at all, and count in the actor's bound on its
// state.
//
// The event is the transaction: a class cannot BEGIN, COMMIT or
// SAVEPOINT, since a SQLite transaction left open at the event's end would
// hold writes that are not the event's. Transaction gives a group of
// statements a rollback of its own within the event. The connection's
// settings are the node's: a PRAGMA other than those that read the schema,
// check the database or live in its file (table_info, index_list,
// foreign_key_check, integrity_check, user_version, defer_foreign_keys and
// their kind) is refused, as are ATTACH and DETACH. Foreign keys are
// enforced.

// ErrNoSQL: SQL was given a context that is not an event's.
var ErrNoSQL = errors.New("no SQL database outside an actor's event")

// ErrSQLReset is what a Transaction that spans a DeleteAll returns, and
// every SQL call inside it after the DeleteAll.
var ErrSQLReset = errors.New("sql: the database was reset during the transaction (DeleteAll)")

// SQLMaxLength bounds one string, blob or row in SQL (as the 2 MB rows of
// Durable Objects' SQL).
const SQLMaxLength = 2 << 20

// SQLDB is the SQL database of the actor whose event it was taken in. Its
// calls run on the event's goroutine, in the event; a class must not keep
// it past Handle, as it must not keep the event's Storage.
type SQLDB struct {
	ctx context.Context
	ev  event
}

// SQL returns the SQL database of the actor whose event ctx belongs to
// (the context Handle or HandleSocket was given, or one derived from it).
// A statement is interrupted when ctx is done. Outside an event every call
// fails with ErrNoSQL.
func SQL(ctx context.Context) *SQLDB { return &SQLDB{ctx: ctx, ev: eventOf(ctx)} }

// SQLResult is what Exec did.
type SQLResult struct {
	// RowsAffected counts the rows the statements inserted, updated or
	// deleted, those of triggers included.
	RowsAffected int64
	// LastInsertID is the rowid of the last row an INSERT of this call
	// inserted, 0 if none.
	LastInsertID int64
}

// SQLRows is the result of Query: the column names, and the rows, each a
// value per column: int64, float64, string, []byte or nil (NULL).
type SQLRows struct {
	Columns []string
	Rows    [][]any
}

// Exec runs query. With args, query is one statement and args are its
// parameters, in order (? placeholders, or numbered or named ones in the
// order of their first appearance); an arg is nil, a bool, an integer, a
// float, a string or a []byte. Without args, query may hold several
// statements, run in turn until one fails. Rows a statement returns are
// dropped.
//
// Exec fails with an error wrapping ErrLimit when the statement would take
// the actor's state past its bound; the statement is then undone, and the
// event's other writes stay.
func (db *SQLDB) Exec(query string, args ...any) (SQLResult, error) {
	if db.ev == nil {
		return SQLResult{}, ErrNoSQL
	}
	return db.ev.SQLExec(db.ctx, query, args)
}

// Query runs query, one statement, with args as Exec does, and returns
// the rows it yields, read whole into memory. A statement that writes
// (INSERT ... RETURNING) is run as Exec would run it.
func (db *SQLDB) Query(query string, args ...any) (*SQLRows, error) {
	if db.ev == nil {
		return nil, ErrNoSQL
	}
	return db.ev.SQLQuery(db.ctx, query, args)
}

// Transaction runs fn, whose SQL calls on db then count all or none: if
// fn returns an error (or panics), every SQL write it made is undone and
// the error returned; the event's key-value writes are not touched.
// Transactions nest. A Transaction that spans a DeleteAll fails with
// ErrSQLReset: the database it began in is gone.
func (db *SQLDB) Transaction(fn func() error) error {
	if db.ev == nil {
		return ErrNoSQL
	}
	return db.ev.SQLTransaction(db.ctx, fn)
}
