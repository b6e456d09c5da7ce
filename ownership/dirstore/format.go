package dirstore

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// A segment is a header followed by frames, each frame one batch of records
// written with one pwrite. All integers are little-endian.
//
// Segment header (segHeaderLen bytes):
//
//	0  "wklseg1\n"
//	8  salt, uint64: random, chosen when the segment is created
//	16 CRC-32C of bytes 0–16, uint32
//	20 zero, uint32
//
// Frame (frameHeaderLen bytes, then the payload):
//
//	0  frameMagic, uint32
//	4  payload length, uint32
//	8  the segment's salt, uint64
//	16 CRC-32C of the payload, uint32
//	20 CRC-32C of bytes 0–20, uint32
//
// The payload is one or more records:
//
//	0  CRC-32C of the rest of the record (bytes 4 to its end), uint32
//	4  record length, header included, uint32
//	8  kind: kindPut or kindDelete
//	9  zero
//	10 key length, uint16
//	12 ETag, 16 bytes (the 128 random bits whose hex is the ETag)
//	28 the key, then the body (none for a delete)
//
// A frame counts only once it is whole: its header checks, its payload is
// all in the file, and the payload checks. The frame's own checksum is what
// settles whether a batch landed; the record's is what lets Get verify one
// body without reading the rest of its frame. The salt ties a frame to its
// segment: bytes that look like a frame but carry another salt (a body that
// holds a frame, say, since bodies are anyone's bytes) are not one.
const (
	segMagic       = "wklseg1\n"
	segHeaderLen   = 24
	frameMagic     = 0x31666b77 // "wkf1" in little-endian
	frameHeaderLen = 24
	recHeaderLen   = 28
	etagBytes      = 16

	kindPut    = 1
	kindDelete = 2

	// maxBodyLen bounds a body so that a record's length fits its field
	// with room to spare.
	maxBodyLen = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var le = binary.LittleEndian

// ErrCorrupt reports a segment that holds damage a crash cannot explain:
// a frame that fails its checksum with whole frames after it, or a record
// that fails its own. The store refuses to guess what was lost; see doc.go.
// Open returns it as it is. While a Store runs, a Get of one damaged
// record wraps it in ownership.ErrDamaged (that object alone), and damage
// that concerns every key (the segment cut short or gone) wraps it in
// ownership.ErrBucketDamaged, which every later call returns.
var ErrCorrupt = errors.New("dirstore: segment damaged")

// errShortFile reports a read that ran past the end of a file.
var errShortFile = errors.New("file ends early")

type etagBits [etagBytes]byte

func newETagBits() etagBits {
	var e etagBits
	_, _ = rand.Read(e[:]) // never fails (crypto/rand.Read panics instead)
	return e
}

func (e etagBits) ETag() ownership.ETag { return ownership.ETag(hex.EncodeToString(e[:])) }

// matches reports whether the ETag a caller gave names this version. An
// ETag this store never handed out (not 32 lowercase hex digits) names none.
func (e etagBits) matches(t ownership.ETag) bool {
	if len(t) != 2*etagBytes {
		return false
	}
	var want [2 * etagBytes]byte
	hex.Encode(want[:], e[:])
	return string(want[:]) == string(t)
}

func randomSalt() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return le.Uint64(b[:])
}

func appendSegHeader(dst []byte, salt uint64) []byte {
	start := len(dst)
	dst = append(dst, segMagic...)
	dst = le.AppendUint64(dst, salt)
	dst = le.AppendUint32(dst, checksum(dst[start:]))
	return le.AppendUint32(dst, 0)
}

// parseSegHeader returns the salt of a segment header.
func parseSegHeader(h []byte) (uint64, error) {
	if len(h) < segHeaderLen || string(h[:8]) != segMagic || le.Uint32(h[16:]) != checksum(h[:16]) {
		return 0, fmt.Errorf("%w: bad segment header", ErrCorrupt)
	}
	return le.Uint64(h[8:]), nil
}

// recordLen is the length of the record of a key and body.
func recordLen(key string, bodyLen int) int { return recHeaderLen + len(key) + bodyLen }

func appendRecord(dst []byte, kind byte, key string, etag etagBits, body []byte) []byte {
	start := len(dst)
	dst = le.AppendUint32(dst, 0) // checksum, filled in below
	dst = le.AppendUint32(dst, uint32(recordLen(key, len(body))))
	dst = append(dst, kind, 0)
	dst = le.AppendUint16(dst, uint16(len(key)))
	dst = append(dst, etag[:]...)
	dst = append(dst, key...)
	dst = append(dst, body...)
	le.PutUint32(dst[start:], checksum(dst[start+4:]))
	return dst
}

// record is one parsed record. key and body alias the bytes parsed.
type record struct {
	kind byte
	etag etagBits
	key  []byte
	body []byte
	len  int
}

// parseRecord parses and checks the record at the start of b.
func parseRecord(b []byte) (record, error) {
	if len(b) < recHeaderLen {
		return record{}, fmt.Errorf("%w: record header cut short", ErrCorrupt)
	}
	n := int(le.Uint32(b[4:]))
	keyLen := int(le.Uint16(b[10:]))
	if n < recHeaderLen+keyLen || n > len(b) {
		return record{}, fmt.Errorf("%w: record length %d out of range", ErrCorrupt, n)
	}
	if le.Uint32(b) != checksum(b[4:n]) {
		return record{}, fmt.Errorf("%w: record checksum mismatch", ErrCorrupt)
	}
	r := record{kind: b[8], len: n, key: b[recHeaderLen : recHeaderLen+keyLen], body: b[recHeaderLen+keyLen : n]}
	copy(r.etag[:], b[12:28])
	if r.kind != kindPut && r.kind != kindDelete || r.kind == kindDelete && len(r.body) != 0 || keyLen == 0 {
		return record{}, fmt.Errorf("%w: malformed record", ErrCorrupt)
	}
	return r, nil
}

// parseRecords calls fn for each record of a frame's payload, with its
// offset in the payload.
func parseRecords(payload []byte, fn func(at int, r record)) error {
	for at := 0; at < len(payload); {
		r, err := parseRecord(payload[at:])
		if err != nil {
			return err
		}
		fn(at, r)
		at += r.len
	}
	return nil
}

// frameBuilder assembles one frame in memory.
type frameBuilder struct {
	buf []byte
}

func (b *frameBuilder) reset() { b.buf = append(b.buf[:0], make([]byte, frameHeaderLen)...) }

// add appends a record and returns its offset from the start of the frame.
func (b *frameBuilder) add(kind byte, key string, etag etagBits, body []byte) int {
	at := len(b.buf)
	b.buf = appendRecord(b.buf, kind, key, etag, body)
	return at
}

func (b *frameBuilder) empty() bool { return len(b.buf) <= frameHeaderLen }

// finish fills in the frame header and returns the whole frame.
func (b *frameBuilder) finish(salt uint64) []byte {
	h := b.buf[:frameHeaderLen]
	payload := b.buf[frameHeaderLen:]
	le.PutUint32(h[0:], frameMagic)
	le.PutUint32(h[4:], uint32(len(payload)))
	le.PutUint64(h[8:], salt)
	le.PutUint32(h[16:], checksum(payload))
	le.PutUint32(h[20:], checksum(h[:20]))
	return b.buf
}

// frameHeader is a parsed frame header.
type frameHeader struct {
	payloadLen int64
	sum        uint32
}

// parseFrameHeader checks a frame header against the segment's salt.
func parseFrameHeader(h []byte, salt uint64) (frameHeader, bool) {
	if len(h) < frameHeaderLen || le.Uint32(h) != frameMagic || le.Uint64(h[8:]) != salt ||
		le.Uint32(h[20:]) != checksum(h[:20]) {
		return frameHeader{}, false
	}
	fh := frameHeader{payloadLen: int64(le.Uint32(h[4:])), sum: le.Uint32(h[16:])}
	// A frame holds at least one record with a key.
	return fh, fh.payloadLen > recHeaderLen
}
