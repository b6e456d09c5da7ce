package actorstore

import (
	"fmt"

	"github.com/ncruces/go-sqlite3"

	"github.com/wasmkeep/wasmkeep/actors"
)

// Statement runs query, one statement, with args as Exec does, and
// returns both what it changed, as Exec would, and the rows it yields, as
// Query would: for a caller that cannot tell which of the two a statement
// is, such as a wasm guest's host call (wasmhost), and that must bound
// what it holds. The rows are read into memory up to maxSize bytes,
// counting 8 for each column and each value, plus a column's name, a
// number's 8 bytes and a text's or a blob's length; past that Statement
// fails, and what the statement wrote (INSERT ... RETURNING) is undone.
// Other errors are Exec's.
func (db *DB) Statement(query string, maxSize int, args ...any) (actors.SQLResult, *actors.SQLRows, error) {
	var (
		res  actors.SQLResult
		rows *actors.SQLRows
	)
	err := db.prepared(query, func(c *sqlConn, stmt *sqlite3.Stmt, tail string, changes func() actors.SQLResult) error {
		if tail != "" {
			return errMultiple
		}
		defer stmt.ClearBindings() // let go of the arguments
		if err := bindAll(stmt, args); err != nil {
			return err
		}
		// A statement that writes and yields rows has written them all by
		// its first row: cutting its rows short must undo it.
		const mark, keep, undo = "SAVEPOINT wasmkeep_statement", "RELEASE wasmkeep_statement",
			"ROLLBACK TO wasmkeep_statement; RELEASE wasmkeep_statement"
		guard := !stmt.ReadOnly() && stmt.ColumnCount() > 0
		if guard {
			if err := c.internal(mark); err != nil {
				return err
			}
		}
		var err error
		rows, err = readRows(stmt, maxSize)
		_ = stmt.Reset() // (its error is the step's, which readRows has)
		if guard {
			if err == nil {
				// A release can fail (a deferred foreign key): then undo.
				err = c.internal(keep)
			}
			if err != nil {
				_ = c.internal(undo)
			}
		}
		if err != nil {
			return err
		}
		res = changes()
		return nil
	})
	if err != nil {
		return actors.SQLResult{}, nil, err
	}
	return res, rows, nil
}

// readRows steps stmt to its end and returns its rows, failing once they
// pass maxSize bytes (counted as Statement says).
func readRows(stmt *sqlite3.Stmt, maxSize int) (*actors.SQLRows, error) {
	n := stmt.ColumnCount()
	rows := &actors.SQLRows{Columns: make([]string, n), Rows: [][]any{}}
	size := 0
	for i := range n {
		rows.Columns[i] = stmt.ColumnName(i)
		size += 8 + len(rows.Columns[i])
	}
	tooLarge := func() error { return fmt.Errorf("the rows are over %d bytes", maxSize) }
	if size > maxSize {
		return nil, tooLarge()
	}
	for stmt.Step() {
		row := make([]any, n)
		for i := range n {
			size += 8
			switch stmt.ColumnType(i) {
			case sqlite3.INTEGER:
				row[i], size = stmt.ColumnInt64(i), size+8
			case sqlite3.FLOAT:
				row[i], size = stmt.ColumnFloat(i), size+8
			case sqlite3.TEXT:
				// Raw: the size is checked before the copy.
				v := stmt.ColumnRawText(i)
				if size += len(v); size <= maxSize {
					row[i] = string(v)
				}
			case sqlite3.BLOB:
				v := stmt.ColumnRawBlob(i)
				if size += len(v); size <= maxSize {
					row[i] = append([]byte{}, v...)
				}
			}
			if size > maxSize {
				return nil, tooLarge()
			}
		}
		rows.Rows = append(rows.Rows, row)
	}
	if err := stmt.Err(); err != nil {
		return nil, err
	}
	return rows, nil
}
