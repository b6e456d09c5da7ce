package meter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// A small assembler for the test modules.

func u(v uint32) []byte { return appendU32(nil, v) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func vec(items ...[]byte) []byte { return cat(u(uint32(len(items))), cat(items...)) }

func sec(id byte, body []byte) []byte { return appendSection(nil, id, body) }

func str(s string) []byte { return appendName(nil, s) }

func body(locals []byte, code ...byte) []byte {
	b := cat(locals, code)
	return cat(u(uint32(len(b))), b)
}

func assemble(sections ...[]byte) []byte {
	return cat([]byte("\x00asm\x01\x00\x00\x00"), cat(sections...))
}

// testModule imports env.tick (function 0) and defines:
//
//	1 count(n) -> i32: a loop of n rounds, returns n
//	2 spin(): an endless loop
//	3 viaCall(n) -> i32: count(n) through call
//	4 viaTable(n) -> i32: count(n) through table slot 0 (element, index)
//	5 viaTable2(n) -> i32: viaTable(n) through table slot 1 (element, ref.func)
//	6 start(): calls env.tick; the start function
//	7 forever(): return_call forever
//
// with a name section naming 1 to 7.
var testModule = assemble(
	sec(secType, vec(
		[]byte{0x60, 1, 0x7F, 1, 0x7F}, // 0: (i32) -> i32
		[]byte{0x60, 0, 0},             // 1: () -> ()
	)),
	sec(secImport, vec(cat(str("env"), str("tick"), []byte{0x00, 1}))),
	sec(secFunction, vec(u(0), u(1), u(0), u(0), u(0), u(1), u(1))),
	sec(secTable, vec([]byte{0x70, 0x00, 2})),
	sec(secExport, vec(
		cat(str("count"), []byte{0, 1}),
		cat(str("spin"), []byte{0, 2}),
		cat(str("viaCall"), []byte{0, 3}),
		cat(str("viaTable"), []byte{0, 4}),
		cat(str("viaTable2"), []byte{0, 5}),
		cat(str("forever"), []byte{0, 7}),
	)),
	sec(secStart, u(6)),
	sec(secElement, vec(
		[]byte{0x00, 0x41, 0x00, 0x0B, 1, 1},                // slot 0: function 1
		[]byte{0x04, 0x41, 0x01, 0x0B, 1, 0xD2, 0x04, 0x0B}, // slot 1: ref.func 4
	)),
	sec(secCode, vec(
		body([]byte{1, 1, 0x7F},
			0x03, 0x40, // loop
			0x20, 0x01, 0x41, 0x01, 0x6A, 0x21, 0x01, // acc++
			0x20, 0x01, 0x20, 0x00, 0x49, 0x0D, 0x00, // br_if 0 (acc < n)
			0x0B,
			0x20, 0x01, 0x0B),
		body([]byte{0}, 0x03, 0x40, 0x0C, 0x00, 0x0B, 0x0B),
		body([]byte{0}, 0x20, 0x00, 0x10, 0x01, 0x0B),
		body([]byte{0}, 0x20, 0x00, 0x41, 0x00, 0x11, 0x00, 0x00, 0x0B),
		body([]byte{0}, 0x20, 0x00, 0x41, 0x01, 0x11, 0x00, 0x00, 0x0B),
		body([]byte{0}, 0x10, 0x00, 0x0B),
		body([]byte{0}, 0x12, 0x07, 0x0B),
	)),
	sec(secCustom, cat(str("name"), []byte{1}, func() []byte {
		m := vec(
			cat(u(1), str("count")), cat(u(2), str("spin")), cat(u(3), str("viaCall")),
			cat(u(4), str("viaTable")), cat(u(5), str("viaTable2")), cat(u(6), str("start")),
			cat(u(7), str("forever")),
		)
		return cat(u(uint32(len(m))), m)
	}())),
	sec(secCustom, cat(str(".debug_info"), []byte{1, 2, 3})),
)

// host is the env module: tick counts, check counts and stops the guest
// once it was called stopAfter times (if stopAfter > 0).
type host struct {
	ticks, checks int
	stopAfter     int
}

var errStopped = errors.New("stopped by the check")

// instantiate runs wasm, instrumented with fuel, against h. The runtime
// also closes a guest when ctx is done: a safety net that keeps a broken
// meter from hanging the test.
func instantiate(t *testing.T, ctx context.Context, wasm []byte, fuel int32, h *host) api.Module {
	t.Helper()
	out, err := Instrument(wasm, Import{"env", "check"}, fuel)
	if err != nil {
		t.Fatalf("Instrument: %v", err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesTailCall).
		WithCloseOnContextDone(true))
	t.Cleanup(func() { rt.Close(context.Background()) })
	_, err = rt.NewHostModuleBuilder("env").
		NewFunctionBuilder().WithFunc(func() { h.ticks++ }).Export("tick").
		NewFunctionBuilder().WithFunc(func() {
		h.checks++
		if h.stopAfter > 0 && h.checks >= h.stopAfter {
			panic(errStopped)
		}
	}).Export("check").
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatalf("instantiate the instrumented module: %v", err)
	}
	return mod
}

func call(t *testing.T, mod api.Module, name string, args ...uint64) []uint64 {
	t.Helper()
	res, err := mod.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		t.Fatalf("%s%v: %v", name, args, err)
	}
	return res
}

func TestCheckEveryFuelRounds(t *testing.T) {
	const fuel = 100
	h := &host{}
	mod := instantiate(t, context.Background(), testModule, fuel, h)
	if h.ticks != 1 {
		t.Fatalf("start function ticked %d times, want 1", h.ticks)
	}
	total := 0
	for _, n := range []int{1, 99, 100, 101, 250, 10_000} {
		before := h.checks
		if got := call(t, mod, "count", uint64(n))[0]; got != uint64(n) {
			t.Fatalf("count(%d) = %d", n, got)
		}
		// The loop head is entered n times. The fuel carries over from
		// call to call: a check at every fuel-th entry since the start.
		total += n
		want := (total - 1) / fuel
		if h.checks != want {
			t.Fatalf("after count(%d): %d checks in all, want %d (%d this call)", n, h.checks, want, h.checks-before)
		}
	}
}

func TestIndicesShifted(t *testing.T) {
	h := &host{}
	mod := instantiate(t, context.Background(), testModule, 1000, h)
	for _, name := range []string{"count", "viaCall", "viaTable", "viaTable2"} {
		if got := call(t, mod, name, 42)[0]; got != 42 {
			t.Fatalf("%s(42) = %d, want 42", name, got)
		}
	}
	for _, name := range []string{"count", "spin", "viaCall", "viaTable", "viaTable2", "forever"} {
		if got := mod.ExportedFunction(name).Definition().Name(); got != name {
			t.Errorf("export %s: name section says %q", name, got)
		}
	}
}

func TestCheckStopsEndlessLoops(t *testing.T) {
	for _, name := range []string{"spin", "forever"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h := &host{stopAfter: 3}
			mod := instantiate(t, ctx, testModule, 1000, h)
			_, err := mod.ExportedFunction(name).Call(ctx)
			if err == nil || !strings.Contains(err.Error(), errStopped.Error()) {
				t.Fatalf("%s: err = %v, want the check's", name, err)
			}
			if h.checks != 3 {
				t.Fatalf("%d checks, want 3", h.checks)
			}
		})
	}
}

func TestDebugSectionsDropped(t *testing.T) {
	out, err := Instrument(testModule, Import{"env", "check"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parse(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.sections {
		if s.name == ".debug_info" {
			t.Fatal(".debug_info kept")
		}
	}
	if m.importedFuncs != 2 || m.definedGlobals != 1 || m.types != 3 {
		t.Fatalf("imports %d, globals %d, types %d; want 2, 1, 3", m.importedFuncs, m.definedGlobals, m.types)
	}
}

// A module with no type, import or global section gets them, in order.
func TestSectionsAdded(t *testing.T) {
	bare := assemble(sec(secCustom, cat(str("producers"), []byte{0})))
	out, err := Instrument(bare, Import{"env", "check"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wazero.NewRuntime(context.Background()).CompileModule(context.Background(), out); err != nil {
		t.Fatalf("compile: %v", err)
	}
	m, err := parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var ids []byte
	for _, s := range m.sections {
		ids = append(ids, s.id)
	}
	if string(ids) != string([]byte{secCustom, secType, secImport, secGlobal}) {
		t.Fatalf("sections %v", ids)
	}
}

func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"not wasm", []byte("hello world"), "not a WebAssembly module"},
		{"version", []byte("\x00asm\x0d\x00\x01\x00"), "version"},
		{"truncated", testModule[:len(testModule)/2], "unexpected end"},
		{"opcode", assemble(
			sec(secType, vec([]byte{0x60, 0, 0})),
			sec(secFunction, vec(u(0))),
			sec(secCode, vec(body([]byte{0}, 0xFB, 0x00, 0x0B))),
		), "unknown opcode 0xfb"},
	} {
		_, err := Instrument(c.wasm, Import{"env", "check"}, 10)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// FuzzInstrument: Instrument never panics on any input.
func FuzzInstrument(f *testing.F) {
	f.Add(testModule)
	f.Add(assemble())
	f.Fuzz(func(t *testing.T, wasm []byte) {
		_, _ = Instrument(wasm, Import{"env", "check"}, 7)
	})
}

// FuzzCode: a function body the runtime accepts is accepted once
// instrumented, and the instrumented module compiles. The body is the last of a module with a memory,
// a table, globals and functions for its instructions to use.
func FuzzCode(f *testing.F) {
	for _, b := range [][]byte{
		{0x0B},
		{0x03, 0x40, 0x0C, 0x00, 0x0B, 0x0B},
		{0x41, 0x00, 0x28, 0x02, 0x00, 0x1A, 0x0B},
		{0x41, 0x00, 0xFD, 0x00, 0x04, 0x00, 0x1A, 0x0B},
		{0x02, 0x40, 0x03, 0x7F, 0x41, 0x01, 0x0B, 0x1A, 0x0B, 0x10, 0x01, 0x0B},
		{0xD2, 0x01, 0x1A, 0x12, 0x02},
		{0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xFC, 0x0B, 0x00, 0x0B},
	} {
		f.Add(b)
	}
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfigCompiler().WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesTailCall)
	f.Fuzz(func(t *testing.T, code []byte) {
		wasm := assemble(
			sec(secType, vec([]byte{0x60, 1, 0x7F, 1, 0x7F}, []byte{0x60, 0, 0})),
			sec(secImport, vec(cat(str("env"), str("tick"), []byte{0x00, 1}))),
			sec(secFunction, vec(u(0), u(1))),
			sec(secTable, vec([]byte{0x70, 0x00, 2})),
			sec(secMemory, vec([]byte{0x00, 1})),
			sec(secGlobal, vec([]byte{0x7F, 0x01, 0x41, 0x00, 0x0B}, []byte{0x70, 0x00, 0xD2, 0x01, 0x0B})),
			sec(secElement, vec([]byte{0x00, 0x41, 0x00, 0x0B, 1, 1})),
			sec(secCode, vec(body([]byte{0}, 0x20, 0x00, 0x0B), body(nil, append([]byte{1, 1, 0x7F}, code...)...))),
		)
		rt := wazero.NewRuntimeWithConfig(ctx, cfg)
		defer rt.Close(ctx)
		_, cerr := rt.CompileModule(ctx, wasm)
		out, err := Instrument(wasm, Import{"env", "check"}, 7)
		if cerr != nil {
			return // the runtime checks what Instrument returns
		}
		if err != nil {
			t.Fatalf("a module the runtime compiles was refused: %v", err)
		}
		if _, err := rt.CompileModule(ctx, out); err != nil {
			t.Fatalf("instrumented module does not compile: %v", err)
		}
	})
}

// A module that names the global index the fuel takes was invalid as
// written; it is refused rather than given the fuel to set.
func TestFuelOutOfReach(t *testing.T) {
	for name, wasm := range map[string][]byte{
		"global.set": assemble(
			sec(secType, vec([]byte{0x60, 0, 0})),
			sec(secFunction, vec(u(0))),
			sec(secCode, vec(body([]byte{0}, 0x41, 0x7F, 0x24, 0x00, 0x0B))),
		),
		"export": assemble(
			sec(secGlobal, vec([]byte{0x7F, 0x01, 0x41, 0x00, 0x0B})),
			sec(secExport, vec(cat(str("fuel"), []byte{0x03, 1}))),
		),
	} {
		if _, err := Instrument(wasm, Import{"env", "check"}, 10); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("%s: err = %v, want out of range", name, err)
		}
	}
}
