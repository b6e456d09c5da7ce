package actors

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// SQLConsole is the built-in class registered as "sql": each actor is a
// SQL database of its own (SQL), driven over HTTP, for users and
// benchmarks. Under /actor/sql/<name>:
//
//	POST /exec   runs the statements in the body; with ?arg=V (repeated,
//	             in order) the body is one statement and the args are its
//	             parameters, as text. Answers the rows the statements
//	             changed and the last rowid inserted.
//	POST /query  runs the one statement in the body, args as for /exec,
//	             and answers its rows: a line of column names, then a line
//	             per row, values separated by tabs (NULL for null, x'..'
//	             for a blob)
//
// Answers are text/plain. A request is all or nothing: when a statement
// fails, SQLite's refusal gets 400 with its message, one past the actor's
// storage bound 413, and the request writes nothing. ?dry-run answers
// as the request would and writes nothing: the event runs, then rolls
// back. Another path gets 404, another method 405 with Allow.
type SQLConsole struct{}

// Handle serves one event of a sql actor.
func (SQLConsole) Handle(ctx context.Context, req *Request, _ Storage) (*Response, error) {
	if req.Path != "/exec" && req.Path != "/query" {
		return Text(http.StatusNotFound, "sql: POST /exec or /query, the SQL in the body\n"), nil
	}
	if req.Method != http.MethodPost {
		r := Text(http.StatusMethodNotAllowed, "sql: only POST here\n")
		r.Header.Set("Allow", http.MethodPost)
		return r, nil
	}
	var args []any
	for _, a := range req.Query["arg"] {
		args = append(args, a)
	}
	db, query := SQL(ctx), string(req.Body)
	var body string
	if req.Path == "/exec" {
		res, err := db.Exec(query, args...)
		if err != nil {
			return sqlRefused(err)
		}
		body = fmt.Sprintf("rows changed: %d\nlast insert id: %d\n", res.RowsAffected, res.LastInsertID)
	} else {
		rows, err := db.Query(query, args...)
		if err != nil {
			return sqlRefused(err)
		}
		body = sqlTSV(rows)
	}
	resp := Text(http.StatusOK, body)
	if req.Query.Has("dry-run") {
		return nil, Rollback(resp)
	}
	return resp, nil
}

// sqlRefused answers a request whose statement failed: past a limit, 413
// (the event fails with the error); otherwise 400 with SQLite's message.
// Either way the request writes nothing, not even the statements before
// the one that failed.
func sqlRefused(err error) (*Response, error) {
	if errors.Is(err, ErrLimit) {
		return nil, err
	}
	return nil, Rollback(Text(http.StatusBadRequest, err.Error()+"\n"))
}

// sqlTSV is rows as lines of tab-separated values, the column names first.
func sqlTSV(rows *SQLRows) string {
	var b strings.Builder
	b.WriteString(strings.Join(rows.Columns, "\t"))
	b.WriteByte('\n')
	for _, row := range rows.Rows {
		for i, v := range row {
			if i > 0 {
				b.WriteByte('\t')
			}
			switch v := v.(type) {
			case nil:
				b.WriteString("NULL")
			case int64:
				b.WriteString(strconv.FormatInt(v, 10))
			case float64:
				b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			case string:
				b.WriteString(v)
			case []byte:
				fmt.Fprintf(&b, "x'%x'", v)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
