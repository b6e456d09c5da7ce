package guest

import (
	"errors"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// Field is one header: a name and one value. A header with several values
// appears as several fields with the same name.
type Field struct {
	Name  string
	Value string
}

// Request is one HTTP event.
type Request struct {
	Method string
	// Path is what follows /actor/<class>/<name> in the URL path ("" or
	// "/..."), unescaped.
	Path string
	// RawQuery is the query string, without the '?', still escaped.
	RawQuery string
	// Header holds the request's headers, names in canonical form
	// ("Content-Type"), sorted by name.
	Header []Field
	Body   []byte
}

// HeaderValue returns the first value of the header name (ASCII
// case-insensitive), or "".
func (r *Request) HeaderValue(name string) string {
	for _, f := range r.Header {
		if equalFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// Query returns the first value of the query parameter key, and whether it
// is present. Both key and value are compared and returned unescaped
// ('+' is a space, %XX a byte).
func (r *Request) Query(key string) (string, bool) {
	q := r.RawQuery
	for q != "" {
		var part string
		part, q, _ = cut(q, '&')
		k, v, _ := cut(part, '=')
		if unescape(k) == key {
			return unescape(v), true
		}
	}
	return "", false
}

// Response is the answer to a Request. Status 0 means 200.
type Response struct {
	Status int
	Header []Field
	Body   []byte
}

// Text returns a text/plain response.
func Text(status int, body string) *Response {
	return &Response{
		Status: status,
		Header: []Field{{Name: "Content-Type", Value: "text/plain; charset=utf-8"}},
		Body:   []byte(body),
	}
}

// handler is the registered request handler. Invariant: set only by
// package initialisers, before the host sends the first event.
var handler func(*Request) *Response

// Handle registers h as the handler of HTTP events. Call it once, from an
// init function. A handler that returns nil fails its event with 500.
func Handle(h func(*Request) *Response) {
	if handler != nil {
		panic("guest: Handle called twice")
	}
	handler = h
}

// Rollback rolls the running event back and returns resp, for the request
// handler to return: the client gets resp (status, headers and body), and
// the event's storage writes and what it queued on sockets (sends,
// broadcasts, closes) are discarded, as if it had failed, since they could
// tell of the discarded writes. It is no failure: the guest is kept.
// What was done at once stays (SetAttachment, SetAutoResponse, and the
// writes committed before a Call the event made); a Call after Rollback
// fails with ErrBadCall, since it would commit the event's writes first.
// Rollback cannot be undone. Nor does it undo what the event changed in
// the guest's memory (package variables, Actor.Value): drop or mend
// what caches the discarded writes. A nil resp, or Accept's, fails the
// event with 500. In a socket handler, call Rollback(nil) and return nil:
// the event's writes and output are discarded, the socket stays open.
func Rollback(resp *Response) *Response {
	eventRollback()
	return resp
}

// ErrLimit is returned by Put and Batch when a storage limit refuses a
// write: an empty or too long key, a too large value or state, too many ops.
// An *SQLError of a statement past the state's bound is ErrLimit too
// (errors.Is).
var ErrLimit = errors.New("guest: storage limit")

// ErrListOptions is returned by List for invalid options.
var ErrListOptions = errors.New("guest: invalid list options")

// ErrDeleteAll is returned by DeleteAll when the host could not list the
// actor's keys; none is deleted then.
var ErrDeleteAll = errors.New("guest: storage not deleted")

// MaxBatchOps bounds the ops of one Batch.
const MaxBatchOps = 128

// ListOptions selects the entries List returns: the keys that start with
// Prefix, from Start (inclusive) to End (exclusive), in byte order; an
// empty Start or End leaves that side unbounded.
type ListOptions struct {
	Prefix string
	Start  string
	End    string
	// Limit bounds the number of entries returned; 0 means no bound. With
	// Reverse, they are the last Limit keys of the window, descending.
	Limit   int
	Reverse bool
}

// Entry is one key and its value.
type Entry struct {
	Key   string
	Value []byte
}

// Op is one write of a Batch: Put Key to Value, or Delete Key (Value is
// then ignored).
type Op struct {
	Key    string
	Value  []byte
	Delete bool
}

// Store is the durable key-value storage of the actor whose event is
// running. Use the package variable Storage.
type Store struct{}

// Storage is the storage of the current event's actor.
var Storage Store

// Get returns the value under key, and whether there is one. Reads see the
// event's own writes.
func (Store) Get(key string) ([]byte, bool) {
	n := storageGetLen(key)
	if n < 0 {
		return nil, false
	}
	v := make([]byte, n)
	storageGetRead(v)
	return v, true
}

// Put sets key to value. It fails with ErrLimit when the key is empty or
// the key, the value or the actor's whole state would be too large.
func (Store) Put(key string, value []byte) error {
	if storagePut(key, value) != 0 {
		return ErrLimit
	}
	return nil
}

// Delete removes key; a missing key is not an error.
func (Store) Delete(key string) { storageDelete(key) }

// List returns the entries in the window opt describes, in byte order of
// their keys (descending if opt.Reverse). It sees the event's own writes.
// It fails with ErrListOptions for a negative limit or one over 2^32-1.
func (Store) List(opt ListOptions) ([]Entry, error) {
	b, ok := encodeListOptions(opt)
	if !ok {
		return nil, ErrListOptions
	}
	n := storageListLen(b)
	if n < 0 {
		return nil, ErrListOptions
	}
	buf := make([]byte, n)
	storageListRead(buf)
	entries, ok := decodeEntries(buf)
	if !ok {
		panic("guest: storage list result from the host is malformed")
	}
	return entries, nil
}

// Batch applies ops in order, all or nothing: if a storage limit refuses
// one of them (checked as Put would, in the state the earlier ops leave;
// a delete's key too must be valid), or there are more than MaxBatchOps,
// it returns ErrLimit and applies none.
func (Store) Batch(ops ...Op) error {
	if storageBatch(encodeBatch(ops)) != 0 {
		return ErrLimit
	}
	return nil
}

// PutMany sets each entry's key to its value, in order, all or nothing,
// in one host call: it is Batch with puts only, and fails the same way.
func (s Store) PutMany(entries ...Entry) error {
	ops := make([]Op, len(entries))
	for i, e := range entries {
		ops[i] = Op{Key: e.Key, Value: e.Value}
	}
	return s.Batch(ops...)
}

// maxGetKeys bounds the keys of one host call of GetMany (wasmhost/ABI.md,
// storage_get_many_len).
const maxGetKeys = 128

// GetMany returns the values under keys, by key; a key without a value is
// not in the map. Like Get it sees the event's own writes. It asks the
// host once per 128 keys.
func (Store) GetMany(keys ...string) map[string][]byte {
	vals := make(map[string][]byte, len(keys))
	for len(keys) > 0 {
		part := keys[:min(len(keys), maxGetKeys)]
		keys = keys[len(part):]
		n := storageGetManyLen(encodeKeys(part))
		if n < 0 {
			panic("guest: storage get many refused by the host")
		}
		buf := make([]byte, n)
		storageGetManyRead(buf)
		if !decodeValues(buf, part, vals) {
			panic("guest: storage get many result from the host is malformed")
		}
	}
	return vals
}

// DeleteAll removes every key of the actor, the event's own writes so far
// included; the event's later writes start from an empty storage. Like
// every write it commits with the event's others, or not at all. It fails
// with ErrDeleteAll only if the host could not list the keys.
func (Store) DeleteAll() error {
	if storageDeleteAll() != 0 {
		return ErrDeleteAll
	}
	return nil
}

// Log levels, as in log/slog.
const (
	LevelDebug = -4
	LevelInfo  = 0
	LevelWarn  = 4
	LevelError = 8
)

// Log writes msg to the node's log at level, tagged with the actor's class.
func Log(level int, msg string) { hostLog(int32(level), msg) }

// onRequest serves one request event: it pulls the request in, runs the
// handler and hands the response out. It returns a wire return code.
func onRequest() int32 {
	if handler == nil {
		return wire.NotHandled
	}
	buf := make([]byte, requestLen())
	requestRead(buf)
	req, ok := decodeRequest(buf)
	if !ok {
		return wire.Failed
	}
	resp := handler(req)
	if resp == nil {
		return wire.Failed
	}
	if responseWrite(encodeResponse(resp)) != 0 {
		return wire.Failed
	}
	return wire.OK
}

func decodeRequest(b []byte) (*Request, bool) {
	r := wire.NewReader(b)
	req := &Request{Method: r.String(), Path: r.String(), RawQuery: r.String()}
	req.Header = readFields(r)
	req.Body = r.Bytes()
	return req, !r.Err()
}

func encodeResponse(resp *Response) []byte {
	n := 12 + len(resp.Body)
	for _, f := range resp.Header {
		n += 8 + len(f.Name) + len(f.Value)
	}
	b := make([]byte, 0, n)
	b = wire.AppendU32(b, uint32(resp.Status))
	b = appendFields(b, resp.Header)
	return wire.AppendBytes(b, resp.Body)
}

// appendFields lays header fields out as the ABI's headers: a count, then
// each name and value.
func appendFields(b []byte, fields []Field) []byte {
	b = wire.AppendU32(b, uint32(len(fields)))
	for _, f := range fields {
		b = wire.AppendString(b, f.Name)
		b = wire.AppendString(b, f.Value)
	}
	return b
}

// readFields reads header fields laid out as appendFields does.
func readFields(r *wire.Reader) []Field {
	n := r.Count(8)
	if n == 0 {
		return nil
	}
	fields := make([]Field, n)
	for i := range fields {
		fields[i] = Field{Name: r.String(), Value: r.String()}
	}
	return fields
}

// List flags and batch op kinds (wasmhost/ABI.md).
const (
	listReverse = 1 << 0
	batchPut    = 1
	batchDelete = 2
)

func encodeListOptions(opt ListOptions) ([]byte, bool) {
	if opt.Limit < 0 || uint64(opt.Limit) > 1<<32-1 {
		return nil, false
	}
	var flags uint32
	if opt.Reverse {
		flags |= listReverse
	}
	b := make([]byte, 0, 20+len(opt.Prefix)+len(opt.Start)+len(opt.End))
	b = wire.AppendString(b, opt.Prefix)
	b = wire.AppendString(b, opt.Start)
	b = wire.AppendString(b, opt.End)
	b = wire.AppendU32(b, uint32(opt.Limit))
	return wire.AppendU32(b, flags), true
}

func decodeEntries(b []byte) ([]Entry, bool) {
	r := wire.NewReader(b)
	entries := make([]Entry, r.Count(8))
	for i := range entries {
		entries[i] = Entry{Key: r.String(), Value: r.Bytes()}
	}
	return entries, !r.Err()
}

func encodeBatch(ops []Op) []byte {
	n := 4
	for _, op := range ops {
		n += 5 + len(op.Key)
		if !op.Delete {
			n += 4 + len(op.Value)
		}
	}
	b := make([]byte, 0, n)
	b = wire.AppendU32(b, uint32(len(ops)))
	for _, op := range ops {
		if op.Delete {
			b = append(b, batchDelete)
			b = wire.AppendString(b, op.Key)
			continue
		}
		b = append(b, batchPut)
		b = wire.AppendString(b, op.Key)
		b = wire.AppendBytes(b, op.Value)
	}
	return b
}

// encodeKeys lays out the keys of storage_get_many_len: a count, then
// each key.
func encodeKeys(keys []string) []byte {
	n := 4
	for _, k := range keys {
		n += 4 + len(k)
	}
	b := make([]byte, 0, n)
	b = wire.AppendU32(b, uint32(len(keys)))
	for _, k := range keys {
		b = wire.AppendString(b, k)
	}
	return b
}

// decodeValues reads the result of storage_get_many_len for keys into
// vals: a count (that of keys), then for each key whether it has a value
// and, if so, the value.
func decodeValues(b []byte, keys []string, vals map[string][]byte) bool {
	r := wire.NewReader(b)
	if r.Count(1) != len(keys) {
		return false
	}
	for _, k := range keys {
		switch r.U8() {
		case 0:
		case 1:
			vals[k] = r.Bytes()
		default:
			return false
		}
	}
	return !r.Err()
}

func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// unescape decodes a query component; a malformed %XX is kept as is.
func unescape(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '+':
			c = ' '
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			c = unhex(s[i+1])<<4 | unhex(s[i+2])
			if b == nil {
				b = append(make([]byte, 0, len(s)), s[:i]...)
			}
			b = append(b, c)
			i += 2
			continue
		}
		if b != nil {
			b = append(b, c)
		} else if c != s[i] {
			b = append(append(make([]byte, 0, len(s)), s[:i]...), c)
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}
