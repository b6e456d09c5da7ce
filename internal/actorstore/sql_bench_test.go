package actorstore

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// sqlTable is a state holding a table of rows of 100 bytes, about kib KiB
// of pages.
func sqlTable(b *testing.B, kib int) map[string][]byte {
	b.Helper()
	t := newTxn(map[string][]byte{}, 4<<20)
	c, err := openSQL(t)
	if err != nil {
		b.Fatal(err)
	}
	defer c.close()
	q := fmt.Sprintf("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"+
		" WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d)"+
		" INSERT INTO t(v) SELECT printf('%%.100d', i) FROM n", kib*1024/110)
	c.file.beginCall(t)
	if err := c.conn.Exec(q); err != nil {
		b.Fatal(err)
	}
	return t.result()
}

// BenchmarkSQLOpen: opening a connection and reading the schema of a
// database of one table, as an actor's first SQL call of a residency (or
// the first after its pages changed under it) does, then closing it.
func BenchmarkSQLOpen(b *testing.B) {
	kv := sqlTable(b, 64)
	b.ReportAllocs()
	for b.Loop() {
		t := newTxn(kv, 4<<20)
		c, err := openSQL(t)
		if err != nil {
			b.Fatal(err)
		}
		c.file.beginCall(t)
		if err := c.conn.Exec("SELECT count(*) FROM sqlite_schema"); err != nil {
			b.Fatal(err)
		}
		c.close()
	}
}

// BenchmarkSQLCall: one point query and one insert on a connection kept
// from event to event (each iteration a new event's storage over the last
// one's result), and the same with a connection opened for each event.
func BenchmarkSQLCall(b *testing.B) {
	for _, kept := range []bool{true, false} {
		name := "kept"
		if !kept {
			name = "per-event"
		}
		b.Run(name, func(b *testing.B) {
			kv := sqlTable(b, 64)
			var s SQL
			defer s.Close()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				t := newTxn(kv, 4<<20)
				db := NewDB(b.Context(), &s, t)
				rows, err := db.Query("SELECT v FROM t WHERE id = ?", i%500+1)
				if err != nil || len(rows.Rows) != 1 {
					b.Fatal(rows, err)
				}
				if _, err := db.Exec("INSERT INTO t(v) VALUES (?)", "x"); err != nil {
					b.Fatal(err)
				}
				kv = t.result()
				if !kept {
					s.Close()
				}
				if i%1000 == 0 { // stay about the same size
					if _, err := db.Exec("DELETE FROM t WHERE id > 600"); err != nil {
						b.Fatal(err)
					}
					kv = t.result()
				}
			}
		})
	}
}

// BenchmarkSQLMemory: the memory a connection takes, with the page cache
// of sqlCacheKiB and with SQLite's default (2,000 KiB), once it has read
// every row of a database of 64 KiB and of 1 MiB. Reported per
// connection: the resident set (the memory of the connection's SQLite is
// mapped outside Go's heap) and Go's heap.
func BenchmarkSQLMemory(b *testing.B) {
	for _, kib := range []int{64, 1024} {
		for _, cache := range []int{sqlCacheKiB, 2000} {
			b.Run(fmt.Sprintf("db=%dKiB/cache=%dKiB", kib, cache), func(b *testing.B) {
				kv := sqlTable(b, kib)
				const n = 50
				for b.Loop() {
					runtime.GC()
					var m0, m1 runtime.MemStats
					runtime.ReadMemStats(&m0)
					rss0 := rss(b)
					conns := make([]*sqlConn, n)
					for i := range conns {
						t := newTxn(kv, 4<<20)
						c, err := openSQL(t)
						if err != nil {
							b.Fatal(err)
						}
						c.file.beginCall(t)
						if err := c.internal(fmt.Sprintf("PRAGMA cache_size=-%d; SELECT sum(length(v)) FROM t", cache)); err != nil {
							b.Fatal(err)
						}
						conns[i] = c
					}
					runtime.GC()
					runtime.ReadMemStats(&m1)
					b.ReportMetric(float64(rss(b)-rss0)/n/1024, "rss-KiB/conn")
					b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/n/1024, "heap-KiB/conn")
					for _, c := range conns {
						c.close()
					}
				}
			})
		}
	}
}

func rss(b *testing.B) int64 {
	s, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Skip("no /proc/self/statm")
	}
	var size, res int64
	fmt.Sscan(strings.TrimSpace(string(s)), &size, &res)
	return res * int64(os.Getpagesize())
}
