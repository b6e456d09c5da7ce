package kvrun

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Meta describes a run for the head that lists it: enough to answer from
// the keys' range alone, to weigh the run for compaction, and to fetch the
// index and filter in one ranged read without reading the footer first.
type Meta struct {
	Size       int64 // bytes of the run object
	Entries    int64 // entries, tombstones included
	Tombstones int64
	// LiveBytes is the sum of len(Key)+len(Value) over the entries that
	// are not tombstones.
	LiveBytes int64
	// MinKey and MaxKey are the first and last keys; both "" for an empty
	// run.
	MinKey, MaxKey string
	// The index, then the filter right after it, then the footer.
	IndexOff, IndexLen   int64
	FilterOff, FilterLen int64
}

// Sizes of fixed parts of the format.
const (
	footerLen = 64
	// minIndexLen is an empty run's index: two zero uvarints and a CRC.
	minIndexLen = 2 + 4
	// minFilterLen is an empty filter: the probe count and a CRC.
	minFilterLen = 1 + 4
	// formatVersion is the version the footer and Meta's encoding carry.
	formatVersion = 1
)

// footerMagic ends every run.
const footerMagic = "wkrun\x00\x00\x01"

// check reports a Meta that no run could have. Every reader of a Meta
// calls it, so that the rest may trust its fields.
func (m Meta) check() error {
	if err := m.checkLayout(); err != nil {
		return err
	}
	switch {
	case len(m.MinKey) > MaxKeyLen || len(m.MaxKey) > MaxKeyLen:
		return fmt.Errorf("key of %d bytes", max(len(m.MinKey), len(m.MaxKey)))
	case m.Entries == 0 && (m.MinKey != "" || m.MaxKey != ""):
		return fmt.Errorf("empty run with keys %.64q to %.64q", m.MinKey, m.MaxKey)
	case m.Entries > 0 && (m.MinKey == "" || m.MinKey > m.MaxKey):
		return fmt.Errorf("%d entries, keys %.64q to %.64q", m.Entries, m.MinKey, m.MaxKey)
	case m.Entries == 1 && m.MinKey != m.MaxKey:
		return fmt.Errorf("one entry, keys %.64q to %.64q", m.MinKey, m.MaxKey)
	}
	return nil
}

// checkLayout is check without the keys, which the footer does not hold.
func (m Meta) checkLayout() error {
	const maxOff = math.MaxInt64 / 4 // so that sums of three cannot overflow
	const maxEntry = MaxKeyLen + MaxValueLen
	live := m.Entries - m.Tombstones
	switch {
	case m.IndexOff < 0 || m.IndexOff > maxOff || m.IndexLen < minIndexLen || m.IndexLen > maxOff ||
		m.FilterLen < minFilterLen || m.FilterLen > maxOff:
		return fmt.Errorf("index %d+%d, filter %d", m.IndexOff, m.IndexLen, m.FilterLen)
	case m.FilterOff != m.IndexOff+m.IndexLen:
		return fmt.Errorf("filter at %d, index %d+%d", m.FilterOff, m.IndexOff, m.IndexLen)
	case m.Size != m.FilterOff+m.FilterLen+footerLen:
		return fmt.Errorf("size %d, filter %d+%d", m.Size, m.FilterOff, m.FilterLen)
	// Invariant: an entry takes at least 4 bytes of a data block (three
	// uvarints and at least one byte of its key that it does not share
	// with the key before it, which it must follow).
	case m.Entries < 0 || m.Entries > m.IndexOff/4 || m.Tombstones < 0 || live < 0:
		return fmt.Errorf("%d entries, %d tombstones in %d data bytes", m.Entries, m.Tombstones, m.IndexOff)
	case (m.Entries == 0) != (m.IndexOff == 0):
		return fmt.Errorf("%d entries in %d data bytes", m.Entries, m.IndexOff)
	case m.LiveBytes < live || live <= math.MaxInt64/maxEntry && m.LiveBytes > live*maxEntry:
		return fmt.Errorf("%d live bytes in %d live entries", m.LiveBytes, live)
	}
	return nil
}

// AppendBinary appends m's encoding to b (encoding.BinaryAppender): a
// version byte, then uvarints Size, Entries, Tombstones, LiveBytes,
// IndexOff, IndexLen, FilterLen, then MinKey (uvarint length, bytes), then
// MaxKey as the length of its prefix shared with MinKey, the length of the
// rest and the rest. FilterOff is not stored: it is IndexOff+IndexLen. It
// fails only for a Meta no run could have.
func (m Meta) AppendBinary(b []byte) ([]byte, error) {
	if err := m.check(); err != nil {
		return b, fmt.Errorf("encode run meta: %w", err)
	}
	b = append(b, formatVersion)
	for _, v := range [...]int64{m.Size, m.Entries, m.Tombstones, m.LiveBytes, m.IndexOff, m.IndexLen, m.FilterLen} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = binary.AppendUvarint(b, uint64(len(m.MinKey)))
	b = append(b, m.MinKey...)
	shared := commonPrefix(m.MinKey, m.MaxKey)
	b = binary.AppendUvarint(b, uint64(shared))
	b = binary.AppendUvarint(b, uint64(len(m.MaxKey)-shared))
	b = append(b, m.MaxKey[shared:]...)
	return b, nil
}

// MarshalBinary is AppendBinary(nil).
func (m Meta) MarshalBinary() ([]byte, error) { return m.AppendBinary(nil) }

// UnmarshalBinary decodes what AppendBinary wrote, all of data. An error
// wraps ownership.ErrDamaged, and leaves m as it was.
func (m *Meta) UnmarshalBinary(data []byte) error {
	d := decoder{b: data}
	if v := d.byte(); v != formatVersion && !d.bad {
		return fmt.Errorf("decode run meta: %w: version %d", ownership.ErrDamaged, v)
	}
	var f [7]int64
	for i := range f {
		v := d.uvarint()
		if v > math.MaxInt64 {
			d.bad = true
		}
		f[i] = int64(v)
	}
	minKey := d.bytes(d.uvarint())
	shared := d.uvarint()
	rest := d.bytes(d.uvarint())
	if d.bad || len(d.b) > 0 || shared > uint64(len(minKey)) {
		return fmt.Errorf("decode run meta: %w: %d bytes not a meta", ownership.ErrDamaged, len(data))
	}
	n := Meta{
		Size: f[0], Entries: f[1], Tombstones: f[2], LiveBytes: f[3],
		IndexOff: f[4], IndexLen: f[5], FilterOff: f[4] + f[5], FilterLen: f[6],
		MinKey: string(minKey), MaxKey: string(minKey[:shared]) + string(rest),
	}
	if err := n.check(); err != nil {
		return fmt.Errorf("decode run meta: %w: %w", ownership.ErrDamaged, err)
	}
	*m = n
	return nil
}

// appendFooter appends the footer of the run m describes (its keys and
// Size aside).
func appendFooter(b []byte, m Meta) []byte {
	start := len(b)
	for _, v := range [...]int64{m.IndexOff, m.IndexLen, m.FilterLen, m.Entries, m.Tombstones, m.LiveBytes} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	b = binary.LittleEndian.AppendUint32(b, checksum(b[start:]))
	return append(b, footerMagic...)
}

// ReadMeta reads the Meta of a run of size bytes from the run itself: its
// footer, then its index and filter (two fetches). It is for a run no head
// describes (a check, a repair); a Reader needs only the Meta. Damage is
// an error wrapping ownership.ErrDamaged.
func ReadMeta(ctx context.Context, size int64, fetch Fetch) (Meta, error) {
	if size < footerLen+minIndexLen+minFilterLen {
		return Meta{}, fmt.Errorf("read run meta: %w: %d bytes, too short for a run", ownership.ErrDamaged, size)
	}
	ft, err := read(ctx, fetch, size-footerLen, footerLen)
	if err != nil {
		return Meta{}, fmt.Errorf("read run meta: footer: %w", err)
	}
	if string(ft[56:]) != footerMagic {
		return Meta{}, fmt.Errorf("read run meta: %w: no run footer", ownership.ErrDamaged)
	}
	if got, want := binary.LittleEndian.Uint32(ft[52:]), checksum(ft[:52]); got != want {
		return Meta{}, fmt.Errorf("read run meta: %w: footer checksum %08x, want %08x", ownership.ErrDamaged, got, want)
	}
	if v := binary.LittleEndian.Uint32(ft[48:]); v != formatVersion {
		return Meta{}, fmt.Errorf("read run meta: %w: format version %d", ownership.ErrDamaged, v)
	}
	var f [6]int64
	for i := range f {
		v := binary.LittleEndian.Uint64(ft[8*i:])
		// Offsets and lengths lie within the run, and entries take bytes
		// of it; only the live bytes (keys share prefixes) may be more.
		if v > uint64(size) && i < 5 || v > math.MaxInt64 {
			return Meta{}, fmt.Errorf("read run meta: %w: footer field %d is %d in a run of %d bytes", ownership.ErrDamaged, i, v, size)
		}
		f[i] = int64(v)
	}
	m := Meta{
		Size: size, IndexOff: f[0], IndexLen: f[1], FilterOff: f[0] + f[1], FilterLen: f[2],
		Entries: f[3], Tombstones: f[4], LiveBytes: f[5],
	}
	if err := m.checkLayout(); err != nil {
		return Meta{}, fmt.Errorf("read run meta: %w: footer: %w", ownership.ErrDamaged, err)
	}
	raw, err := read(ctx, fetch, m.IndexOff, m.IndexLen+m.FilterLen)
	if err != nil {
		return Meta{}, fmt.Errorf("read run meta: index and filter: %w", err)
	}
	ix, err := decodeIndex(raw[:m.IndexLen], m)
	if err != nil {
		return Meta{}, fmt.Errorf("read run meta: %w", err)
	}
	if _, err := decodeFilter(raw[m.IndexLen:], m); err != nil {
		return Meta{}, fmt.Errorf("read run meta: %w", err)
	}
	m.MinKey, m.MaxKey = ix.minKey, ix.maxKey()
	if err := m.check(); err != nil {
		return Meta{}, fmt.Errorf("read run meta: %w: %w", ownership.ErrDamaged, err)
	}
	return m, nil
}

// read fetches n bytes at off, and refuses a reply of another length: the
// object is shorter than its meta says.
func read(ctx context.Context, fetch Fetch, off, n int64) ([]byte, error) {
	b, err := fetch(ctx, off, n)
	if err != nil {
		return nil, fmt.Errorf("read %d bytes at %d: %w", n, off, err)
	}
	if int64(len(b)) != n {
		return nil, fmt.Errorf("read %d bytes at %d: %w: got %d", n, off, ownership.ErrDamaged, len(b))
	}
	return b, nil
}

// decoder reads the format's fields; any short or malformed field sets
// bad, after which every read returns zero.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	if d.bad {
		return 0
	}
	if len(d.b) > 0 && d.b[0] < 0x80 { // most lengths fit in a byte
		v := d.b[0]
		d.b = d.b[1:]
		return uint64(v)
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n uint64) []byte {
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) byte() byte {
	p := d.bytes(1)
	if p == nil {
		return 0
	}
	return p[0]
}

func (d *decoder) uint32() uint32 {
	p := d.bytes(4)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(p)
}
