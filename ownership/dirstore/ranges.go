package dirstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Range reads (see doc.go, Range reads). A record's checksum covers the
// whole record, so that one range of a large body can be checked against
// it only by reading all the rest. A Store therefore checks a large record
// whole once, the first time it reads a range of it, and keeps, in the
// same pass, the CRC-32C of each sumBlock bytes of its body; later range
// reads of the record read only the blocks that hold their range, and
// check each against its sum.
const (
	// sumBlock is the span of a body one block sum covers: a page, so
	// that a small range read is a page or two.
	sumBlock = 4 << 10
	// rangeWholeMax is the longest body a range read reads and checks
	// whole every time, as a Get does, keeping no sums for it: reading
	// it costs little more than a few blocks.
	rangeWholeMax = 16 << 10
	// maxSumBytes bounds the memory that one Store's block sums take (4
	// bytes per 4 KiB of body, plus sumOverhead a record): sums for 16
	// GiB of large objects. Past it the Store forgets every sum it holds,
	// and checks each record whole again at its next range read.
	maxSumBytes = 16 << 20
	// sumOverhead is what one record's sums cost besides the sums: the
	// map entry and the blockSums.
	sumOverhead = 96
)

// blockSums are the block sums of one record, taken in the pass that found
// the record whole and matching its checksum. They are never changed once
// made.
type blockSums struct {
	etag etagBits
	size uint32 // of the whole record
	sums []uint32
}

func (b *blockSums) cost() int { return 4*len(b.sums) + sumOverhead }

// sumCache holds the block sums of the records of one segment that range
// reads have checked, by the record's offset. A record never changes in
// place: a segment is only appended to, and the bytes a writer cuts off
// its end were never whole frames that an index pointed at. The ETag and
// size are compared all the same, so a stale entry is only ever a miss.
// It has a mutex of its own, since readers holding the Store's mu for
// reading add to it.
type sumCache struct {
	mu    sync.Mutex
	seg   *segment // whose records m holds
	m     map[int64]*blockSums
	bytes int
}

// get returns the sums of the record e locates in sg, or nil.
func (c *sumCache) get(sg *segment, e entry) *blockSums {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seg != sg {
		return nil
	}
	b := c.m[e.off]
	if b == nil || b.etag != e.etag || b.size != e.size {
		return nil
	}
	return b
}

// add keeps the sums of the record at off in sg. Sums of another segment
// (one a compaction or another Store's replaced) are dropped first, and so
// is everything when the bound would be passed.
func (c *sumCache) add(sg *segment, off int64, b *blockSums) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seg != sg || c.bytes+b.cost() > maxSumBytes {
		c.seg, c.m, c.bytes = sg, make(map[int64]*blockSums), 0
	}
	if old := c.m[off]; old != nil {
		c.bytes -= old.cost()
	}
	c.m[off] = b
	c.bytes += b.cost()
}

// moved carries the sums of the records a compaction copied from the
// segment from (a Store's own copy of its segment, so compared by name and
// salt) over to the copy to, at the offsets moved gives; the sums of
// records it did not copy are dropped.
func (c *sumCache) moved(from, to *segment, moved map[int64]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seg == nil || c.seg.name != from.name || c.seg.salt != from.salt {
		c.seg, c.m, c.bytes = nil, nil, 0
		return
	}
	m, bytes := make(map[int64]*blockSums, len(c.m)), 0
	for off, b := range c.m {
		if n, ok := moved[off]; ok {
			m[n], bytes = b, bytes+b.cost()
		}
	}
	c.seg, c.m, c.bytes = to, m, bytes
}

// GetRange reads n bytes of an object from byte off; see
// ownership.RangeReader. Like Get it first catches up with what other
// Stores wrote. A body of up to 16 KiB is read and checked whole, as by a
// Get; of a larger one, only the 4 KiB blocks that hold the range are
// read, once the Store has checked the record whole (doc.go, Range reads).
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (ownership.Object, error) {
	if err := ownership.ValidateKey(key); err != nil {
		return ownership.Object{}, fmt.Errorf("dirstore: get range: %w", err)
	}
	if err := ownership.ValidateRange(off, n); err != nil {
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %w", key, err)
	}
	return s.view(ctx, key, func() (ownership.Object, error) { return s.readRange(key, off, n) })
}

// readRange reads the range of key's current version. The caller holds mu.
func (s *Store) readRange(key string, off, n int64) (ownership.Object, error) {
	e, ok := s.idx.get(key)
	if !ok {
		return ownership.Object{}, fmt.Errorf("dirstore: get %q: %w", key, ownership.ErrNotFound)
	}
	bodyLen := e.bodyLen()
	lo, hi := ownership.RangeOf(off, n, bodyLen)
	if bodyLen <= rangeWholeMax {
		obj, err := s.read(key)
		if err != nil {
			return ownership.Object{}, err
		}
		// A body that aliases the record's few KiB, which no one else
		// holds.
		obj.Body = obj.Body[lo:hi:hi]
		return obj, nil
	}

	sg := s.seg
	sums := s.sums.get(sg, e)
	if sums == nil {
		var err error
		if sums, err = s.checkRecord(key, e); err != nil {
			return ownership.Object{}, err
		}
		s.sums.add(sg, e.off, sums)
	}
	if lo == hi {
		return ownership.Object{Body: []byte{}, ETag: e.etag.ETag()}, nil
	}
	first, last := lo/sumBlock, (hi-1)/sumBlock
	start, end := first*sumBlock, min((last+1)*sumBlock, bodyLen)
	buf := make([]byte, end-start)
	bodyOff := e.off + recHeaderLen + int64(e.keyLen)
	if err := s.preadRecord(key, e, buf, bodyOff+start); err != nil {
		return ownership.Object{}, err
	}
	for i := first; i <= last; i++ {
		block := buf[(i-first)*sumBlock : min((i-first+1)*sumBlock, int64(len(buf)))]
		if checksum(block) != sums.sums[i] {
			return ownership.Object{}, s.damaged(key, e, fmt.Errorf("%w: block %d of the body (bytes %d to %d) fails the sum taken when the record was checked",
				ErrCorrupt, i, i*sumBlock, i*sumBlock+int64(len(block))))
		}
	}
	body := buf[lo-start : hi-start]
	if len(body) < len(buf) {
		// A caller may keep the body (kvrun's cache counts what it holds
		// by its capacity): it holds the range, not the blocks around it.
		body = bytes.Clone(body)
	}
	return ownership.Object{Body: body, ETag: e.etag.ETag()}, nil
}

// checkRecord reads the record e locates, a chunk at a time, checks it
// whole as read does, and returns the sums of its body's blocks. The caller
// holds mu.
func (s *Store) checkRecord(key string, e entry) (*blockSums, error) {
	h := make([]byte, recHeaderLen+int(e.keyLen))
	if err := s.preadRecord(key, e, h, e.off); err != nil {
		return nil, err
	}
	if le.Uint32(h[4:]) != e.size || h[8] != kindPut || le.Uint16(h[10:]) != e.keyLen ||
		etagBits(h[12:28]) != e.etag || string(h[recHeaderLen:]) != key {
		return nil, s.damaged(key, e, fmt.Errorf("%w: not the record the index names", ErrCorrupt))
	}
	sum := crc32.Update(0, castagnoli, h[4:])
	bodyLen := e.bodyLen()
	sums := &blockSums{etag: e.etag, size: e.size, sums: make([]uint32, (bodyLen+sumBlock-1)/sumBlock)}
	// Invariant: readChunk is a multiple of sumBlock, so every chunk
	// starts at a block.
	chunk := make([]byte, min(bodyLen, readChunk))
	bodyOff := e.off + int64(len(h))
	for at := int64(0); at < bodyLen; {
		c := chunk[:min(int64(len(chunk)), bodyLen-at)]
		if err := s.preadRecord(key, e, c, bodyOff+at); err != nil {
			return nil, err
		}
		sum = crc32.Update(sum, castagnoli, c)
		for i := 0; i < len(c); i += sumBlock {
			sums.sums[(at+int64(i))/sumBlock] = checksum(c[i:min(i+sumBlock, len(c))])
		}
		at += int64(len(c))
	}
	if sum != le.Uint32(h) {
		return nil, s.damaged(key, e, fmt.Errorf("%w: record checksum mismatch", ErrCorrupt))
	}
	return sums, nil
}

// preadRecord reads part of the record e locates. A segment that ends
// before it is damage to the whole store, as in read.
func (s *Store) preadRecord(key string, e entry, buf []byte, off int64) error {
	sg := s.seg
	err := preadFull(sg.fd, sg.path, buf, off)
	if err == nil {
		return nil
	}
	if errors.Is(err, errShortFile) {
		err = s.fatal(fmt.Errorf("%w: %s ends before the record at offset %d that the index names: %w", ErrCorrupt, sg.path, e.off, err), sg.path)
	}
	return fmt.Errorf("dirstore: get %q: %w", key, err)
}

// damaged is the error of a record that fails its check: damage to that
// object alone, as in read.
func (s *Store) damaged(key string, e entry, err error) error {
	return fmt.Errorf("dirstore: get %q: %w: %s at offset %d: %w", key, ownership.ErrDamaged, s.seg.path, e.off, err)
}
