// Package wire is the byte layout that the host and the guest SDK share
// (wasmhost/ABI.md): little-endian uint32 integers and strings prefixed by
// their uint32 length. It imports nothing, so that it stays small inside a
// guest. Its functions are pure and safe for concurrent use.
package wire

// Version is the guest ABI version this layout belongs to.
const Version = 2

// Minor is the newest minor version of Version this layout has: 1 added
// alarms (alarm_* host functions, wasmkeep_on_alarm) and outbound HTTP
// (http_fetch); 2 outbound WebSockets (ws_dial), and the URL and tags of
// a dialed socket in the socket event and list encodings. A guest says
// which it needs with wasmkeep_abi_minor; one that does not needs 0.
const Minor = 2

// MinorDial is the first minor version whose socket event and socket
// list encodings carry a dialed socket's URL (and, in a close or error
// event, its tags): the host lays them out so only for a guest that
// speaks it, since an older guest's decoder refuses bytes left over.
const MinorDial = 2

// Isolations a module declares with its export wasmkeep_isolation.
const (
	// IsolationActor: a guest of its own for each resident actor.
	IsolationActor = 1
	// IsolationClass: the resident actors of the class share a few guests,
	// each serving many of them.
	IsolationClass = 2
)

// Return codes of the guest exports wasmkeep_on_request,
// wasmkeep_on_socket and wasmkeep_on_leave.
const (
	// OK: the guest handed out a response with response_write.
	OK = 0
	// Failed: the guest could not serve the event.
	Failed = 1
	// NotHandled: the guest registered no handler for this kind of event.
	NotHandled = 2
)

// Socket event kinds and flags (socket_event_read).
const (
	SocketMessage = 1
	SocketClose   = 2
	SocketError   = 3

	// FlagText: a text (not binary) message, in socket events and in
	// ws_send and ws_broadcast.
	FlagText = 1 << 0
	// FlagClean: the close handshake ran (close events).
	FlagClean = 1 << 1

	// SocketDialed is the bit set in the id of a socket the actor dialed
	// (ws_dial), clear in one it accepted.
	SocketDialed = 1 << 62
)

// SQL (sql_exec_len): the types of values, in a statement's arguments
// and a result's rows; a result's status; the statement's flags.
const (
	SQLNull    = 0
	SQLInteger = 1
	SQLFloat   = 2
	SQLText    = 3
	SQLBlob    = 4

	// SQLDone: the statement ran; the result follows.
	SQLDone = 0
	// SQLError: the database refused the statement; its message follows.
	SQLError = 1
	// SQLLimit: the statement would take the actor's state past its
	// bound; the message follows.
	SQLLimit = 2

	// SQLFlagExec: run as Exec, returning no rows (without arguments the
	// query may hold several statements).
	SQLFlagExec = 1 << 0
)

// AppendU32 appends v, little-endian.
func AppendU32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

// AppendString appends s prefixed by its length.
func AppendString(b []byte, s string) []byte {
	b = AppendU32(b, uint32(len(s)))
	return append(b, s...)
}

// AppendBytes appends p prefixed by its length.
func AppendBytes(b []byte, p []byte) []byte {
	b = AppendU32(b, uint32(len(p)))
	return append(b, p...)
}

// Reader decodes a buffer front to back. After the first short read every
// read returns zero values and Err reports true, so a decoder checks once,
// at its end.
type Reader struct {
	b   []byte
	bad bool
}

// NewReader returns a Reader over b. It does not copy b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// U32 reads an integer.
func (r *Reader) U32() uint32 {
	if r.bad || len(r.b) < 4 {
		r.bad = true
		return 0
	}
	v := uint32(r.b[0]) | uint32(r.b[1])<<8 | uint32(r.b[2])<<16 | uint32(r.b[3])<<24
	r.b = r.b[4:]
	return v
}

// Bytes reads a length-prefixed byte string, copied out of the buffer.
func (r *Reader) Bytes() []byte {
	n := r.U32()
	if r.bad || uint64(n) > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	p := make([]byte, n)
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return p
}

// String reads a length-prefixed string.
func (r *Reader) String() string {
	n := r.U32()
	if r.bad || uint64(n) > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// Skip reads past a length-prefixed string without copying it.
func (r *Reader) Skip() {
	n := r.U32()
	if r.bad || uint64(n) > uint64(len(r.b)) {
		r.bad = true
		return
	}
	r.b = r.b[n:]
}

// Count reads a count of items each at least min bytes long, and rejects
// one the rest of the buffer cannot hold, so that a decoder never
// allocates for items that are not there.
func (r *Reader) Count(min int) int {
	n := r.U32()
	if r.bad || uint64(n)*uint64(min) > uint64(len(r.b)) {
		r.bad = true
		return 0
	}
	return int(n)
}

// Err reports whether a read ran past the end of the buffer, or bytes are
// left over after the last read.
func (r *Reader) Err() bool { return r.bad || len(r.b) != 0 }

// AppendU64 appends v, little-endian.
func AppendU64(b []byte, v uint64) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24),
		byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
}

// U8 reads a byte.
func (r *Reader) U8() uint8 {
	if r.bad || len(r.b) < 1 {
		r.bad = true
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// U64 reads a 64-bit integer.
func (r *Reader) U64() uint64 {
	lo := r.U32()
	hi := r.U32()
	return uint64(lo) | uint64(hi)<<32
}
