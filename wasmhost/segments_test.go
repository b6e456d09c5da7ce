package wasmhost

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/tetratelabs/wazero"
)

// wasmModule assembles a module from its sections.
func wasmModule(sections ...[]byte) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		b = append(b, s...)
	}
	return b
}

func wasmSection(id byte, body []byte) []byte {
	return append(binary.AppendUvarint([]byte{id}, uint64(len(body))), body...)
}

// memorySection declares a memory of min pages, exported as "memory",
// and a wasmkeep_on_socket that does nothing (a module needs a handler to
// compile as a class): the type, function, memory, export and code
// sections, in the order a module holds them.
func memorySection(min byte) []byte {
	const handler = "wasmkeep_on_socket"
	b := wasmSection(1, []byte{1, 0x60, 1, 0x7e, 1, 0x7f}) // (i64) -> i32
	b = append(b, wasmSection(3, []byte{1, 0})...)
	b = append(b, wasmSection(5, []byte{1, 0, min})...)
	exports := append([]byte{2, 6}, "memory\x02\x00"...)
	exports = append(append(append(exports, byte(len(handler))), handler...), 0x00, 0x00)
	b = append(b, wasmSection(7, exports)...)
	return append(b, wasmSection(10, []byte{1, 4, 0, 0x41, 0, 0x0b})...) // i32.const 0
}

// dataSection holds active segments of memory 0 (a negative offset: a
// passive segment).
func dataSection(segs ...segment) []byte {
	body := binary.AppendUvarint(nil, uint64(len(segs)))
	for _, s := range segs {
		if int32(s.off) < 0 {
			body = append(body, 0x01)
		} else {
			body = append(body, 0x00, 0x41)
			body = appendSleb32(body, int32(s.off))
			body = append(body, 0x0b)
		}
		body = binary.AppendUvarint(body, uint64(len(s.init)))
		body = append(body, s.init...)
	}
	return wasmSection(11, body)
}

// memoryOf instantiates wasm on its own wazero runtime and returns a copy
// of its memory.
func memoryOf(t *testing.T, wasm []byte) []byte {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := mod.Memory().Read(0, mod.Memory().Size())
	return bytes.Clone(b)
}

func TestMergeDataSegments(t *testing.T) {
	// Unsorted, as the Go linker emits them; 5000 is over mergeGap past
	// the others.
	wasm := wasmModule(memorySection(1), dataSection(
		segment{100, []byte("abc")},
		segment{10, []byte("xy")},
		segment{5000, []byte("far")},
		segment{103, []byte("d")},
	))
	merged := mergeDataSegments(wasm)
	if d, ok := parseModuleData(wasm); !ok || d.end() != 5003 || d.memMin != pageSize {
		t.Errorf("parseModuleData = end %d, memory %d, %v; want 5003, %d, true", d.end(), d.memMin, ok, pageSize)
	}
	want := wasmModule(memorySection(1), dataSection(
		segment{10, append(append([]byte("xy"), make([]byte, 88)...), "abcd"...)},
		segment{5000, []byte("far")},
	))
	if !bytes.Equal(merged, want) {
		t.Errorf("merged module\n%x\nwant\n%x", merged, want)
	}
	if !bytes.Equal(memoryOf(t, merged), memoryOf(t, wasm)) {
		t.Error("memory differs after merging")
	}

	for name, wasm := range map[string][]byte{
		"overlap": wasmModule(memorySection(1), dataSection(segment{10, []byte("abc")}, segment{12, []byte("x")})),
		"passive": wasmModule(memorySection(1), dataSection(segment{10, []byte("abc")}, segment{1 << 31, []byte("x")})),
		"count":   wasmModule(memorySection(1), wasmSection(12, []byte{2}), dataSection(segment{10, []byte("a")}, segment{11, []byte("b")})),
		"garbage": []byte("not wasm"),
	} {
		if out := mergeDataSegments(wasm); !bytes.Equal(out, wasm) {
			t.Errorf("%s: rewritten to %x", name, out)
		}
		if _, ok := parseModuleData(wasm); ok {
			t.Errorf("%s: parsed", name)
		}
	}
	// Nothing to merge: unchanged, with its end.
	single := wasmModule(memorySection(1), dataSection(segment{10, []byte("abc")}))
	if out := mergeDataSegments(single); !bytes.Equal(out, single) {
		t.Errorf("single segment: rewritten to %x", out)
	}
	d, _ := parseModuleData(single)
	if got, want := d.withoutData(single), wasmModule(memorySection(1)); !bytes.Equal(got, want) {
		t.Errorf("withoutData = %x, want %x", got, want)
	}
}

func TestSleb32(t *testing.T) {
	for _, v := range []int32{0, 1, 63, 64, -1, -64, -65, 1 << 20, -1 << 31, 1<<31 - 1} {
		b := appendSleb32(nil, v)
		if got, n := sleb32(b); got != v || n != len(b) {
			t.Errorf("sleb32(appendSleb32(%d) = %x) = %d, %d", v, b, got, n)
		}
	}
}

// TestMemoryReuse checks that a guest never sees the memory of one
// closed before it (the host reuses freed mappings), and that memories
// grow and are freed more than once without harm.
func TestMemoryReuse(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, Config{})
	m := mustCompile(t, r, "mem", wasmModule(memorySection(2), dataSection(segment{70000, []byte("data")})))
	dirty := func() {
		mod, mem, err := m.instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := mod.Memory().Grow(1); !ok {
			t.Fatal("grow failed")
		}
		mod.Memory().Write(0, bytes.Repeat([]byte{0xff}, int(mod.Memory().Size())))
		closeModule(ctx, mod, mem)
		if mem != nil {
			mem.Free() // again
		}
	}
	dirty()
	dirty()
	for range 3 {
		mod, mem, err := m.instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := mod.Memory().Read(0, mod.Memory().Size())
		if len(b) != 2*pageSize {
			t.Fatalf("memory of %d bytes, want %d", len(b), 2*pageSize)
		}
		want := make([]byte, len(b))
		copy(want[70000:], "data")
		if !bytes.Equal(b, want) {
			t.Fatal("a new guest sees another's memory")
		}
		defer closeModule(ctx, mod, mem)
	}
}
