package actorstore

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"io"
	"sync"
	"sync/atomic"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"

	"github.com/wasmkeep/wasmkeep/actors"
)

// An actor's SQL database is one SQLite file kept in the node's keys of the
// actor's storage (nodeStorage), so that its pages are written, counted
// and committed with the event's other writes. The layout:
//
//	NodePrefix+"sql/"+<n: 8 bytes, big-endian>
//	    page n of the file (n ≥ 1): its bytes [(n-1)·4096, n·4096); the
//	    last page may be shorter, and the file ends where it ends
//	NodePrefix+"sql-stamp"
//	    16 bytes that change with every SQL call that writes: the
//	    connection's 8 random bytes and its count of writing calls
//
// The node sets SQLite's page size to sqlPageSize, so one key is one
// SQLite page; a database whose page size differs is still kept right
// (a larger page spans keys, a smaller one shares a key), only less
// tidily. A page is far below MaxValueLen.
//
// The stamp is how a connection kept between events knows that the pages
// are still those it last left (sql.go): any change of the pages that is
// not its own (an event's writes discarded, a commit refused and the state
// read again, a later hold's state, DeleteAll) comes with a stamp it did
// not write. The stamp is written before the first page a call writes, so
// pages never change under an old stamp.
const (
	sqlPagePrefix = actors.NodePrefix + "sql/"
	sqlStampKey   = actors.NodePrefix + "sql-stamp"
	sqlPageSize   = 4096
	sqlStampLen   = 16
	sqlVFSName    = "wasmkeep"
)

// sqlPageKey is the key of page n.
func sqlPageKey(n int64) string {
	var b [len(sqlPagePrefix) + 8]byte
	copy(b[:], sqlPagePrefix)
	binary.BigEndian.PutUint64(b[len(sqlPagePrefix):], uint64(n))
	return string(b[:])
}

// sqlFileSize is the size of the file kept in st: where its last page
// ends. It reads that page alone.
func sqlFileSize(st nodeStorage) int64 {
	last := st.nodeList(actors.ListOptions{Prefix: sqlPagePrefix, Reverse: true, Limit: 1})
	if len(last) == 0 {
		return 0
	}
	n := int64(binary.BigEndian.Uint64([]byte(last[0].Key[len(sqlPagePrefix):])))
	return (n-1)*sqlPageSize + int64(len(last[0].Value))
}

// sqlVFS is the VFS of every actor's database. SQLite opens through it the
// main database file, which is the sqlFile the connection was opened for,
// and temporary files (sorts, statement journals), which live in memory.
// Nothing else is opened: the rollback journal is in memory (journal_mode
// MEMORY, see sql.go), and WAL is never on.
type sqlVFS struct{}

// sqlOpening hands each connection's file to the VFS's Open: SQLite opens
// the database file by name inside sqlite3.Open. An entry lives only for
// that call, under a name used once; no two actors ever share one.
var (
	sqlOpening  sync.Map // name → *sqlFile
	sqlNames    atomic.Uint64
	sqlRegister = sync.OnceFunc(func() { vfs.Register(sqlVFSName, sqlVFS{}) })
)

func (sqlVFS) Open(name string, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	const temporary = vfs.OPEN_TEMP_DB | vfs.OPEN_TRANSIENT_DB | vfs.OPEN_TEMP_JOURNAL | vfs.OPEN_SUBJOURNAL
	switch {
	case flags&vfs.OPEN_MAIN_DB != 0:
		if f, ok := sqlOpening.LoadAndDelete(name); ok {
			return f.(*sqlFile), flags, nil
		}
	case flags&temporary != 0:
		return &vfsutil.SliceFile{}, flags | vfs.OPEN_MEMORY, nil
	}
	return nil, flags, sqlite3.CANTOPEN
}

// Delete and Access are asked only about journals, which never exist.
func (sqlVFS) Delete(string, bool) error { return sqlite3.IOERR_DELETE_NOENT }

func (sqlVFS) Access(string, vfs.AccessFlag) (bool, error) { return false, nil }

func (sqlVFS) FullPathname(name string) (string, error) { return name, nil }

// sqlFile is the database file of one connection, kept in st: the storage
// of the event that is running (sql.go binds it at each call).
//
// Invariant: size is the size of the file kept in st, as long as only
// this file writes the pages (the connection checks the stamp before each
// call, and finds the size again when it does not match).
type sqlFile struct {
	st   nodeStorage // nil once detached: reads find nothing, writes go nowhere
	size int64
	lock vfs.LockLevel

	id      [8]byte  // random: this connection's part of its stamps
	calls   uint64   // writing calls so far
	known   []byte   // the stamp of the pages as this file last left them; nil: none
	stamped bool     // this call has written its stamp
	refused error    // the refusal (wrapping ErrLimit) of this call's write, if any
	scratch [16]byte // the next stamp
}

// newSQLFile is the file kept in st, as st holds it now.
func newSQLFile(st nodeStorage) *sqlFile {
	f := &sqlFile{st: st, size: sqlFileSize(st), known: sqlStampOf(st)}
	_, _ = rand.Read(f.id[:]) // never fails (crypto/rand)
	return f
}

// sqlStampOf is the stamp in st, copied; nil if there is none.
func sqlStampOf(st nodeStorage) []byte {
	if v, ok := st.nodeGet(sqlStampKey); ok {
		return bytes.Clone(v)
	}
	return nil
}

// current says whether st holds the pages as f last left them.
func (f *sqlFile) current(st nodeStorage) bool {
	v, ok := st.nodeGet(sqlStampKey)
	return ok == (f.known != nil) && bytes.Equal(v, f.known)
}

// beginCall starts one SQL call of the connection, on st.
func (f *sqlFile) beginCall(st nodeStorage) {
	f.st, f.stamped, f.refused = st, false, nil
}

// stamp writes, before the first page this call changes, a stamp no other
// call wrote. Should the stamp not fit in the state's bound, the write is
// refused, and nothing of the call changes the pages.
func (f *sqlFile) stamp() error {
	if f.stamped {
		return nil
	}
	f.calls++
	copy(f.scratch[:8], f.id[:])
	binary.BigEndian.PutUint64(f.scratch[8:], f.calls)
	if err := f.st.nodePut(sqlStampKey, f.scratch[:]); err != nil {
		f.refused = err
		return sqlite3.FULL
	}
	f.known = append(f.known[:0], f.scratch[:]...)
	f.stamped = true
	return nil
}

func (f *sqlFile) ReadAt(b []byte, off int64) (int, error) {
	if f.st == nil {
		return 0, io.EOF
	}
	n := 0
	for n < len(b) {
		pos := off + int64(n)
		if pos >= f.size {
			clear(b[n:])
			return n, io.EOF
		}
		page, in := pos/sqlPageSize+1, int(pos%sqlPageSize)
		m := min(len(b)-n, sqlPageSize-in, int(f.size-pos))
		v, _ := f.st.nodeGet(sqlPageKey(page))
		c := 0
		if in < len(v) {
			c = copy(b[n:n+m], v[in:])
		}
		clear(b[n+c : n+m]) // a page shorter than the file says: zeros
		n += m
	}
	return n, nil
}

func (f *sqlFile) WriteAt(b []byte, off int64) (int, error) {
	if f.st == nil {
		return len(b), nil
	}
	if err := f.stamp(); err != nil {
		return 0, err
	}
	n := 0
	for n < len(b) {
		pos := off + int64(n)
		page, in := pos/sqlPageSize+1, int(pos%sqlPageSize)
		m := min(len(b)-n, sqlPageSize-in)
		key := sqlPageKey(page)
		v := b[n : n+m]
		if in > 0 || (m < sqlPageSize && pos+int64(m) < f.size) {
			// Part of a page whose other bytes stay (pages smaller than
			// sqlPageSize, the header): read, change, write.
			old, _ := f.st.nodeGet(key)
			v = make([]byte, max(len(old), in+m))
			copy(v, old)
			copy(v[in:], b[n:n+m])
		}
		if err := f.st.nodePut(key, v); err != nil {
			f.refused = err
			return n, sqlite3.FULL
		}
		n += m
		f.size = max(f.size, pos+int64(m))
	}
	return n, nil
}

func (f *sqlFile) Truncate(size int64) error {
	if f.st == nil || size >= f.size {
		return nil // SQLite grows a file by writing, never by Truncate
	}
	if err := f.stamp(); err != nil {
		return err
	}
	keep := (size + sqlPageSize - 1) / sqlPageSize // pages that stay
	last := (f.size + sqlPageSize - 1) / sqlPageSize
	for n := keep + 1; n <= last; n++ {
		f.st.nodeDelete(sqlPageKey(n))
	}
	if r := int(size % sqlPageSize); r != 0 {
		key := sqlPageKey(keep)
		if old, _ := f.st.nodeGet(key); len(old) > r {
			if err := f.st.nodePut(key, old[:r]); err != nil { // smaller: always fits
				f.refused = err
				return sqlite3.FULL
			}
		}
	}
	f.size = size
	return nil
}

func (f *sqlFile) Size() (int64, error) { return f.size, nil }

// Sync does nothing: the pages are durable when the event's commit is.
func (*sqlFile) Sync(vfs.SyncFlag) error { return nil }

// Locks only record their level: one connection at a time uses the file.
func (f *sqlFile) Lock(l vfs.LockLevel) error {
	f.lock = max(f.lock, l)
	return nil
}

func (f *sqlFile) Unlock(l vfs.LockLevel) error {
	f.lock = min(f.lock, l)
	return nil
}

func (f *sqlFile) CheckReservedLock() (bool, error) { return f.lock >= vfs.LOCK_RESERVED, nil }

func (f *sqlFile) LockState() vfs.LockLevel { return f.lock }

func (*sqlFile) SectorSize() int { return sqlPageSize }

func (*sqlFile) DeviceCharacteristics() vfs.DeviceCharacteristic {
	return vfs.IOCAP_SAFE_APPEND | vfs.IOCAP_POWERSAFE_OVERWRITE | vfs.IOCAP_SUBPAGE_READ
}

// Close detaches the file; the storage is the event's, and stays.
func (f *sqlFile) Close() error {
	f.st = nil
	return nil
}

var _ vfs.FileLockState = (*sqlFile)(nil)
