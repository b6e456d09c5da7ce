package sqlitestore

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ncruces/go-sqlite3"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// writer is the connection a Store writes through, with its statements.
// It belongs to whoever holds the Store's write lock.
type writer struct {
	c *sqlite3.Conn

	begin, commit, rollback *sqlite3.Stmt
	cur, upsert, delObj     *sqlite3.Stmt
	delChunks, insChunk     *sqlite3.Stmt
	maxChunk                *sqlite3.Stmt

	// next is the chunk id the next chunked body of the batch takes; 0
	// until the batch first needs one.
	next int64
}

// openWriter opens the writer's connection: it sets the database up (the
// caller holds the write lock), makes every commit durable before it
// returns (synchronous), and hands checkpoints to the checkpointer.
func (s *Store) openWriter() (*writer, error) {
	c, err := s.openConn()
	if err != nil {
		return nil, err
	}
	w := &writer{c: c}
	if err := w.setUp(s); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *writer) setUp(s *Store) error {
	if err := setUp(w.c, s.path); err != nil {
		return err
	}
	if err := w.c.Exec(fmt.Sprintf("PRAGMA journal_size_limit = %d", walLimit)); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", s.path, err)
	}
	// A WAL hook replaces SQLite's automatic checkpoints, which would
	// run on this connection, inside a commit.
	w.c.WALHook(func(_ *sqlite3.Conn, _ string, pages int) error {
		if pages >= checkpointPages {
			select {
			case s.checkpoint <- struct{}{}:
			default:
			}
		}
		return nil
	})
	for _, p := range []struct {
		st  **sqlite3.Stmt
		sql string
	}{
		{&w.begin, "BEGIN IMMEDIATE"},
		{&w.commit, "COMMIT"},
		{&w.rollback, "ROLLBACK"},
		{&w.cur, "SELECT etag, id FROM objects WHERE key = ?1"},
		{&w.upsert, "INSERT OR REPLACE INTO objects (key, etag, size, id, sum, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
		{&w.delObj, "DELETE FROM objects WHERE key = ?1"},
		{&w.delChunks, "DELETE FROM chunks WHERE rowid BETWEEN ?1 AND ?2"},
		{&w.insChunk, "INSERT INTO chunks (rowid, sum, data) VALUES (?1, ?2, ?3)"},
		{&w.maxChunk, "SELECT coalesce(max(rowid), 0) FROM chunks"},
	} {
		st, _, err := w.c.PrepareFlags(p.sql, sqlite3.PREPARE_PERSISTENT)
		if err != nil {
			return fmt.Errorf("sqlitestore: %s: %w", s.path, err)
		}
		*p.st = st
	}
	return nil
}

func (w *writer) close() error {
	var errs []error
	for _, st := range slices.Collect(w.c.Stmts()) { // Close changes the list
		errs = append(errs, st.Close())
	}
	return errors.Join(append(errs, w.c.Close())...)
}

// version is what a key holds when a write of the batch looks.
type version struct {
	present bool
	etag    []byte
	id      int64
}

// current reads the version key holds in the writer's transaction, which
// includes the earlier writes of the batch.
func (w *writer) current(key string) (version, error) {
	st := w.cur
	if err := st.BindBlob(1, []byte(key)); err != nil {
		return version{}, err
	}
	var v version
	if st.Step() {
		v = version{present: true, etag: st.ColumnBlob(0, nil), id: st.ColumnInt64(1)}
	}
	return v, st.Reset()
}

// apply checks a claimed write's condition and, if it holds, writes it in
// the open transaction. A refusal is an error that wraps
// ownership.ErrPrecondition and leaves the transaction as it was; any
// other error comes from SQLite, and the caller rolls the transaction
// back.
func (w *writer) apply(x *write) error {
	cur, err := w.current(x.key)
	if err != nil {
		return err
	}
	if err := admit(x, cur); err != nil {
		return err
	}
	if x.del && !cur.present {
		return nil // an unconditional delete of a missing key lands, as in S3
	}
	if cur.present && cur.id > 0 {
		base := cur.id << chunkShift
		if err := run(w.delChunks, int64(base), int64(base+maxChunks-1)); err != nil {
			return err
		}
	}
	if x.del {
		return run(w.delObj, []byte(x.key))
	}
	var id int64
	inline := x.body
	if len(x.body) > inlineMax {
		if id, err = w.nextID(); err != nil {
			return err
		}
		inline = []byte{}
		for i, sum := range x.sums {
			data := x.body[i*chunkSize : min(len(x.body), (i+1)*chunkSize)]
			if err := run(w.insChunk, id<<chunkShift+int64(i), int64(sum), data); err != nil {
				return err
			}
		}
	}
	if inline == nil {
		inline = []byte{} // an empty body, not NULL
	}
	sum := rowSum(x.key, x.etag[:], int64(len(x.body)), id, inline)
	return run(w.upsert, []byte(x.key), x.etag[:], int64(len(x.body)), id, int64(sum), inline)
}

// nextID is a chunk id no chunk of the database has: one past the
// highest, so an id may come back once its object is gone (a reader's
// snapshot holds the rows and the chunks of one moment, so it never mixes
// the two).
func (w *writer) nextID() (int64, error) {
	if w.next == 0 {
		st := w.maxChunk
		if st.Step() {
			w.next = st.ColumnInt64(0)>>chunkShift + 1
		}
		if err := st.Reset(); err != nil {
			w.next = 0
			return 0, err
		}
	}
	id := w.next
	w.next++
	return id, nil
}

// admit checks a write's condition against the version cur.
func admit(x *write, cur version) error {
	switch x.cond.Kind {
	case ownership.CreateOnly:
		if cur.present {
			return fmt.Errorf("sqlitestore: %s %q (%s): key exists: %w", x.op(), x.key, x.cond, ownership.ErrPrecondition)
		}
	case ownership.ReplaceOnly:
		if !cur.present {
			return fmt.Errorf("sqlitestore: %s %q (%s): key absent: %w", x.op(), x.key, x.cond, ownership.ErrPrecondition)
		}
		if !matches(cur.etag, x.cond.ETag) {
			return fmt.Errorf("sqlitestore: %s %q (%s): holds %s: %w", x.op(), x.key, x.cond, etagOf(cur.etag), ownership.ErrPrecondition)
		}
	}
	return nil
}

func etagOf(b []byte) ownership.ETag {
	var e etagBits
	copy(e[:], b)
	return e.ETag()
}

// run binds args (int64 or []byte) to st and runs it.
func run(st *sqlite3.Stmt, args ...any) error {
	if err := bindAll(st, args...); err != nil {
		return err
	}
	return st.Exec()
}
