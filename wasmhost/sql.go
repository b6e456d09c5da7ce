package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/eventctx"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// The SQL part of the guest ABI (ABI.md): the actor's SQL database,
// through actors.SQL of the event's context. The host takes the actor
// from the call's context, never from the guest, so a statement reaches
// the event's actor's database alone, on a shared guest too; and its writes
// are the event's writes, as a Go class's are: they commit with the event's
// KV writes, or are discarded with a failed or rolled-back event.

func sqlFunctions(fn hostFunc) {
	// sql_exec_len(stmt, stmt_len) -> i32: runs the encoded statement and
	// returns the size of the encoded result, which says whether it ran.
	// The result waits for sql_exec_read. A malformed encoding is an ABI
	// violation.
	fn("sql_exec_len", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		ev.sql = nil
		s, ok := decodeStatement(read(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))
		if !ok {
			panic(errBadStatement)
		}
		ev.sql = runStatement(ctx, ev, s)
		stack[0] = api.EncodeU32(uint32(len(ev.sql)))
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// sql_exec_read(ptr, len) -> i32: copies the result of the last
	// sql_exec_len into the buffer.
	fn("sql_exec_read", func(ctx context.Context, mod api.Module, stack []uint64) {
		ev := eventOf(ctx)
		n := write(mod, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), ev.sql)
		ev.sql = nil
		stack[0] = api.EncodeU32(n)
	}, []api.ValueType{i32, i32}, []api.ValueType{i32})
}

// maxSQLResult bounds the rows of one sql_exec_len, as
// actors.SQLDB.Statement counts them (8 bytes a column and a value, plus
// the name's, the number's or the text's bytes), so that a statement
// cannot make the host hold more for the guest. The encoding takes no
// more than that count (a number 9 bytes, a text or blob 5 and its
// length, a column name 4 and its length), and a header of 25 bytes.
const maxSQLResult = 16 << 20

// Invariant: an encoded result fits an i32, its size sql_exec_len's answer.
const _ uint32 = math.MaxInt32 - maxSQLResult - 25

// errBadStatement fails a sql_exec_len call whose encoding is malformed.
var errBadStatement = errors.New("wasmkeep sql_exec_len given a malformed encoding")

// sqlStatement is what a guest asks of sql_exec_len.
type sqlStatement struct {
	query string
	args  []any // nil, int64, float64, string, []byte
	exec  bool  // wire.SQLFlagExec: as Exec, no rows
}

// decodeStatement decodes the encoding of sql_exec_len: the query, its
// arguments (a count, then each value's type and value) and the flags.
// An unknown type or flag makes it malformed.
func decodeStatement(b []byte) (sqlStatement, bool) {
	r := wire.NewReader(b)
	s := sqlStatement{query: r.String()}
	s.args = make([]any, r.Count(1)) // a value takes at least its type
	for i := range s.args {
		switch r.U8() {
		case wire.SQLNull:
		case wire.SQLInteger:
			s.args[i] = int64(r.U64())
		case wire.SQLFloat:
			s.args[i] = math.Float64frombits(r.U64())
		case wire.SQLText:
			s.args[i] = r.String()
		case wire.SQLBlob:
			s.args[i] = r.Bytes() // never nil: an empty blob is not NULL
		default:
			return sqlStatement{}, false
		}
	}
	flags := r.U32()
	if r.Err() || flags&^wire.SQLFlagExec != 0 {
		return sqlStatement{}, false
	}
	s.exec = flags&wire.SQLFlagExec != 0
	return s, true
}

// statementRunner is what an event's context carries (eventctx.Key) to
// run a statement whose kind the guest does not tell: it returns both what
// the statement changed and its rows, up to maxSize bytes of them.
type statementRunner interface {
	SQLStatement(ctx context.Context, query string, maxSize int, args []any) (actors.SQLResult, *actors.SQLRows, error)
}

// runStatement runs s on the SQL database of the actor whose event ctx
// is, and lays out its result: what it did and its rows, or why not.
func runStatement(ctx context.Context, ev *event, s sqlStatement) []byte {
	var (
		res  actors.SQLResult
		rows *actors.SQLRows
		err  error
	)
	st, ok := ctx.Value(eventctx.Key{}).(statementRunner)
	switch {
	case s.exec || !ok:
		res, err = actors.SQL(ctx).Exec(s.query, s.args...)
	default:
		res, rows, err = st.SQLStatement(ctx, s.query, maxSQLResult, s.args)
	}
	if err != nil {
		status := byte(wire.SQLError)
		if errors.Is(err, actors.ErrLimit) {
			status = wire.SQLLimit
		}
		ev.logger().Debug("guest sql refused", slog.Any("err", err))
		return wire.AppendString([]byte{status}, err.Error())
	}
	return encodeSQLResult(res, rows)
}

// encodeSQLResult lays out the result of a statement that ran: the
// status, the rows changed, the last rowid, the column names, and the
// rows, each a value per column (none for a nil rows).
func encodeSQLResult(res actors.SQLResult, rows *actors.SQLRows) []byte {
	if rows == nil {
		rows = &actors.SQLRows{}
	}
	size := 25
	for _, c := range rows.Columns {
		size += 4 + len(c)
	}
	for _, row := range rows.Rows {
		for _, v := range row {
			size += sqlValueSize(v)
		}
	}
	b := make([]byte, 0, size)
	b = append(b, wire.SQLDone)
	b = wire.AppendU64(b, uint64(res.RowsAffected))
	b = wire.AppendU64(b, uint64(res.LastInsertID))
	b = wire.AppendU32(b, uint32(len(rows.Columns)))
	for _, c := range rows.Columns {
		b = wire.AppendString(b, c)
	}
	b = wire.AppendU32(b, uint32(len(rows.Rows)))
	for _, row := range rows.Rows {
		for _, v := range row {
			b = appendSQLValue(b, v)
		}
	}
	return b
}

// sqlValueSize is how many bytes appendSQLValue adds for v.
func sqlValueSize(v any) int {
	switch v := v.(type) {
	case string:
		return 5 + len(v)
	case []byte:
		return 5 + len(v)
	case nil:
		return 1
	}
	return 9
}

// appendSQLValue appends a value of a row as ABI.md lays it out: its
// type, then the value.
func appendSQLValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, wire.SQLNull)
	case int64:
		return wire.AppendU64(append(b, wire.SQLInteger), uint64(v))
	case float64:
		return wire.AppendU64(append(b, wire.SQLFloat), math.Float64bits(v))
	case string:
		return wire.AppendString(append(b, wire.SQLText), v)
	case []byte:
		return wire.AppendBytes(append(b, wire.SQLBlob), v)
	}
	// Invariant: actors.SQLRows holds only the types above.
	panic(fmt.Sprintf("wasmhost: a %T in SQL rows", v))
}
