package sqlitestore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ncruces/go-sqlite3"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// reader is a connection reads use, with its statements. One read uses
// it at a time; the Store keeps the idle ones.
type reader struct {
	c                   *sqlite3.Conn
	get, after, fromPre *sqlite3.Stmt
}

// getSQL reads an object's row and the chunks ?2 to ?3 of its body, in
// order, in one statement, so from one snapshot of the database.
var getSQL = fmt.Sprintf(`SELECT o.etag, o.size, o.id, o.sum, o.body, c.rowid, c.sum, c.data
FROM objects AS o LEFT JOIN chunks AS c
	ON o.id > 0 AND c.rowid BETWEEN (o.id << %[1]d) + ?2 AND (o.id << %[1]d) + ?3
WHERE o.key = ?1
ORDER BY c.rowid`, chunkShift)

func (s *Store) openReader() (*reader, error) {
	c, err := s.openConn()
	if err != nil {
		return nil, err
	}
	r := &reader{c: c}
	if err := c.Exec("PRAGMA query_only = 1"); err != nil {
		r.close()
		return nil, fmt.Errorf("sqlitestore: %s: %w", s.path, err)
	}
	for _, p := range []struct {
		st  **sqlite3.Stmt
		sql string
	}{
		{&r.get, getSQL},
		{&r.after, "SELECT key, etag, size FROM objects WHERE key > ?1 AND key < ?2 ORDER BY key LIMIT ?3"},
		{&r.fromPre, "SELECT key, etag, size FROM objects WHERE key >= ?1 AND key < ?2 ORDER BY key LIMIT ?3"},
	} {
		st, _, err := c.PrepareFlags(p.sql, sqlite3.PREPARE_PERSISTENT)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("sqlitestore: %s: %w", s.path, err)
		}
		*p.st = st
	}
	return r, nil
}

func (r *reader) close() error {
	for _, st := range slices.Collect(r.c.Stmts()) { // Close changes the list
		st.Close()
	}
	return r.c.Close()
}

// reader takes an idle read connection, opens one if fewer than
// maxReaders are open, or waits for one. The connection is interrupted
// when ctx ends; putReader gives it back.
func (s *Store) reader(ctx context.Context) (*reader, error) {
	var r *reader
	select {
	case r = <-s.readers:
	default:
		s.readersMu.Lock()
		if s.nreaders < s.maxReaders {
			s.nreaders++
			s.readersMu.Unlock()
			var err error
			if r, err = s.openReader(); err != nil {
				s.readersMu.Lock()
				s.nreaders--
				s.readersMu.Unlock()
				return nil, err
			}
			break
		}
		s.readersMu.Unlock()
		select {
		case r = <-s.readers:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.c.SetInterrupt(ctx)
	return r, nil
}

func (s *Store) putReader(r *reader) {
	r.c.SetInterrupt(context.Background())
	if s.closed.Load() {
		r.close()
		return
	}
	s.readers <- r // never blocks: it holds maxReaders
}

// Get reads an object; see ownership.Bucket. It checks the object's row
// and every chunk of its body against their checksums.
func (s *Store) Get(ctx context.Context, key string) (ownership.Object, error) {
	if err := ownership.ValidateKey(key); err != nil {
		return ownership.Object{}, fmt.Errorf("sqlitestore: get: %w", err)
	}
	etag, body, err := s.read(ctx, "get", key, 0, 1<<63-1)
	if err != nil {
		return ownership.Object{}, err
	}
	return ownership.Object{Body: body, ETag: etag.ETag()}, nil
}

// GetRange reads the bytes [off, off+n) of an object; see
// ownership.RangeReader. A body kept in chunks is read only in the chunks
// that hold the range (about 32 KiB each), each checked against its
// checksum; a small body, kept in its row, is read and checked whole.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (ownership.Object, error) {
	if err := ownership.ValidateKey(key); err != nil {
		return ownership.Object{}, fmt.Errorf("sqlitestore: get range: %w", err)
	}
	if err := ownership.ValidateRange(off, n); err != nil {
		return ownership.Object{}, fmt.Errorf("sqlitestore: get range of %q: %w", key, err)
	}
	etag, body, err := s.read(ctx, "get range", key, off, n)
	if err != nil {
		return ownership.Object{}, err
	}
	return ownership.Object{Body: body, ETag: etag.ETag()}, nil
}

// read reads the bytes [off, off+n) of the object at key (see
// ownership.RangeOf), and its ETag: for a body kept in chunks, only the
// chunks that hold them; for a body kept in its row, the row. Everything
// it returns is checked, and copied once, from SQLite's memory to the
// body it returns.
func (s *Store) read(ctx context.Context, op, key string, off, n int64) (etag etagBits, body []byte, err error) {
	if err := ctx.Err(); err != nil {
		return etag, nil, unknown(op, key, err)
	}
	if s.closed.Load() {
		return etag, nil, ErrClosed
	}
	r, err := s.reader(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return etag, nil, unknown(op, key, err)
		}
		return etag, nil, s.readErr(op, key, err)
	}
	defer s.putReader(r)
	last := off + n - 1
	if last < off { // past the largest int64
		last = 1<<63 - 1
	}
	st := r.get
	if err := bindAll(st, []byte(key), min(off/chunkSize, maxChunks), min(last/chunkSize, maxChunks-1)); err != nil {
		return etag, nil, s.readErr(op, key, err)
	}
	defer st.Reset()
	damaged := func(format string, args ...any) error {
		return fmt.Errorf("sqlitestore: %s %q: %w: %s", op, key, ownership.ErrDamaged, fmt.Sprintf(format, args...))
	}
	if !st.Step() {
		if err := st.Err(); err != nil {
			return etag, nil, s.readErr(op, key, err)
		}
		return etag, nil, fmt.Errorf("sqlitestore: %s %q: %w", op, key, ownership.ErrNotFound)
	}
	rawETag := st.ColumnRawBlob(0)
	if len(rawETag) != etagBytes {
		return etag, nil, damaged("its row holds an ETag of %d bytes", len(rawETag))
	}
	copy(etag[:], rawETag)
	size, id, sum := st.ColumnInt64(1), st.ColumnInt64(2), uint32(st.ColumnInt64(3))
	inline := st.ColumnRawBlob(4)
	if rowSum(key, etag[:], size, id, inline) != sum {
		return etag, nil, damaged("its row fails its checksum")
	}
	lo, hi := ownership.RangeOf(off, n, size)
	body = make([]byte, hi-lo)
	if id == 0 {
		if int64(len(inline)) != size {
			return etag, nil, damaged("its row holds %d bytes of a body of %d", len(inline), size)
		}
		copy(body, inline[lo:hi])
		return etag, body, nil
	}
	if lo == hi {
		return etag, body, nil
	}
	// The chunks that hold [lo, hi), in order; each is checked whole.
	want, end := lo/chunkSize, (hi-1)/chunkSize
	for row := true; row && st.ColumnType(5) != sqlite3.NULL && want <= end; row = st.Step() {
		i := st.ColumnInt64(5) - id<<chunkShift
		chunk := st.ColumnRawBlob(7)
		at := i * chunkSize // where the chunk starts in the body
		switch {
		case i != want:
			return etag, nil, damaged("chunk %d where chunk %d belongs", i, want)
		case int64(len(chunk)) != min(chunkSize, size-at):
			return etag, nil, damaged("chunk %d holds %d bytes, want %d", i, len(chunk), min(chunkSize, size-at))
		case chunkSum(i, chunk) != uint32(st.ColumnInt64(6)):
			return etag, nil, damaged("chunk %d fails its checksum", i)
		}
		copy(body[max(at, lo)-lo:], chunk[max(lo-at, 0):min(int64(len(chunk)), hi-at)])
		want++
	}
	if err := st.Err(); err != nil {
		return etag, nil, s.readErr(op, key, err)
	}
	if want <= end {
		return etag, nil, damaged("chunk %d is missing", want)
	}
	return etag, body, nil
}

// Put writes an object under a condition; see ownership.Bucket. It joins
// a group commit (commit.go) and returns once its batch is committed.
func (s *Store) Put(ctx context.Context, key string, body []byte, cond ownership.Condition) (ownership.ETag, error) {
	if err := ownership.ValidateKey(key); err != nil {
		return "", fmt.Errorf("sqlitestore: put: %w", err)
	}
	if cond.Kind > ownership.ReplaceOnly {
		return "", fmt.Errorf("sqlitestore: put %q with %s: %w", key, cond, errBadCondition)
	}
	if len(body) > maxBodyLen {
		return "", fmt.Errorf("sqlitestore: put %q: body of %d bytes, over %d", key, len(body), maxBodyLen)
	}
	w := &write{ctx: ctx, key: key, body: body, cond: cond, etag: newETagBits()}
	if len(body) > inlineMax {
		// The chunks' sums are taken here, on the caller's goroutine,
		// not in the batch, which holds the write lock.
		w.sums = make([]uint32, (len(body)+chunkSize-1)/chunkSize)
		for i := range w.sums {
			w.sums[i] = chunkSum(int64(i), body[i*chunkSize:min(len(body), (i+1)*chunkSize)])
		}
	}
	if err := s.submit(ctx, w); err != nil {
		return "", err
	}
	return w.etag.ETag(), nil
}

// Delete removes an object under a condition; see ownership.Bucket. It
// commits like a Put; an unconditional delete of a missing key writes
// nothing and lands.
func (s *Store) Delete(ctx context.Context, key string, cond ownership.Condition) error {
	if err := ownership.ValidateKey(key); err != nil {
		return fmt.Errorf("sqlitestore: delete: %w", err)
	}
	if cond.Kind != ownership.Unconditional && cond.Kind != ownership.ReplaceOnly {
		return fmt.Errorf("sqlitestore: delete %q with %s: %w", key, cond, errBadCondition)
	}
	w := &write{ctx: ctx, del: true, key: key, cond: cond}
	return s.submit(ctx, w)
}

func (s *Store) submit(ctx context.Context, w *write) error {
	if err := ctx.Err(); err != nil {
		return unknown(w.op(), w.key, err)
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return s.commit(ctx, w)
}

// List returns one page of keys; see ownership.Bucket. Pages hold at most
// ownership.DefaultListLimit keys, as S3 pages do, read from one snapshot
// of the database.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) (ownership.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return ownership.ListPage{}, unknown("list", prefix, err)
	}
	if s.closed.Load() {
		return ownership.ListPage{}, ErrClosed
	}
	if limit <= 0 || limit > ownership.DefaultListLimit {
		limit = ownership.DefaultListLimit
	}
	r, err := s.reader(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ownership.ListPage{}, unknown("list", prefix, err)
		}
		return ownership.ListPage{}, s.readErr("list", prefix, err)
	}
	defer s.putReader(r)
	// The keys from the later of prefix and startAfter on, below the
	// first string after every string with the prefix.
	st, from := r.fromPre, prefix
	if startAfter >= prefix {
		st, from = r.after, startAfter
	}
	if err := bindAll(st, []byte(from), prefixEnd(prefix), int64(limit+1)); err != nil {
		return ownership.ListPage{}, s.readErr("list", prefix, err)
	}
	defer st.Reset()
	var page ownership.ListPage
	for st.Step() {
		if len(page.Entries) == limit {
			page.Truncated = true
			break
		}
		page.Entries = append(page.Entries, ownership.ListEntry{
			Key: string(st.ColumnRawBlob(0)), ETag: etagOf(st.ColumnRawBlob(1)), Size: st.ColumnInt64(2),
		})
	}
	if err := st.Err(); err != nil {
		return ownership.ListPage{}, s.readErr("list", prefix, err)
	}
	return page, nil
}

// prefixEnd is the least byte string above every string that starts with
// prefix. Keys are UTF-8, which never holds the byte 0xff, so a single
// 0xff is above every key.
func prefixEnd(prefix string) []byte {
	p := strings.TrimRight(prefix, "\xff")
	if p == "" {
		return []byte{0xff}
	}
	end := []byte(p)
	end[len(end)-1]++
	return end
}

// bindAll binds args (int64 or []byte) to st's parameters 1, 2, ...
func bindAll(st *sqlite3.Stmt, args ...any) error {
	for i, a := range args {
		var err error
		switch a := a.(type) {
		case int64:
			err = st.BindInt64(i+1, a)
		case []byte:
			err = st.BindBlob(i+1, a)
		default:
			panic(fmt.Sprintf("sqlitestore: cannot bind %T", a))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
