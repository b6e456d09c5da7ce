package guest

import (
	"math"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// SQL. Each actor has a SQL database of its own (SQLite), whose pages the
// host keeps in the actor's storage: SQL.Exec and SQL.Query run
// statements on the database of the event's actor, one host call each
// (wasmhost/ABI.md, sql_exec_len). SQL writes are the event's writes:
// they commit with its Storage writes, or are discarded with a failed or
// rolled-back event. The event is the transaction, so BEGIN, COMMIT and
// SAVEPOINT are refused, as are ATTACH and the PRAGMAs that set the
// connection (foreign keys are on).

// SQLDB is the SQL database of the actor whose event is running. Use the
// package variable SQL.
type SQLDB struct{}

// SQL is the SQL database of the current event's actor.
var SQL SQLDB

// Result is what Exec did.
type Result struct {
	// RowsAffected counts the rows the statements inserted, updated or
	// deleted, those of triggers included.
	RowsAffected int64
	// LastInsertID is the rowid of the last row an INSERT of this call
	// inserted, 0 if none.
	LastInsertID int64
}

// Rows is the result of Query: the column names, and the rows, each a
// value per column: int64, float64, string, []byte or nil (NULL).
type Rows struct {
	Columns []string
	Rows    [][]any
}

// SQLError is the error of a statement that did not run: Message says
// why, as the host's Go API words it (the statement, then SQLite's
// message). A statement that would take the actor's state past its bound
// fails with an SQLError for which errors.Is(err, ErrLimit) holds: answer
// 413. Either way the statement is undone, and the event's other writes
// stay.
type SQLError struct {
	Message string
	limit   bool
}

func (e *SQLError) Error() string { return e.Message }

// Unwrap is ErrLimit for a statement past the state's bound.
func (e *SQLError) Unwrap() error {
	if e.limit {
		return ErrLimit
	}
	return nil
}

// Exec runs query. With args, query is one statement and args are its
// parameters, in order (? placeholders, or numbered or named ones in the
// order of their first appearance); an arg is nil, a bool, an integer, a
// float, a string or a []byte. Without args, query may hold several
// statements, run in turn until one fails. Rows a statement returns are
// dropped. It fails with an *SQLError.
func (SQLDB) Exec(query string, args ...any) (Result, error) {
	res, _, err := runSQL(query, args, wire.SQLFlagExec)
	return res, err
}

// Query runs query, one statement, with args as Exec does, and returns
// the rows it yields, read whole (at most 16 MiB of them: past that it
// fails, and what the statement wrote is undone). A statement that writes
// (INSERT ... RETURNING) is run as Exec would run it. It fails with an
// *SQLError.
func (SQLDB) Query(query string, args ...any) (*Rows, error) {
	_, rows, err := runSQL(query, args, 0)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// runSQL runs query with args in one host call, with flags.
func runSQL(query string, args []any, flags uint32) (Result, *Rows, error) {
	stmt, err := encodeStatement(query, args, flags)
	if err != nil {
		return Result{}, nil, err
	}
	buf := make([]byte, sqlExecLen(stmt))
	sqlExecRead(buf)
	res, rows, refused, ok := decodeSQLResult(buf)
	switch {
	case !ok:
		panic("guest: SQL result from the host is malformed")
	case refused != nil:
		return Result{}, nil, refused
	}
	return res, rows, nil
}

// encodeStatement lays out the statement of sql_exec_len: the query, its
// arguments and the flags.
func encodeStatement(query string, args []any, flags uint32) ([]byte, error) {
	n := 12 + len(query)
	for _, a := range args {
		switch v := a.(type) {
		case string:
			n += 5 + len(v)
		case []byte:
			n += 5 + len(v)
		default:
			n += 9
		}
	}
	b := make([]byte, 0, n)
	b = wire.AppendString(b, query)
	b = wire.AppendU32(b, uint32(len(args)))
	for i, a := range args {
		var ok bool
		if b, ok = appendArg(b, a); !ok {
			return nil, &SQLError{Message: "guest: SQL argument " + itoa(i+1) +
				" is not an SQL value (nil, a bool, an integer up to 2^63-1, a float, a string or a []byte)"}
		}
	}
	return wire.AppendU32(b, flags), nil
}

// appendArg appends a as an SQL value: its type, then the value.
func appendArg(b []byte, a any) ([]byte, bool) {
	integer := func(v int64) []byte { return wire.AppendU64(append(b, wire.SQLInteger), uint64(v)) }
	switch v := a.(type) {
	case nil:
		return append(b, wire.SQLNull), true
	case bool:
		if v {
			return integer(1), true
		}
		return integer(0), true
	case int:
		return integer(int64(v)), true
	case int8:
		return integer(int64(v)), true
	case int16:
		return integer(int64(v)), true
	case int32:
		return integer(int64(v)), true
	case int64:
		return integer(v), true
	case uint8:
		return integer(int64(v)), true
	case uint16:
		return integer(int64(v)), true
	case uint32:
		return integer(int64(v)), true
	case uint:
		return integer(int64(v)), uint64(v) <= math.MaxInt64
	case uint64:
		return integer(int64(v)), v <= math.MaxInt64
	case float32:
		return wire.AppendU64(append(b, wire.SQLFloat), math.Float64bits(float64(v))), true
	case float64:
		return wire.AppendU64(append(b, wire.SQLFloat), math.Float64bits(v)), true
	case string:
		return wire.AppendString(append(b, wire.SQLText), v), true
	case []byte:
		return wire.AppendBytes(append(b, wire.SQLBlob), v), true
	}
	return b, false
}

// decodeSQLResult reads the result of sql_exec_len: the statement's
// result and rows, or why it did not run; ok is false for a malformed
// encoding.
func decodeSQLResult(b []byte) (res Result, rows *Rows, refused *SQLError, ok bool) {
	r := wire.NewReader(b)
	switch status := r.U8(); status {
	case wire.SQLDone:
	case wire.SQLError, wire.SQLLimit:
		msg := r.String()
		return Result{}, nil, &SQLError{Message: msg, limit: status == wire.SQLLimit}, !r.Err()
	default:
		return Result{}, nil, nil, false
	}
	res = Result{RowsAffected: int64(r.U64()), LastInsertID: int64(r.U64())}
	rows = &Rows{Columns: make([]string, r.Count(4))}
	for i := range rows.Columns {
		rows.Columns[i] = r.String()
	}
	cols := len(rows.Columns)
	n := r.Count(max(cols, 1)) // a value takes at least a byte
	if cols == 0 && n > 0 {
		return Result{}, nil, nil, false
	}
	rows.Rows = make([][]any, n)
	for i := range rows.Rows {
		row := make([]any, cols)
		for j := range row {
			switch r.U8() {
			case wire.SQLNull:
			case wire.SQLInteger:
				row[j] = int64(r.U64())
			case wire.SQLFloat:
				row[j] = math.Float64frombits(r.U64())
			case wire.SQLText:
				row[j] = r.String()
			case wire.SQLBlob:
				row[j] = r.Bytes()
			default:
				return Result{}, nil, nil, false
			}
		}
		rows.Rows[i] = row
	}
	if r.Err() {
		return Result{}, nil, nil, false
	}
	return res, rows, nil, true
}

// itoa is n in decimal (n ≥ 0), without strconv.
func itoa(n int) string {
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(d[i:])
		}
	}
}
