package kvrun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Limits of the format. The key and value limits are the actors package's
// storage limits; a reader refuses what is past them as damage.
const (
	// MaxKeyLen bounds a key, in bytes.
	MaxKeyLen = 2 << 10
	// MaxValueLen bounds a value, in bytes.
	MaxValueLen = 128 << 10
	// DefaultBlockSize is the data block size Options{} asks for.
	DefaultBlockSize = 16 << 10
	// MaxBlockSize bounds Options.BlockSize.
	MaxBlockSize = 1 << 20
	// DefaultBitsPerKey is the filter's size Options{} asks for: about 1%
	// false positives.
	DefaultBitsPerKey = 10
	// MaxBitsPerKey bounds Options.BitsPerKey.
	MaxBitsPerKey = 32
)

// maxEntryLen bounds one encoded entry: three uvarints and the bytes.
const maxEntryLen = 3*binary.MaxVarintLen64 + MaxKeyLen + MaxValueLen

// maxBlockLen bounds one data block: a block ends before the entry that
// would take it past the block size, unless it is the block's first.
const maxBlockLen = MaxBlockSize + maxEntryLen

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Options configure a Writer. The zero value is the default.
type Options struct {
	// BlockSize is the size a data block is closed at, in bytes, before
	// the entry that would pass it; 0 means DefaultBlockSize. An entry
	// larger than a block gets a block of its own.
	BlockSize int
	// BitsPerKey sizes the filter; 0 means DefaultBitsPerKey.
	BitsPerKey int
}

// Validate reports options out of range.
func (o Options) Validate() error {
	if o.BlockSize < 0 || o.BlockSize > MaxBlockSize {
		return fmt.Errorf("kvrun options: block size %d, want 0 to %d", o.BlockSize, MaxBlockSize)
	}
	if o.BitsPerKey < 0 || o.BitsPerKey > MaxBitsPerKey {
		return fmt.Errorf("kvrun options: %d filter bits a key, want 0 to %d", o.BitsPerKey, MaxBitsPerKey)
	}
	return nil
}

// Writer encodes one run from entries added in strictly ascending key
// order. It keeps the whole run in memory until Finish hands it out. One
// goroutine uses a Writer at a time.
type Writer struct {
	opt Options
	err error // invalid options, or finished

	buf      []byte // the run so far
	blkStart int    // where the open data block starts in buf
	last     string // the last key added
	idx      []byte // the index's block entries so far
	idxLast  string // the last index key, or the run's first key
	blocks   int
	hashes   []uint64 // of every key, for the filter
	meta     Meta
}

var errFinished = errors.New("kvrun writer: finished")

// NewWriter returns a Writer for a new run. Options out of range make
// every Add and Finish fail with Validate's error.
func NewWriter(opt Options) *Writer {
	w := &Writer{err: opt.Validate()}
	if opt.BlockSize == 0 {
		opt.BlockSize = DefaultBlockSize
	}
	if opt.BitsPerKey == 0 {
		opt.BitsPerKey = DefaultBitsPerKey
	}
	w.opt = opt
	return w
}

// Add appends e to the run. It refuses, leaving the run as it was, an
// empty key, a key or value past the limits, a tombstone with a value,
// and a key not after the last one added.
func (w *Writer) Add(e Entry) error {
	if w.err != nil {
		return w.err
	}
	switch {
	case e.Key == "":
		return errors.New("kvrun add: empty key")
	case len(e.Key) > MaxKeyLen:
		return fmt.Errorf("kvrun add: key of %d bytes, over %d", len(e.Key), MaxKeyLen)
	case len(e.Value) > MaxValueLen:
		return fmt.Errorf("kvrun add: value of %d bytes under key %.64q, over %d", len(e.Value), e.Key, MaxValueLen)
	case e.Tombstone && len(e.Value) > 0:
		return fmt.Errorf("kvrun add: tombstone of key %.64q with a value", e.Key)
	case w.meta.Entries > 0 && e.Key <= w.last:
		return fmt.Errorf("kvrun add: key %.64q not after %.64q", e.Key, w.last)
	}
	open := len(w.buf) - w.blkStart
	if open > 0 && open+len(e.Key)+len(e.Value) > w.opt.BlockSize {
		w.closeBlock()
	}
	shared := 0
	if len(w.buf) > w.blkStart {
		shared = commonPrefix(w.last, e.Key)
	}
	vl := uint64(len(e.Value)) << 1
	if e.Tombstone {
		vl |= 1
	}
	w.buf = binary.AppendUvarint(w.buf, uint64(shared))
	w.buf = binary.AppendUvarint(w.buf, uint64(len(e.Key)-shared))
	w.buf = binary.AppendUvarint(w.buf, vl)
	w.buf = append(w.buf, e.Key[shared:]...)
	w.buf = append(w.buf, e.Value...)
	w.hashes = append(w.hashes, hashKey(e.Key))

	if w.meta.Entries == 0 {
		w.meta.MinKey = e.Key
		w.idxLast = e.Key
	}
	w.meta.Entries++
	if e.Tombstone {
		w.meta.Tombstones++
	} else {
		w.meta.LiveBytes += int64(len(e.Key) + len(e.Value))
	}
	w.meta.MaxKey = e.Key
	w.last = e.Key
	return nil
}

// closeBlock ends the open data block (not empty) and indexes it under its
// last key.
func (w *Writer) closeBlock() {
	blk := w.buf[w.blkStart:]
	shared := commonPrefix(w.idxLast, w.last)
	w.idx = binary.AppendUvarint(w.idx, uint64(shared))
	w.idx = binary.AppendUvarint(w.idx, uint64(len(w.last)-shared))
	w.idx = append(w.idx, w.last[shared:]...)
	w.idx = binary.AppendUvarint(w.idx, uint64(len(blk)))
	w.idx = binary.LittleEndian.AppendUint32(w.idx, checksum(blk))
	w.idxLast = w.last
	w.blocks++
	w.blkStart = len(w.buf)
}

// Finish ends the run: it closes the last block and appends the index,
// the filter and the footer. It returns the run's bytes, which the Writer
// no longer touches, and its Meta. The Writer takes no more entries.
func (w *Writer) Finish() ([]byte, Meta, error) {
	if w.err != nil {
		return nil, Meta{}, w.err
	}
	w.err = errFinished
	if len(w.buf) > w.blkStart {
		w.closeBlock()
	}
	m := w.meta
	b := w.buf

	m.IndexOff = int64(len(b))
	b = binary.AppendUvarint(b, uint64(w.blocks))
	b = binary.AppendUvarint(b, uint64(len(m.MinKey)))
	b = append(b, m.MinKey...)
	b = append(b, w.idx...)
	b = binary.LittleEndian.AppendUint32(b, checksum(b[m.IndexOff:]))
	m.IndexLen = int64(len(b)) - m.IndexOff

	m.FilterOff = int64(len(b))
	n := filterBytes(len(w.hashes), w.opt.BitsPerKey)
	k := probes(w.opt.BitsPerKey)
	b = append(b, make([]byte, n)...)
	if n > 0 {
		bits := b[m.FilterOff:]
		for _, h := range w.hashes {
			addHash(bits, k, h)
		}
	}
	b = append(b, byte(k))
	b = binary.LittleEndian.AppendUint32(b, checksum(b[m.FilterOff:]))
	m.FilterLen = int64(len(b)) - m.FilterOff

	b = appendFooter(b, m)
	m.Size = int64(len(b))

	w.buf, w.idx, w.hashes = nil, nil, nil
	if err := m.check(); err != nil {
		panic(fmt.Sprintf("kvrun: writer made an invalid meta %+v: %v", m, err))
	}
	return b, m, nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}
