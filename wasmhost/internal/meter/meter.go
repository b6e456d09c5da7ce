// Package meter rewrites a WebAssembly module so that its code calls a
// host function every so many loop iterations: the host can then stop a
// guest that runs too long, from inside the guest's own thread, without
// the runtime checking a flag at every loop back-edge.
//
// Instrument adds a mutable i32 global (the fuel), a function import (the
// check) and, at the head of every loop and before every tail call, a few
// instructions that take one unit of fuel and, when the fuel is out, call
// the check and fill the fuel again. Every unbounded computation goes
// through a loop head or a tail call (plain recursion ends in a stack
// overflow), so a guest calls the check at least once every Fuel loop
// iterations. The check returns to let the guest go on, or traps to stop
// it; either way the guest's thread is back in the host there, which is
// also where a Go runtime may preempt it.
//
// Adding an import shifts the indices of the module's own functions by
// one: calls, ref.func, exports, the start function, element segments and
// the function names of the name section are rewritten with them. Debug
// sections (DWARF, source maps) describe code offsets that no longer hold
// and are dropped.
package meter

import (
	"errors"
	"fmt"
	"strings"
)

// Import names the host function the instrumented module imports as its
// check: a function of no parameters and no results.
type Import struct {
	Module, Name string
}

// Section ids of the binary format.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// order is the rank of each known section in a module.
var order = map[byte]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5, secTag: 6,
	secGlobal: 7, secExport: 8, secStart: 9, secElement: 10, secDataCount: 11,
	secCode: 12, secData: 13,
}

type section struct {
	id   byte
	name string // custom sections
	body []byte
}

// module is what the rewrite needs to know of a module.
type module struct {
	sections        []section
	importedFuncs   uint32
	importedGlobals uint32
	definedGlobals  uint32
	types           uint32
}

// Instrument returns wasm with the fuel meter inserted: check is called
// once every fuel loop heads and tail calls, at most. wasm is not
// modified. A module Instrument cannot read is refused with an error
// naming what it met.
func Instrument(wasm []byte, check Import, fuel int32) ([]byte, error) {
	if fuel <= 0 {
		return nil, fmt.Errorf("meter: fuel %d, want > 0", fuel)
	}
	m, err := parse(wasm)
	if err != nil {
		return nil, fmt.Errorf("meter: %w", err)
	}
	rw := &rewriter{
		imported: m.importedFuncs,
		global:   m.importedGlobals + m.definedGlobals,
	}
	// The check is imported last: its index is the count of the
	// module's own imported functions.
	rw.seq = checkSequence(rw.global, m.importedFuncs, fuel)

	out := make([]byte, 0, len(wasm)+len(wasm)/8)
	out = append(out, wasm[:8]...)
	added := map[byte][]byte{}
	// The sections to add if the module has none of them.
	added[secType] = appendU32(nil, 0)
	added[secImport] = appendU32(nil, 0)
	added[secGlobal] = appendU32(nil, 0)
	for _, s := range m.sections {
		if _, ok := added[s.id]; ok {
			added[s.id] = s.body
		}
	}
	emitted := map[byte]bool{}
	emit := func(id byte) error {
		var body []byte
		var err error
		switch id {
		case secType:
			body = appendVecItem(added[secType], []byte{0x60, 0, 0})
		case secImport:
			var entry []byte
			entry = appendName(entry, check.Module)
			entry = appendName(entry, check.Name)
			entry = append(entry, 0x00)
			entry = appendU32(entry, m.types)
			body = appendVecItem(added[secImport], entry)
		case secGlobal:
			body, err = rw.globals(added[secGlobal])
			if err == nil {
				g := []byte{0x7F, 0x01, 0x41}
				g = appendS32(g, fuel)
				g = append(g, 0x0B)
				body = appendVecItem(body, g)
			}
		}
		if err != nil {
			return err
		}
		out = appendSection(out, id, body)
		emitted[id] = true
		return nil
	}
	for _, s := range m.sections {
		if s.id != secCustom {
			// Sections this rewrite adds go where the order wants them.
			for _, id := range []byte{secType, secImport, secGlobal} {
				if !emitted[id] && order[id] < order[s.id] {
					if err := emit(id); err != nil {
						return nil, fmt.Errorf("meter: %w", err)
					}
				}
			}
		}
		var body []byte
		var err error
		switch s.id {
		case secType, secImport, secGlobal:
			if err := emit(s.id); err != nil {
				return nil, fmt.Errorf("meter: %w", err)
			}
			continue
		case secTable:
			body, err = rw.tables(s.body)
		case secExport:
			body, err = rw.exports(s.body)
		case secStart:
			r := &reader{b: s.body}
			f := r.u32()
			body, err = appendU32(nil, rw.fn(f)), r.done("start section")
		case secElement:
			body, err = rw.elements(s.body)
		case secCode:
			body, err = rw.code(s.body)
		case secCustom:
			switch {
			case s.name == "name":
				body = rw.names(s.body)
				if body == nil {
					continue // unreadable names are dropped, as a runtime would ignore them
				}
			case strings.HasPrefix(s.name, ".debug_"), s.name == "sourceMappingURL", s.name == "external_debug_info":
				continue
			default:
				body = s.body
			}
		default:
			body = s.body
		}
		if err != nil {
			return nil, fmt.Errorf("meter: %w", err)
		}
		out = appendSection(out, s.id, body)
	}
	for _, id := range []byte{secType, secImport, secGlobal} {
		if !emitted[id] {
			if err := emit(id); err != nil {
				return nil, fmt.Errorf("meter: %w", err)
			}
		}
	}
	return out, nil
}

// checkSequence is what goes at a loop head or before a tail call:
//
//	global.get $fuel
//	i32.eqz
//	if
//	  call $check
//	  i32.const fuel
//	  global.set $fuel
//	end
//	global.get $fuel
//	i32.const 1
//	i32.sub
//	global.set $fuel
//
// It leaves the operand stack as it found it.
func checkSequence(global, check uint32, fuel int32) []byte {
	b := append([]byte{0x23}, appendU32(nil, global)...)
	b = append(b, 0x45, 0x04, 0x40, 0x10)
	b = appendU32(b, check)
	b = append(b, 0x41)
	b = appendS32(b, fuel)
	b = append(b, 0x24)
	b = appendU32(b, global)
	b = append(b, 0x0B, 0x23)
	b = appendU32(b, global)
	b = append(b, 0x41, 0x01, 0x6B, 0x24)
	b = appendU32(b, global)
	return b
}

// parse reads the sections of wasm and counts what the rewrite shifts.
func parse(wasm []byte) (*module, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module")
	}
	if string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, fmt.Errorf("binary format version % x, want 01 00 00 00", wasm[4:8])
	}
	m := &module{}
	r := &reader{b: wasm, p: 8}
	last := 0
	for r.p < len(r.b) && r.err == nil {
		id := r.byte()
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			break
		}
		s := section{id: id, body: body}
		if id == secCustom {
			cr := &reader{b: body}
			s.name = string(cr.name())
			if cr.err != nil {
				return nil, errors.New("custom section without a name")
			}
		} else {
			rank, ok := order[id]
			if !ok {
				return nil, fmt.Errorf("unknown section id %d", id)
			}
			if rank <= last {
				return nil, fmt.Errorf("section id %d out of order", id)
			}
			last = rank
		}
		switch id {
		case secType:
			types, err := countTypes(body)
			if err != nil {
				return nil, err
			}
			m.types = types
		case secImport:
			if err := m.readImports(body); err != nil {
				return nil, err
			}
		case secGlobal:
			m.definedGlobals = (&reader{b: body}).u32()
		}
		m.sections = append(m.sections, s)
	}
	if r.err != nil {
		return nil, fmt.Errorf("sections: %w", r.err)
	}
	return m, nil
}

// countTypes counts the types of a type section: an entry may be a
// recursion group (0x4E) of several, which wazero reads too.
func countTypes(body []byte) (uint32, error) {
	r := &reader{b: body}
	n := r.u32()
	var types uint32
	for i := uint32(0); i < n && r.err == nil; i++ {
		group := uint32(1)
		if r.p < len(r.b) && r.b[r.p] == 0x4E {
			r.p++
			group = r.u32()
		}
		for j := uint32(0); j < group && r.err == nil; j++ {
			if form := r.byte(); form != 0x60 && r.err == nil {
				r.fail(fmt.Errorf("type form %#x", form))
			}
			for range 2 { // parameters, results
				k := r.u32()
				for l := uint32(0); l < k && r.err == nil; l++ {
					r.valtype()
				}
			}
			types++
		}
	}
	return types, r.done("type section")
}

func (m *module) readImports(body []byte) error {
	r := &reader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00: // function: type index
			r.u32()
			m.importedFuncs++
		case 0x01: // table: reference type, limits
			if r.p < len(r.b) && r.b[r.p] == 0x40 {
				// An initialiser, which only a table definition has;
				// wazero reads it here too.
				return fmt.Errorf("import %d: table with an initialiser", i)
			}
			r.valtype()
			r.limits()
		case 0x02: // memory: limits
			r.limits()
		case 0x03: // global: value type, mutability
			r.valtype()
			r.byte()
			m.importedGlobals++
		case 0x04: // tag: attribute, type index
			r.byte()
			r.u32()
		default:
			if r.err == nil {
				return fmt.Errorf("import %d: unknown kind %#x", i, kind)
			}
		}
	}
	return r.done("import section")
}

// rewriter shifts function indices and inserts the check sequence.
type rewriter struct {
	imported uint32 // imported functions before the rewrite
	global   uint32 // the fuel's global index
	seq      []byte // checkSequence
}

// fn is the new index of the function that had index f.
func (w *rewriter) fn(f uint32) uint32 {
	if f < w.imported {
		return f
	}
	return f + 1
}

func (w *rewriter) globals(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		start := r.p
		r.valtype()
		r.byte()
		out = append(out, body[start:r.p]...)
		out = w.expr(r, out, false)
	}
	return out, r.done("global section")
}

// tables rewrites the initialisers of the tables that have one (0x40
// 0x00 before the table type).
func (w *rewriter) tables(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		start := r.p
		init := r.p < len(r.b) && r.b[r.p] == 0x40
		if init {
			r.bytes(2)
		}
		r.valtype()
		r.limits()
		out = append(out, body[start:r.p]...)
		if init {
			out = w.expr(r, out, false)
		}
	}
	return out, r.done("table section")
}

func (w *rewriter) exports(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		start := r.p
		r.name()
		kind := r.byte()
		out = append(out, body[start:r.p]...)
		idx := r.u32()
		switch {
		case kind == 0x00:
			idx = w.fn(idx)
		case kind == 0x03 && idx >= w.global:
			return nil, fmt.Errorf("export %d: global index %d out of range", i, idx)
		}
		out = appendU32(out, idx)
	}
	return out, r.done("export section")
}

func (w *rewriter) elements(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		flags := r.u32()
		out = appendU32(out, flags)
		if flags > 7 {
			return nil, fmt.Errorf("element segment %d: flags %d", i, flags)
		}
		if flags&2 != 0 && flags&1 == 0 { // explicit table index
			out = appendU32(out, r.u32())
		}
		if flags&1 == 0 { // active: offset
			out = w.expr(r, out, false)
		}
		if flags&3 != 0 { // element kind or reference type
			start := r.p
			if flags&4 != 0 {
				r.valtype()
			} else {
				r.byte()
			}
			out = append(out, body[start:r.p]...)
		}
		count := r.u32()
		out = appendU32(out, count)
		for j := uint32(0); j < count && r.err == nil; j++ {
			if flags&4 != 0 {
				out = w.expr(r, out, false)
			} else {
				out = appendU32(out, w.fn(r.u32()))
			}
		}
	}
	return out, r.done("element section")
}

func (w *rewriter) code(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := make([]byte, 0, len(body)+len(body)/8)
	out = appendU32(out, n)
	var fb []byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		f := &reader{b: r.bytes(int(size))}
		if r.err != nil {
			break
		}
		fb = fb[:0]
		groups := f.u32()
		fb = appendU32(fb, groups)
		for j := uint32(0); j < groups && f.err == nil; j++ {
			start := f.p
			f.u32()
			f.valtype()
			fb = append(fb, f.b[start:f.p]...)
		}
		fb = w.expr(f, fb, true)
		if err := f.done("function body"); err != nil {
			return nil, fmt.Errorf("function %d: %w", w.imported+i, err)
		}
		out = appendU32(out, uint32(len(fb)))
		out = append(out, fb...)
	}
	return out, r.done("code section")
}

// names rewrites the function indices of the name section's function,
// local and label names; nil if the section cannot be read.
func (w *rewriter) names(body []byte) []byte {
	r := &reader{b: body}
	r.name()
	out := append([]byte(nil), body[:r.p]...)
	for r.p < len(r.b) && r.err == nil {
		id := r.byte()
		sub := &reader{b: r.bytes(int(r.u32()))}
		if r.err != nil {
			return nil
		}
		if id < 1 || id > 3 {
			out = append(out, id)
			out = appendU32(out, uint32(len(sub.b)))
			out = append(out, sub.b...)
			continue
		}
		n := sub.u32()
		nb := appendU32(nil, n)
		for i := uint32(0); i < n && sub.err == nil; i++ {
			nb = appendU32(nb, w.fn(sub.u32()))
			start := sub.p
			if id == 1 {
				sub.name()
			} else {
				k := sub.u32()
				for j := uint32(0); j < k && sub.err == nil; j++ {
					sub.u32()
					sub.name()
				}
			}
			nb = append(nb, sub.b[start:sub.p]...)
		}
		if sub.done("") != nil {
			return nil
		}
		out = append(out, id)
		out = appendU32(out, uint32(len(nb)))
		out = append(out, nb...)
	}
	if r.err != nil {
		return nil
	}
	return out
}

// expr copies the instructions of r up to the end of the expression, with
// function indices shifted and, if code, the check sequence at loop heads
// and before tail calls, onto out.
func (w *rewriter) expr(r *reader, out []byte, code bool) []byte {
	depth := 1
	for depth > 0 && r.err == nil {
		start := r.p
		op := r.byte()
		switch op {
		case 0x02, 0x04, 0x06: // block, if, try
			r.blocktype()
			depth++
		case 0x03: // loop
			r.blocktype()
			depth++
			out = append(out, r.b[start:r.p]...)
			if code {
				out = append(out, w.seq...)
			}
			continue
		case 0x1F: // try_table
			r.blocktype()
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				switch kind := r.byte(); kind {
				case 0x00, 0x01: // catch, catch_ref: tag, label
					r.u32()
					r.u32()
				case 0x02, 0x03: // catch_all, catch_all_ref: label
					r.u32()
				default:
					r.fail(fmt.Errorf("try_table catch kind %#x", kind))
				}
			}
			depth++
		case 0x0B, 0x18: // end, delegate (which ends a try)
			if op == 0x18 {
				r.u32()
			}
			depth--
		case 0x10, 0x12: // call, return_call
			f := w.fn(r.u32())
			if op == 0x12 && code {
				out = append(out, w.seq...)
			}
			out = append(out, op)
			out = appendU32(out, f)
			continue
		case 0x23, 0x24: // global.get, global.set
			if g := r.u32(); g >= w.global {
				// Out of range in the module as written: it must
				// not become the fuel.
				r.fail(fmt.Errorf("global index %d out of range", g))
			}
		case 0xD2: // ref.func
			out = append(out, op)
			out = appendU32(out, w.fn(r.u32()))
			continue
		case 0x13, 0x15: // return_call_indirect, return_call_ref
			r.immediates(op)
			if code {
				out = append(out, w.seq...)
			}
		default:
			r.immediates(op)
		}
		out = append(out, r.b[start:r.p]...)
	}
	return out
}
