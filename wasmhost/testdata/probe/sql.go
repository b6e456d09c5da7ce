package main

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

// sqlScript runs the statements of the body, blocks separated by a blank
// line: the block's first line is "exec <sql>" or "query <sql>", each
// further line an argument ("null", "int 5", "float 1.5", "text abc",
// "blob 00ff" in hex, "bool true", "uint <n>"). It answers a section per
// block: for exec "changes=N last=M", for a query the column names and a
// line per row (each value its type and value); for a statement that
// failed "error: <message>", or "limit: <message>" when it is ErrLimit.
// With ?put=K it puts "sql" under K first; with ?rollback it rolls the
// event back (answering 409); with ?fail it fails the event.
func sqlScript(r *guest.Request) *guest.Response {
	if key, ok := r.Query("put"); ok {
		guest.Storage.Put(key, []byte("sql"))
	}
	var out strings.Builder
	for _, block := range strings.Split(string(r.Body), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		verb, query := cut(lines[0], ' ')
		var args []any
		for _, l := range lines[1:] {
			a, err := sqlArg(l)
			if err != nil {
				return guest.Text(400, err.Error())
			}
			args = append(args, a)
		}
		switch verb {
		case "exec":
			res, err := guest.SQL.Exec(query, args...)
			if err != nil {
				out.WriteString(sqlError(err))
				continue
			}
			out.WriteString("changes=" + strconv.FormatInt(res.RowsAffected, 10) + " last=" + strconv.FormatInt(res.LastInsertID, 10) + "\n")
		case "query":
			rows, err := guest.SQL.Query(query, args...)
			if err != nil {
				out.WriteString(sqlError(err))
				continue
			}
			out.WriteString(strings.Join(rows.Columns, ",") + "\n")
			for _, row := range rows.Rows {
				vals := make([]string, len(row))
				for i, v := range row {
					vals[i] = sqlValue(v)
				}
				out.WriteString("| " + strings.Join(vals, " | ") + "\n")
			}
		default:
			return guest.Text(400, "bad block "+lines[0])
		}
	}
	if _, ok := r.Query("fail"); ok {
		return nil
	}
	resp := guest.Text(200, out.String())
	if _, ok := r.Query("rollback"); ok {
		resp.Status = 409
		return guest.Rollback(resp)
	}
	return resp
}

func sqlError(err error) string {
	var e *guest.SQLError
	if !errors.As(err, &e) {
		return "not an SQLError: " + err.Error() + "\n"
	}
	if errors.Is(err, guest.ErrLimit) {
		return "limit: " + e.Message + "\n"
	}
	return "error: " + e.Message + "\n"
}

func sqlArg(l string) (any, error) {
	kind, v := cut(l, ' ')
	switch kind {
	case "null":
		return nil, nil
	case "int":
		return strconv.ParseInt(v, 10, 64)
	case "uint":
		return strconv.ParseUint(v, 10, 64)
	case "float":
		return strconv.ParseFloat(v, 64)
	case "text":
		return v, nil
	case "blob":
		return hex.DecodeString(v)
	case "bool":
		return v == "true", nil
	case "chan":
		return make(chan int), nil // not an SQL value
	}
	return nil, errors.New("bad argument " + l)
}

func sqlValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case int64:
		return "int " + strconv.FormatInt(v, 10)
	case float64:
		return "float " + strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return "text " + strconv.Quote(v)
	case []byte:
		if len(v) > 16 {
			return "blob of " + strconv.Itoa(len(v)) + " bytes"
		}
		return "blob " + hex.EncodeToString(v) + " (" + strconv.Itoa(len(v)) + ")"
	}
	return "?"
}
