package wasmhost

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
)

// The Go linker emits tens of thousands of small active data segments
// (22,193 for the counter example, 544 KB in all), and wazero applies
// each one at every instantiation with its own bookkeeping: an offset
// expression evaluated, a slice header kept per segment per guest.
// Where the host can, it takes the data section out of the module and
// maps the segments' image into each guest instead (memory.go); else
// mergeDataSegments rewrites them into a few large ones before the module
// is compiled. Either way the memory a guest starts with is the same byte
// for byte.

// mergeGap is the largest run of zero bytes that merging fills in
// between two segments. Below a 4 KiB page, filling it touches no page
// the segments did not touch already.
const mergeGap = 4096

// moduleData is what the host knows of a module's data segments.
type moduleData struct {
	segs             []segment // sorted by offset
	secStart, secEnd int       // the data section in the module, header included
	memMin           uint64    // bytes of the memory the module declares; 0 if none or imported
}

// end is the end of the last segment in memory: instantiation writes
// nothing above it.
func (d *moduleData) end() uint64 {
	if len(d.segs) == 0 {
		return 0
	}
	last := d.segs[len(d.segs)-1]
	return uint64(last.off) + uint64(len(last.init))
}

// parseModuleData finds the data segments of wasm. It reports false for
// a module without any, or with anything it does not handle: a data
// count section (segments may then be named by memory.init and
// data.drop), a passive segment, an offset that is not an i32.const,
// overlapping segments.
func parseModuleData(wasm []byte) (d moduleData, ok bool) {
	const memorySection, dataSection, dataCountSection = 5, 11, 12
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return d, false
	}
	var data []byte // contents of the data section
	d.secStart = -1
	for p := 8; p < len(wasm); {
		id := wasm[p]
		size, n := binary.Uvarint(wasm[p+1:])
		body := p + 1 + n
		if n <= 0 || size > uint64(len(wasm)-body) {
			return d, false
		}
		switch id {
		case memorySection:
			// One memory: limits flags 0 (min) or 1 (min, max), then min.
			sec := wasm[body : body+int(size)]
			if len(sec) >= 3 && sec[0] == 1 && sec[1] <= 1 {
				if min, n := binary.Uvarint(sec[2:]); n > 0 && min <= 1<<16 {
					d.memMin = min * pageSize
				}
			}
		case dataCountSection:
			return d, false
		case dataSection:
			data, d.secStart, d.secEnd = wasm[body:body+int(size)], p, body+int(size)
		}
		p = body + int(size)
	}
	if d.secStart < 0 {
		return d, false
	}
	segs, err := parseDataSegments(data)
	if err != nil || len(segs) == 0 {
		return d, false
	}
	d.segs = segs
	return d, true
}

// withoutData returns wasm without its data section.
func (d *moduleData) withoutData(wasm []byte) []byte {
	return slices.Concat(wasm[:d.secStart], wasm[d.secEnd:])
}

// mergeDataSegments returns wasm with runs of adjacent active data
// segments merged into one, or wasm itself if it has nothing to merge or
// anything parseModuleData does not handle.
func mergeDataSegments(wasm []byte) []byte {
	d, ok := parseModuleData(wasm)
	if !ok {
		return wasm
	}
	merged := mergeSegments(d.segs)
	if len(merged) == len(d.segs) {
		return wasm
	}
	var sec []byte
	sec = binary.AppendUvarint(sec, uint64(len(merged)))
	for _, s := range merged {
		sec = append(sec, 0x00, 0x41) // active, memory 0; i32.const
		sec = appendSleb32(sec, int32(s.off))
		sec = append(sec, 0x0b) // end
		sec = binary.AppendUvarint(sec, uint64(len(s.init)))
		sec = append(sec, s.init...)
	}
	const dataSection = 11
	out := make([]byte, 0, len(wasm)-(d.secEnd-d.secStart)+len(sec)+6)
	out = append(out, wasm[:d.secStart]...)
	out = append(out, dataSection)
	out = binary.AppendUvarint(out, uint64(len(sec)))
	out = append(out, sec...)
	return append(out, wasm[d.secEnd:]...)
}

// segment is an active data segment of memory 0: init is copied at off.
type segment struct {
	off  uint32
	init []byte
}

var errUnhandled = errors.New("data section not handled")

// parseDataSegments parses a data section whose segments are all active,
// of memory 0, at i32.const offsets, and do not overlap; it returns them
// sorted by offset. (The Go linker does not sort them.)
func parseDataSegments(sec []byte) ([]segment, error) {
	count, n := binary.Uvarint(sec)
	if n <= 0 || count > uint64(len(sec)) {
		return nil, errUnhandled
	}
	p := n
	segs := make([]segment, 0, count)
	for range count {
		// Flag 0 (active, memory 0), then i32.const <offset> end.
		if p+2 > len(sec) || sec[p] != 0x00 || sec[p+1] != 0x41 {
			return nil, errUnhandled
		}
		off, n := sleb32(sec[p+2:])
		p += 2 + n
		if n <= 0 || p >= len(sec) || sec[p] != 0x0b {
			return nil, errUnhandled
		}
		size, n := binary.Uvarint(sec[p+1:])
		p += 1 + n
		if n <= 0 || size > uint64(len(sec)-p) {
			return nil, errUnhandled
		}
		s := segment{off: uint32(off), init: sec[p : p+int(size)]}
		p += int(size)
		if uint64(s.off)+size > 1<<32 {
			return nil, errUnhandled
		}
		segs = append(segs, s)
	}
	if p != len(sec) {
		return nil, errUnhandled
	}
	// Segments that do not overlap may be applied in any order.
	slices.SortStableFunc(segs, func(a, b segment) int { return cmp.Compare(a.off, b.off) })
	for i := 1; i < len(segs); i++ {
		if uint64(segs[i-1].off)+uint64(len(segs[i-1].init)) > uint64(segs[i].off) {
			return nil, errUnhandled
		}
	}
	return segs, nil
}

// mergeSegments merges the segments (sorted, not overlapping) that are
// at most mergeGap bytes apart, filling the gaps with zeros.
func mergeSegments(segs []segment) []segment {
	var out []segment
	for _, s := range segs {
		if k := len(out); k > 0 {
			last := &out[k-1]
			if end := last.off + uint32(len(last.init)); s.off-end <= mergeGap {
				last.init = append(last.init, make([]byte, s.off-end)...)
				last.init = append(last.init, s.init...)
				continue
			}
		}
		out = append(out, segment{off: s.off, init: s.init[:len(s.init):len(s.init)]})
	}
	return out
}

// sleb32 decodes a signed LEB128 i32; n <= 0 if b does not hold one.
func sleb32(b []byte) (v int32, n int) {
	var r int64
	var shift uint
	for i, c := range b {
		if i == 5 {
			return 0, 0
		}
		r |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				r |= -1 << shift
			}
			if r < -1<<31 || r > 1<<31-1 {
				return 0, 0
			}
			return int32(r), i + 1
		}
	}
	return 0, 0
}

// appendSleb32 appends v in signed LEB128.
func appendSleb32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
