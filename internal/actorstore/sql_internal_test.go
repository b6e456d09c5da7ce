package actorstore

import (
	"context"
	"fmt"
	"testing"
)

// A connection keeps its last sqlStmtCache statements compiled, those
// used again staying, and closes cleanly with them.
func TestSQLStatementCache(t *testing.T) {
	var s SQL
	st := newTxn(map[string][]byte{}, testMaxState)
	db := NewDB(context.Background(), &s, st)
	if _, err := db.Exec("CREATE TABLE t(v INTEGER)"); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		for i := range 2 * sqlStmtCache {
			if _, err := db.Exec("INSERT INTO t VALUES (?)", i); err != nil {
				t.Fatal(err)
			}
			rows, err := db.Query(fmt.Sprintf("SELECT count(*) FROM t WHERE v = %d", i))
			if err != nil {
				t.Fatal(err)
			}
			if got := rows.Rows[0][0]; got != int64(round+1) {
				t.Fatalf("round %d, value %d: count %v", round, i, got)
			}
		}
	}
	c := s.c
	n := len(c.stmts)
	if n != sqlStmtCache || c.stmts[n-2].query != "INSERT INTO t VALUES (?)" ||
		c.stmts[n-1].query != fmt.Sprintf("SELECT count(*) FROM t WHERE v = %d", 2*sqlStmtCache-1) {
		t.Fatalf("cache of %d: %v", n, c.stmts)
	}
	if err := c.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}
