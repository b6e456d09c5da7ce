package meter

import (
	"errors"
	"fmt"
)

// reader reads the binary format. The first error stops it: every later
// read returns zero, and err says what went wrong and where.
type reader struct {
	b   []byte
	p   int
	err error
}

var errShort = errors.New("unexpected end")

// errMisread is an encoding the binary format allows and wazero reads
// otherwise.
var errMisread = errors.New("wazero reads it otherwise")

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %w", r.p, err)
	}
	r.p = len(r.b)
}

// done reports the first error, or an error if bytes are left over.
func (r *reader) done(what string) error {
	if r.err == nil && r.p != len(r.b) {
		return fmt.Errorf("%s: %d bytes left over", what, len(r.b)-r.p)
	}
	if r.err != nil && what != "" {
		return fmt.Errorf("%s: %w", what, r.err)
	}
	return r.err
}

func (r *reader) byte() byte {
	if r.p >= len(r.b) {
		r.fail(errShort)
		return 0
	}
	c := r.b[r.p]
	r.p++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.p {
		r.fail(errShort)
		return nil
	}
	s := r.b[r.p : r.p+n]
	r.p += n
	return s
}

// leb reads an LEB128 number of at most max bytes and returns its low 64
// bits, unsigned.
func (r *reader) leb(max int) uint64 {
	var v uint64
	for i := 0; i < max; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if i < 10 {
			v |= uint64(c&0x7F) << (7 * i)
		}
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(errors.New("LEB128 number too long"))
	return 0
}

func (r *reader) u32() uint32 {
	v := r.leb(5)
	if v > 1<<32-1 {
		r.fail(errors.New("u32 out of range"))
		return 0
	}
	return uint32(v)
}

func (r *reader) name() []byte { return r.bytes(int(r.u32())) }

// valtype reads a value type: one byte, or a typed reference with its
// heap type.
func (r *reader) valtype() {
	switch r.byte() {
	case 0x63, 0x64: // (ref null ht), (ref ht)
		r.leb(5)
	}
}

func (r *reader) limits() {
	flags := r.byte()
	r.leb(10)
	if flags&1 != 0 {
		r.leb(10)
	}
}

// blocktype reads an empty block type, a value type or a type index: an
// s33, whatever its length, as wazero reads it. A typed reference (-29,
// -28: 0x63, 0x64 in one byte) is followed by its heap type.
func (r *reader) blocktype() {
	start := r.p
	v := r.leb(5)
	if r.err != nil {
		return
	}
	if n := 7 * (r.p - start); v&(1<<(n-1)) != 0 {
		v |= ^uint64(0) << n // negative
	}
	if int64(v) == -29 || int64(v) == -28 {
		r.leb(5)
	}
}

// memarg reads an alignment (with a memory index if its bit 6 is set)
// and an offset.
func (r *reader) memarg() {
	if r.u32()&0x40 != 0 {
		r.u32()
	}
	r.leb(10)
}

// immediates reads the immediates of the instruction op, whose opcode
// byte was read. Instructions with immediates the rewrite changes are
// handled by its caller; an opcode it does not know fails r.
func (r *reader) immediates(op byte) {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0A || op == 0x0B || op == 0x0F ||
		op == 0x19 || op == 0x1A || op == 0x1B || op == 0xD1 || op == 0xD3 || op == 0xD4:
		// unreachable, nop, else, throw_ref, end, return, catch_all, drop,
		// select, ref.is_null, ref.eq, ref.as_non_null
	case op >= 0x45 && op <= 0xC4: // numeric instructions
	case op == 0x07 || op == 0x08 || op == 0x09 || op == 0x0C || op == 0x0D || op == 0x18 ||
		op == 0x10 || op == 0x12 || op == 0x14 || op == 0x15 || op == 0xD2 || op == 0xD5 || op == 0xD6:
		// catch, throw, rethrow, br, br_if, delegate, call, return_call,
		// call_ref, return_call_ref, ref.func, br_on_null, br_on_non_null
		r.u32()
	case op == 0x0E: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1C: // select t*
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			r.valtype()
		}
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get, table.set
		r.u32()
	case op >= 0x28 && op <= 0x3E: // loads and stores
		r.memarg()
	case op == 0x3F || op == 0x40: // memory.size, memory.grow
		r.u32()
	case op == 0x41: // i32.const
		r.leb(5)
	case op == 0x42: // i64.const
		r.leb(10)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xD0: // ref.null
		r.leb(5)
	case op == 0xFC:
		r.prefixFC()
	case op == 0xFD:
		r.prefixFD()
	case op == 0xFE:
		r.prefixFE()
	default:
		r.fail(fmt.Errorf("unknown opcode %#x", op))
	}
}

// prefixFC: saturating truncations, bulk memory and table instructions.
func (r *reader) prefixFC() {
	switch sub := r.u32(); {
	case sub <= 7: // trunc_sat
	case sub == 8: // memory.init data memory
		r.u32()
		r.u32()
	case sub == 9: // data.drop
		r.u32()
	case sub == 10: // memory.copy memory memory
		r.u32()
		r.u32()
	case sub == 11: // memory.fill memory
		r.u32()
	case sub == 12 || sub == 14: // table.init elem table, table.copy table table
		r.u32()
		r.u32()
	case sub == 13 || (sub >= 15 && sub <= 17): // elem.drop, table.grow, table.size, table.fill
		r.u32()
	default:
		r.fail(fmt.Errorf("unknown opcode 0xfc %d", sub))
	}
}

// prefixFD: vector instructions. wazero reads their opcode as one byte,
// not as LEB128: the two agree on an opcode below 0x80 in one byte, and
// on one up to 0xFF in two, whose second byte, 0x01, is a nop to wazero.
// Any other encoding (overlong, or relaxed SIMD's 0x100 and up) wazero
// reads as other instructions, so is refused.
func (r *reader) prefixFD() {
	start := r.p
	sub := r.u32()
	if n := r.p - start; r.err == nil && n != 1 && (n != 2 || sub < 0x80 || sub > 0xFF) {
		r.fail(fmt.Errorf("vector opcode %d in %d bytes: %w", sub, n, errMisread))
		return
	}
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads and stores
		r.memarg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		r.byte()
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		r.memarg()
		r.byte()
	case sub <= 0xFF: // the rest have no immediates
	default:
		r.fail(fmt.Errorf("unknown opcode 0xfd %d", sub))
	}
}

// prefixFE: atomic memory instructions.
func (r *reader) prefixFE() {
	switch sub := r.u32(); {
	case sub == 3: // atomic.fence
		r.byte()
	case sub <= 2 || (sub >= 0x10 && sub <= 0x4E):
		r.memarg()
	default:
		r.fail(fmt.Errorf("unknown opcode 0xfe %d", sub))
	}
}

// Encoding.

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

func appendSection(b []byte, id byte, body []byte) []byte {
	b = append(b, id)
	b = appendU32(b, uint32(len(body)))
	return append(b, body...)
}

// appendVecItem returns the vector vec with item added at its end.
func appendVecItem(vec []byte, item []byte) []byte {
	r := &reader{b: vec}
	count := r.u32()
	out := appendU32(nil, count+1)
	out = append(out, vec[r.p:]...)
	return append(out, item...)
}
