package dirstore

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// segment is one open segment file.
type segment struct {
	fd   int
	path string
	name string // its name in the directory: segPrefix and seq in hex
	seq  uint64
	salt uint64
	// currentIno is the inode of the `current` file that named this
	// segment when it was opened: a writer that finds another one knows
	// a compaction switched segments (see catchUp).
	currentIno uint64
	// end is the offset after the last frame applied to the index.
	end int64
}

const segPrefix = "seg-"

func segName(seq uint64) string { return fmt.Sprintf("%s%016x", segPrefix, seq) }

// parseSegName returns the sequence number in a segment's name.
func parseSegName(name string) (uint64, bool) {
	hexSeq, ok := strings.CutPrefix(name, segPrefix)
	if !ok || len(hexSeq) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(hexSeq, 16, 64)
	return seq, err == nil
}

// readChunk is how much of a segment a scan reads at once: enough for
// many frames per system call, little enough to keep in memory.
const readChunk = 1 << 20

// window reads a segment through a buffer, so that a scan of many small
// frames costs a pread per chunk rather than two per frame.
type window struct {
	sg   *segment
	size int64 // the file size the scan stops at
	base int64 // file offset of buf[0]
	buf  []byte
}

// bytes returns the n bytes at off; off+n must not pass w.size. The slice
// is valid until the next call. It reads ahead up to w.size, but the file
// may have become shorter since the fstat that gave w.size (a writer cut a
// torn tail): a read that ends early counts as long as it covers the n
// bytes asked for, and only one that does not reports errShortFile.
func (w *window) bytes(off, n int64) ([]byte, error) {
	if off >= w.base && off+n <= w.base+int64(len(w.buf)) {
		return w.buf[off-w.base : off-w.base+n], nil
	}
	m := min(max(n, readChunk), w.size-off)
	if int64(cap(w.buf)) < m {
		w.buf = make([]byte, m)
	}
	w.buf, w.base = w.buf[:m], off
	got, err := pread(w.sg.fd, w.sg.path, w.buf, off)
	if err == nil && int64(got) < n {
		err = pathErr("pread", w.sg.path, errShortFile)
	}
	if err != nil {
		w.buf = w.buf[:0]
		return nil, err
	}
	w.buf = w.buf[:got]
	return w.buf[:n], nil
}

// stop describes the first bytes of a scan that are not a whole frame.
type stop struct {
	at int64
	// complete: the frame's header checks and its payload lies wholly in
	// the file, but the payload fails its checksum.
	complete bool
	frameEnd int64 // with complete
}

// scan reads the whole frames in [from, size) and calls fn with each
// one's offset and payload (valid only during the call). It returns the
// offset after the last whole frame, and where the scan stopped short of
// size, if it did.
func (sg *segment) scan(from, size int64, fn func(off int64, payload []byte) error) (int64, *stop, error) {
	w := &window{sg: sg, size: size}
	off := from
	for off < size {
		payload, st, err := w.frameAt(off)
		if err != nil || st != nil {
			return off, st, err
		}
		if err := fn(off, payload); err != nil {
			return off, nil, err
		}
		off += frameHeaderLen + int64(len(payload))
	}
	return off, nil, nil
}

// frameAt returns the payload of the whole frame at off, or where it falls
// short of one.
func (w *window) frameAt(off int64) ([]byte, *stop, error) {
	if off+frameHeaderLen > w.size {
		return nil, &stop{at: off}, nil
	}
	h, err := w.bytes(off, frameHeaderLen)
	if errors.Is(err, errShortFile) {
		// A writer cut a torn tail since the fstat that gave w.size.
		return nil, &stop{at: off}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	fh, ok := parseFrameHeader(h, w.sg.salt)
	end := off + frameHeaderLen + fh.payloadLen
	if !ok || end > w.size {
		return nil, &stop{at: off}, nil
	}
	payload, err := w.bytes(off+frameHeaderLen, fh.payloadLen)
	if errors.Is(err, errShortFile) {
		return nil, &stop{at: off}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if checksum(payload) != fh.sum {
		return nil, &stop{at: off, complete: true, frameEnd: end}, nil
	}
	return payload, nil, nil
}

// wholeFrameAfter reports whether a whole frame starts anywhere in
// (from, size). Only a writer holding the lock asks, about bytes after a
// frame that does not count: if one does, the bad frame is damage, not a
// write cut short by a crash.
func (sg *segment) wholeFrameAfter(from, size int64) (bool, error) {
	magic := le.AppendUint32(nil, frameMagic)
	w := &window{sg: sg, size: size}
	for off := from + 1; off+frameHeaderLen <= size; {
		chunk, err := w.bytes(off, min(size-off, readChunk))
		if err != nil {
			return false, err
		}
		i := bytes.Index(chunk, magic)
		if i < 0 {
			off += max(1, int64(len(chunk))-int64(len(magic))+1)
			continue
		}
		payload, _, err := w.frameAt(off + int64(i))
		if err != nil || payload != nil {
			return payload != nil, err
		}
		off += int64(i) + 1
	}
	return false, nil
}
