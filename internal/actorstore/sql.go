package actorstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ncruces/go-sqlite3"

	"github.com/wasmkeep/wasmkeep/actors"
)

// An actor's SQL database, in the spirit of Durable Objects'
// ctx.storage.sql. During an event, SQL(ctx) is the actor's database:
// Exec runs statements, Query returns rows, Transaction runs a function's
// statements all or none. The database is a SQLite file whose pages are
// node keys of the actor's storage (sqlvfs.go), so SQL writes are the
// event's writes: they commit with its KV writes, under the same owner
// seal, output gate and group commit, or not at all, and count in the
// actor's bound on its state.
//
// # The event is the transaction
//
// SQLite runs with journal_mode MEMORY: the rollback journal, which
// undoes a statement or a transaction that fails, is kept in the
// connection's memory, and no journal file is ever written. That is safe
// because no SQLite transaction is durable on its own: what SQLite
// "commits" goes into the event's write set, which the node commits (one
// conditional put) or discards whole. A crash in the middle of a SQLite
// transaction loses the event's write set with it, and the bucket still
// holds the pages as the last committed event left them, consistent. A
// statement that fails inside a call is rolled back by SQLite from the
// memory journal before the call returns, so the write set never holds a
// half-done statement. Invariant: a rollback cannot fail here, since the
// file refuses a write only when it would pass the actor's bound, and a
// rollback only puts back pages of the sizes they had, and shrinks.
//
// For the same reason a class cannot BEGIN, COMMIT or SAVEPOINT: the
// event is the transaction, and a SQLite transaction left open at its end
// would hold writes that are not in its write set. Transaction gives a
// group of statements of its own rollback within the event.
//
// # One connection per resident actor
//
// A connection runs a SQLite of its own (compiled to wasm and
// translated to Go: about 300 KiB and 0.3 ms to open; see
// RATIONALE.md). The actor's connection opens at its first SQL call in a
// residency and stays open, with its page cache and parsed schema, until
// the actor leaves memory (closeSQL). Before each call the connection
// checks that the pages are still those it last left, by the stamp
// (sqlvfs.go). When they are not (the last event that wrote them failed or
// rolled back, a commit was refused and the state was read again, a later
// hold's state was loaded, DeleteAll removed them), the connection is
// closed and a fresh one opened: SQLite's own check of its file change
// counter is not enough, since a discarded event and the one after it may
// both take the counter from n to n+1 with different pages, and the
// parsed schema would not be checked either.
//
// Connection-wide settings are therefore not a class's to change: a PRAGMA
// other than those listed in sqlPragmas is refused, as are ATTACH and
// DETACH. Foreign keys are enforced (PRAGMA foreign_keys is on).

// DB is the SQL database of the actor whose event it was taken in
// (actors.SQLDB's calls come here). Its calls run on the event's
// goroutine, in the event.
type DB struct {
	ctx context.Context
	sql *SQL // the resident actor's connection
	t   *Txn // the event's storage
}

// NewDB is the SQL database of an event whose storage is t, of the
// resident actor whose connection is s.
func NewDB(ctx context.Context, s *SQL, t *Txn) *DB {
	return &DB{ctx: ctx, sql: s, t: t}
}

// SQL is a resident actor's SQL connection: none until its first SQL
// call, then one while it stays resident (see the top of this file).
type SQL struct{ c *sqlConn }

// Exec runs query. With args, query is one statement and args are its
// parameters, in order (? placeholders, or numbered or named ones in the
// order of their first appearance); an arg is nil, a bool, an integer, a
// float, a string or a []byte. Without args, query may hold several
// statements, run in turn until one fails. Rows a statement returns are
// dropped.
//
// Exec fails with an error wrapping ErrLimit when the statement would take
// the actor's state past its bound (SQLite's SQLITE_FULL); the statement
// is then undone, and the event's other writes stay.
func (db *DB) Exec(query string, args ...any) (actors.SQLResult, error) {
	var res actors.SQLResult
	err := db.prepared(query, func(c *sqlConn, stmt *sqlite3.Stmt, tail string, changes func() actors.SQLResult) error {
		var err error
		switch {
		case tail != "" && len(args) > 0:
			return errMultiple
		case tail != "":
			// The first statement, compiled already, then the others.
			if err = stmt.Exec(); err == nil {
				err = c.conn.Exec(tail)
			}
		default:
			if err = bindAll(stmt, args); err == nil {
				err = stmt.Exec()
			}
			stmt.ClearBindings() // let go of the arguments
		}
		if err != nil {
			return err
		}
		res = changes()
		return nil
	})
	return res, err
}

// prepared runs f, within the connection's call (see call), on the
// prepared statement of query's first statement and the statements after
// it, if any (tail). What a result reports is reset first: changes gives
// what the statement changed, once it ran.
func (db *DB) prepared(query string, f func(c *sqlConn, stmt *sqlite3.Stmt, tail string, changes func() actors.SQLResult) error) error {
	c, err := db.conn()
	if err != nil {
		return err
	}
	return c.call(db, query, func() error {
		conn := c.conn
		conn.SetLastInsertRowID(0)
		before := conn.TotalChanges()
		stmt, tail, err := c.stmt(query)
		if err != nil {
			return err
		}
		if tail != "" {
			defer stmt.Close() // not cached
		}
		return f(c, stmt, tail, func() actors.SQLResult {
			return actors.SQLResult{RowsAffected: conn.TotalChanges() - before, LastInsertID: conn.LastInsertRowID()}
		})
	})
}

// Query runs query, one statement, with args as Exec does, and returns
// the rows it yields, read whole into memory. A statement that writes
// (INSERT ... RETURNING) is run as Exec would run it.
func (db *DB) Query(query string, args ...any) (*actors.SQLRows, error) {
	var rows *actors.SQLRows
	err := db.prepared(query, func(_ *sqlConn, stmt *sqlite3.Stmt, tail string, _ func() actors.SQLResult) error {
		if tail != "" {
			return errMultiple
		}
		defer stmt.ClearBindings()
		defer stmt.Reset()
		if err := bindAll(stmt, args); err != nil {
			return err
		}
		var err error
		rows, err = readRows(stmt, math.MaxInt)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// Transaction runs fn, whose SQL calls on db then count all or none: if
// fn returns an error (or panics), every SQL write it made is undone and
// the error returned; the event's KV writes are not touched. Transactions
// nest. A Transaction that spans a DeleteAll fails: the database it began
// in is gone.
func (db *DB) Transaction(fn func() error) error {
	c, err := db.conn()
	if err != nil {
		return err
	}
	const begin, commit, undo = "SAVEPOINT wasmkeep", "RELEASE wasmkeep", "ROLLBACK TO wasmkeep; RELEASE wasmkeep"
	c.depth++ // (first: the call checks that no transaction is left open outside one)
	if err := c.call(db, begin, func() error { return c.internal(begin) }); err != nil {
		c.depth--
		return err
	}
	// reset: a DeleteAll during fn took the pages the transaction began
	// on. Nothing may then be written through this connection, neither a
	// commit (its pages would land on the emptied storage) nor an undo
	// (which puts pages back): it is closed, and the next SQL call opens
	// the database DeleteAll left.
	reset := func() bool {
		if !c.closed && !c.file.current(db.t) {
			c.close()
		}
		return c.closed
	}
	done := false
	defer func() {
		c.depth--
		if !done && !reset() { // fn panicked
			_ = c.internal(undo)
		}
	}()
	ferr := fn()
	done = true
	if reset() {
		return errors.Join(ferr, actors.ErrSQLReset)
	}
	if ferr == nil {
		// A commit can fail (a deferred foreign key): then it is undone.
		if ferr = c.call(db, commit, func() error { return c.internal(commit) }); ferr == nil {
			return nil
		}
	}
	if err := c.call(db, undo, func() error { return c.internal(undo) }); err != nil {
		return errors.Join(ferr, err)
	}
	return ferr
}

// sqlConn is a resident actor's SQLite connection (see the comment at the
// top of this file).
type sqlConn struct {
	conn *sqlite3.Conn
	file *sqlFile
	// depth counts the Transactions open.
	depth int
	// busy is set during a call into SQLite: still set at the next call,
	// that one did not return (a panic went through SQLite), and the
	// connection is not trusted again.
	busy bool
	// trusted lets the node's own statements past the authorizer.
	trusted bool
	// denied is why the authorizer refused the call's statement, if it did.
	denied string
	closed bool
	// stmts are the statements kept compiled, the most recently used
	// last.
	stmts []sqlStmt
}

// sqlCacheKiB bounds a connection's page cache. The pages are in the
// actor's state in memory already, and a miss costs a map lookup and a
// copy; see RATIONALE.md.
const sqlCacheKiB = 256

// sqlSetup is run on each connection as it opens.
var sqlSetup = fmt.Sprintf("PRAGMA page_size=%d; PRAGMA journal_mode=MEMORY; PRAGMA locking_mode=NORMAL;"+
	" PRAGMA synchronous=OFF; PRAGMA temp_store=MEMORY; PRAGMA foreign_keys=ON; PRAGMA cache_size=-%d", sqlPageSize, sqlCacheKiB)

// What one connection may take, whatever its statements ask: memory for
// SQLite's own heap (its page cache, the journal of the event's changes,
// sorts and temporary tables, which are kept in memory), and the length
// of one string, blob or row. Past them a statement fails (out of
// memory; string or blob too big) and the connection stays usable. A
// connection lives as long as its actor is resident, and its memory is
// not given back before it closes: without a bound, one statement of a
// class (or a wasm guest's) could make each resident actor hold the
// library's default of 256 MiB. The length is actors.SQLMaxLength.
const sqlMaxMemory = 64 << 20

// The connections opened so far, and those open now (tests, benchmarks).
var sqlOpens, sqlLive atomic.Int64

// SQLOpened is how many SQL connections the process has opened so far.
func SQLOpened() int64 { return sqlOpens.Load() }

// SQLOpen is how many SQL connections are open now.
func SQLOpen() int64 { return sqlLive.Load() }

// openSQL opens a connection on the database kept in st.
func openSQL(st nodeStorage) (*sqlConn, error) { return openSQLMode(st, false) }

// openSQLMode opens a connection on the database kept in st; readOnly
// opens the file read-only (SQLite's mode=ro), so that no statement of
// the connection can write it.
func openSQLMode(st nodeStorage, readOnly bool) (*sqlConn, error) {
	sqlRegister()
	c := &sqlConn{file: newSQLFile(st)}
	name := "/" + strconv.FormatUint(sqlNames.Add(1), 10)
	sqlOpening.Store(name, c.file)
	uri := "file:" + name + "?vfs=" + sqlVFSName
	if readOnly {
		uri += "&mode=ro"
	}
	conn, err := sqlite3.OpenContext(sqlite3.WithMaxMemory(context.Background(), sqlMaxMemory), uri)
	sqlOpening.Delete(name) // if SQLite did not get to open it
	if err != nil {
		return nil, fmt.Errorf("sql: open: %w", err)
	}
	sqlOpens.Add(1)
	sqlLive.Add(1)
	c.conn = conn
	if err := conn.Exec(sqlSetup); err != nil {
		c.close()
		return nil, fmt.Errorf("sql: set up: %w", err)
	}
	if err := conn.SetAuthorizer(c.authorize); err != nil {
		c.close()
		return nil, fmt.Errorf("sql: set up: %w", err)
	}
	conn.Limit(sqlite3.LIMIT_LENGTH, actors.SQLMaxLength)
	return c, nil
}

// close closes the connection. Its file is detached first: whatever
// SQLite writes as it closes reaches no storage. The error is for tests:
// nothing is left to do about it.
func (c *sqlConn) close() (err error) {
	if c.closed {
		return nil
	}
	c.closed = true
	c.file.st = nil
	sqlLive.Add(-1)
	defer func() {
		if p := recover(); p != nil { // a connection a panic went through may not close cleanly
			err = fmt.Errorf("sql: close: %v", p)
		}
	}()
	for _, s := range c.stmts {
		_ = s.stmt.Close()
	}
	c.stmts = nil
	return c.conn.Close()
}

// conn is the actor's connection, current with the event's storage:
// opened at the actor's first SQL call of its residency, and opened again
// when the pages are not those it last left (see the top of this file).
func (db *DB) conn() (*sqlConn, error) {
	if db.sql == nil || db.t == nil {
		return nil, actors.ErrNoSQL
	}
	return db.sql.conn(db.t)
}

// conn returns the resident actor's connection for an event whose
// storage is st, opening one if it has none that is current.
func (s *SQL) conn(st nodeStorage) (*sqlConn, error) {
	if c := s.c; c != nil && (c.closed || c.busy || !c.file.current(st) || (c.depth == 0 && !c.conn.GetAutocommit())) {
		c.close()
		if c.depth > 0 {
			// Inside a Transaction whose pages a DeleteAll took: a fresh
			// connection would write outside it, and its writes would
			// stay when the Transaction fails. The closed one stays
			// until the Transaction ends, failing every call.
			return nil, actors.ErrSQLReset
		}
		s.c = nil
	}
	if s.c == nil {
		c, err := openSQL(st)
		if err != nil {
			return nil, err
		}
		s.c = c
	}
	return s.c, nil
}

// Close closes the actor's connection, if it has one: the actor leaves
// memory (resident.go calls it where it closes the class's Resident).
func (s *SQL) Close() {
	if s.c != nil {
		s.c.close()
		s.c = nil
	}
}

// call runs fn, one SQL call of the event db was taken in, on the
// connection, and words its error.
func (c *sqlConn) call(db *DB, query string, fn func() error) error {
	if c.closed {
		return actors.ErrSQLReset
	}
	c.file.beginCall(db.t)
	c.denied = ""
	c.conn.SetInterrupt(db.ctx)
	c.busy = true
	err := fn()
	c.busy = false
	c.conn.SetInterrupt(context.Background())
	if err == nil && c.depth == 0 && !c.conn.GetAutocommit() {
		// Cannot happen (the authorizer refuses BEGIN and SAVEPOINT): a
		// transaction must not outlive its call.
		_ = c.internal("ROLLBACK")
		err = errors.New("the statement left a transaction open")
	}
	switch {
	case err == nil:
		return nil
	case c.file.refused != nil:
		return fmt.Errorf("sql %.64q: %w (%w)", query, c.file.refused, err)
	case c.denied != "":
		return fmt.Errorf("sql %.64q: %s: %w", query, c.denied, err)
	}
	return fmt.Errorf("sql %.64q: %w", query, err)
}

// internal runs the node's own statements.
func (c *sqlConn) internal(query string) error {
	c.trusted = true
	defer func() { c.trusted = false }()
	return c.conn.Exec(query)
}

// sqlStmtCache bounds the statements a connection keeps compiled. A
// class runs the same few statements event after event; compiling one is
// about a third of a short statement's cost.
const sqlStmtCache = 16

// sqlStmt is a compiled statement and its text.
type sqlStmt struct {
	query string
	stmt  *sqlite3.Stmt
}

var errMultiple = errors.New("more than one statement (only Exec without arguments runs several)")

// stmt returns query compiled, from the cache or compiled now and cached
// (the least recently used one going), reset and with no arguments bound.
// If query holds more than one statement, it returns the first one,
// compiled and not cached (the caller closes it), and the text of the
// others (tail).
func (c *sqlConn) stmt(query string) (stmt *sqlite3.Stmt, tail string, err error) {
	for i, s := range c.stmts {
		if s.query == query {
			copy(c.stmts[i:], c.stmts[i+1:])
			c.stmts[len(c.stmts)-1] = s
			return s.stmt, "", nil
		}
	}
	stmt, tail, err = c.conn.Prepare(query)
	if err != nil {
		return nil, "", err
	}
	if stmt == nil {
		return nil, "", errors.New("no statement")
	}
	if tail != "" {
		// Only a statement, or only blanks and comments, after it? (One
		// after it may name what the first creates: it fails to compile
		// now, and is a statement all the same.)
		next, _, err := c.conn.Prepare(tail)
		if next != nil || err != nil {
			next.Close()
			return stmt, tail, nil
		}
	}
	if len(c.stmts) == sqlStmtCache {
		c.stmts[0].stmt.Close()
		c.stmts = append(c.stmts[:0], c.stmts[1:]...)
	}
	c.stmts = append(c.stmts, sqlStmt{query: query, stmt: stmt})
	return stmt, "", nil
}

// bindAll binds args to stmt's parameters, in order.
func bindAll(stmt *sqlite3.Stmt, args []any) error {
	if n := stmt.BindCount(); n != len(args) {
		return fmt.Errorf("%d parameters, %d arguments", n, len(args))
	}
	for i, a := range args {
		if err := bind(stmt, i+1, a); err != nil {
			return fmt.Errorf("argument %d: %w", i+1, err)
		}
	}
	return nil
}

func bind(stmt *sqlite3.Stmt, p int, a any) error {
	switch v := a.(type) {
	case nil:
		return stmt.BindNull(p)
	case bool:
		return stmt.BindBool(p, v)
	case int:
		return stmt.BindInt64(p, int64(v))
	case int8:
		return stmt.BindInt64(p, int64(v))
	case int16:
		return stmt.BindInt64(p, int64(v))
	case int32:
		return stmt.BindInt64(p, int64(v))
	case int64:
		return stmt.BindInt64(p, v)
	case uint8:
		return stmt.BindInt64(p, int64(v))
	case uint16:
		return stmt.BindInt64(p, int64(v))
	case uint32:
		return stmt.BindInt64(p, int64(v))
	case uint:
		return bindUint(stmt, p, uint64(v))
	case uint64:
		return bindUint(stmt, p, v)
	case float32:
		return stmt.BindFloat(p, float64(v))
	case float64:
		return stmt.BindFloat(p, v)
	case string:
		return stmt.BindText(p, v)
	case []byte:
		return stmt.BindBlob(p, v)
	}
	return fmt.Errorf("a %T is not an SQL value (nil, bool, integer, float, string, []byte)", a)
}

func bindUint(stmt *sqlite3.Stmt, p int, v uint64) error {
	if v > math.MaxInt64 {
		return fmt.Errorf("%d is past SQLite's 64-bit signed integers", v)
	}
	return stmt.BindInt64(p, int64(v))
}

// sqlPragmas are the PRAGMAs a class may run: reading the schema and
// checking the database, and the settings that live in the database file
// or in one transaction. The others set what the connection does, which
// the node keeps as sql.go says, or which a fresh connection would forget.
var sqlPragmas = map[string]bool{
	"table_info": true, "table_xinfo": true, "table_list": true, "index_list": true, "index_info": true,
	"index_xinfo": true, "foreign_key_list": true, "foreign_key_check": true, "integrity_check": true,
	"quick_check": true, "optimize": true, "page_count": true, "freelist_count": true, "page_size": false,
	"foreign_keys": false, "user_version": true, "application_id": true, "defer_foreign_keys": true,
}

// authorize refuses what a class may not run (see the top of this file).
func (c *sqlConn) authorize(action sqlite3.AuthorizerActionCode, arg3, arg4, _, _ string) sqlite3.AuthorizerReturnCode {
	if c.trusted {
		return sqlite3.AUTH_OK
	}
	switch action {
	case sqlite3.AUTH_TRANSACTION, sqlite3.AUTH_SAVEPOINT:
		c.denied = "the event is the transaction: BEGIN, COMMIT, ROLLBACK and SAVEPOINT are not allowed: an event's statements commit together or not at all"
	case sqlite3.AUTH_ATTACH, sqlite3.AUTH_DETACH:
		c.denied = "an actor has one database: ATTACH and DETACH are not allowed"
	case sqlite3.AUTH_PRAGMA:
		withArg, ok := sqlPragmas[strings.ToLower(arg3)]
		if ok && (withArg || arg4 == "") {
			return sqlite3.AUTH_OK
		}
		c.denied = "PRAGMA " + arg3 + " is not allowed"
		if ok {
			c.denied += " to be set"
		}
	default:
		return sqlite3.AUTH_OK
	}
	return sqlite3.AUTH_DENY
}
