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
	return instantiateWith(t, ctx, wasm, fuel, h, api.CoreFeaturesV2|experimental.CoreFeaturesTailCall)
}

// instantiateWith is instantiate with the runtime's features.
func instantiateWith(t *testing.T, ctx context.Context, wasm []byte, fuel int32, h *host, features api.CoreFeatures) api.Module {
	t.Helper()
	out, err := Instrument(wasm, Import{"env", "check"}, fuel)
	if err != nil {
		t.Fatalf("Instrument: %v", err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCoreFeatures(features).
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
// instrumented (unless the runtime reads it otherwise than the binary
// format: errMisread), and the instrumented module compiles. The body is the last of a module with a memory,
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
		if errors.Is(err, errMisread) {
			return
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

// compiles reports an error if wazero, with features, does not compile
// wasm.
func compiles(wasm []byte, features api.CoreFeatures) error {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCoreFeatures(features))
	defer rt.Close(ctx)
	_, err := rt.CompileModule(ctx, wasm)
	return err
}

// spinModule defines one function, spin () -> (), of the given body and
// ntypes () -> () types, and exports it. The function's type is type 0.
func spinModule(ntypes int, code ...byte) []byte {
	types := make([][]byte, ntypes)
	for i := range types {
		types[i] = []byte{0x60, 0, 0}
	}
	return assemble(
		sec(secType, vec(types...)),
		sec(secFunction, vec(u(0))),
		sec(secExport, vec(cat(str("spin"), []byte{0, 0}))),
		sec(secElement, vec([]byte{0x03, 0x00, 1, 0})), // declares spin for ref.func
		sec(secCode, vec(body([]byte{0}, code...))),
	)
}

// stopsOrRefuses checks that Instrument either refuses wasm, which the
// runtime accepts, or that its spin runs until the check stops it.
func stopsOrRefuses(t *testing.T, wasm []byte, features api.CoreFeatures) {
	t.Helper()
	if err := compiles(wasm, features); err != nil {
		t.Fatalf("the runtime refuses the test module: %v", err)
	}
	if _, err := Instrument(wasm, Import{"env", "check"}, 10); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := &host{stopAfter: 3}
	mod := instantiateWith(t, ctx, wasm, 10, h, features)
	_, err := mod.ExportedFunction("spin").Call(ctx)
	if err == nil || !strings.Contains(err.Error(), errStopped.Error()) {
		t.Fatalf("spin: err = %v after %d checks, want the check's", err, h.checks)
	}
}

// wazero reads a vector opcode as one byte, where the binary format has a
// LEB128 number: an encoding the two read differently must be refused,
// or it hides instructions from the rewrite.
func TestVectorOpcodeEncoding(t *testing.T) {
	stopsOrRefuses(t, spinModule(1,
		0x02, 0x40, 0x0C, 0x00, // block br 0
		// wazero: i16x8.shr_s, unreachable; LEB128: v128.const (0x0C,
		// overlong) and 16 bytes
		0xFD, 0x8C, 0x00,
		0x0B, 0x03, 0x40, 0x0C, 0x00, 0x0B, 0x02, 0x40, 1, 1, 1, 1, 1, 1, 1, 1, // end loop br 0 end block nop...
		0x0B, 0x0B,
	), api.CoreFeaturesV2)
	// Relaxed SIMD (0xFD 0x100 and up), which wazero reads as a vector
	// opcode followed by a block.
	if _, err := Instrument(spinModule(1, 0x0C, 0x00, 0xFD, 0x80, 0x02, 0x40, 0x0B, 0x0B), Import{"env", "check"}, 10); !errors.Is(err, errMisread) {
		t.Errorf("relaxed SIMD opcode: err = %v, want errMisread", err)
	}
}

// A block type is an s33: a reference type's 0x63 or 0x64 may come in a
// longer encoding, and is followed by its heap type all the same.
func TestBlockTypeOverlongRef(t *testing.T) {
	stopsOrRefuses(t, spinModule(41,
		0x02, 0xE3, 0x7F, 0x02, 0x01, // block (result (ref null 2)) nop; misread: block block
		0x02, 0xE3, 0x7F, 0x28, // block (result (ref null 40)); misread: block i32.load
		0x03, 0x40, 0x0C, 0x00, 0x0B, // loop br 0 end; misread: the memarg, br 0 end
		0x00, 0x0B, 0x00, 0x0B, 0x1A, 0x0B,
	), api.CoreFeaturesV2)
}

// ref.as_non_null (0xD4) has no immediate, br_on_null (0xD5) a label.
func TestTypedReferenceOpcodes(t *testing.T) {
	stopsOrRefuses(t, spinModule(1,
		0x02, 0x40, 0x02, 0x40, 0x02, 0x40, // block block block
		0xD2, 0x00, 0xD5, 0x02, 0x1A, // ref.func 0 br_on_null 2 drop
		0xD2, 0x00, 0xD4, // ref.func 0 ref.as_non_null
		0x03, 0x40, 0x0C, 0x00, 0x0B, // loop br 0 end
		0x1A, 0x0B, 0x0B, 0x0B, 0x0B,
	), api.CoreFeaturesV2|experimental.CoreFeaturesTypedFunctionReferences)
}

// The import count is that of all imports, not of the functions.
func TestNonFunctionImports(t *testing.T) {
	wasm := assemble(
		sec(secImport, vec(
			cat(str("env"), str("g"), []byte{0x03, 0x7F, 0x00}),
			cat(str("env"), str("mem"), []byte{0x02, 0x00, 0x01}),
		)),
	)
	out, err := Instrument(wasm, Import{"env", "check"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := compiles(out, api.CoreFeaturesV2); err != nil {
		t.Fatalf("instrumented module: %v", err)
	}
}

// A type section entry may be a recursion group of several types: the
// check's type index counts types, not entries.
func TestRecGroupTypes(t *testing.T) {
	wasm := assemble(
		sec(secType, vec(cat([]byte{0x4E}, vec([]byte{0x60, 0, 0}, []byte{0x60, 1, 0x7F, 0})))),
		sec(secFunction, vec(u(0))),
		sec(secExport, vec(cat(str("spin"), []byte{0, 0}))),
		sec(secCode, vec(body([]byte{0}, 0x03, 0x40, 0x0C, 0x00, 0x0B, 0x0B))),
	)
	stopsOrRefuses(t, wasm, api.CoreFeaturesV2)
	if _, err := Instrument(wasm, Import{"env", "check"}, 10); err != nil {
		t.Fatal(err)
	}
}

// A table may have an initialiser (0x40 0x00 prefix), which wazero reads
// with the core 2.0 features: its ref.func is shifted like any other.
func TestTableInitializer(t *testing.T) {
	wasm := assemble(
		sec(secType, vec([]byte{0x60, 0, 1, 0x7F})),
		sec(secImport, vec(cat(str("env"), str("tick"), []byte{0x00, 0}))), // wrong type on purpose: never called
		sec(secFunction, vec(u(0), u(0))),
		sec(secTable, vec([]byte{0x40, 0x00, 0x70, 0x00, 1, 0xD2, 0x01, 0x0B})), // every slot: ref.func 1
		sec(secExport, vec(cat(str("viaTable"), []byte{0, 2}))),
		sec(secCode, vec(
			body([]byte{0}, 0x41, 42, 0x0B),
			body([]byte{0}, 0x41, 0x00, 0x11, 0x00, 0x00, 0x0B),
		)),
	)
	if err := compiles(wasm, api.CoreFeaturesV2); err != nil {
		t.Fatalf("the runtime refuses the test module: %v", err)
	}
	out, err := Instrument(wasm, Import{"env", "check"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := rt.NewHostModuleBuilder("env").
		NewFunctionBuilder().WithFunc(func() uint32 { return 0 }).Export("tick").
		NewFunctionBuilder().WithFunc(func() {}).Export("check").
		Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if got := call(t, mod, "viaTable")[0]; got != 42 {
		t.Fatalf("viaTable() = %d, want 42", got)
	}
	// Nor may its initialiser name the fuel.
	fuel := assemble(sec(secTable, vec([]byte{0x40, 0x00, 0x6F, 0x00, 1, 0x23, 0x00, 0x0B})))
	if _, err := Instrument(fuel, Import{"env", "check"}, 10); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("global.get of the fuel in a table initialiser: err = %v, want out of range", err)
	}
}

// wazero reads a table import with an initialiser too: one the rewrite
// read as plain would count other imports than the runtime. Here the
// runtime sees a table, a global and a function, and the rewrite a table
// and two functions.
func TestTableImportInitializer(t *testing.T) {
	wasm := assemble(
		sec(secType, vec([]byte{0x60, 0, 0})),
		sec(secImport, vec(
			cat(str("a"), str("b"), []byte{0x01, 0x40, 0x00, 0x70, 0x01, 0x00, 13, 0xD0, 0x70, 0x0B}),
			cat(str("c"), str("d"), []byte{0x03, 0x7F, 0x01}),
			cat(str("e"), str("\x00\x00\x01f\x01x"), []byte{0x00, 0}),
		)),
	)
	if err := compiles(wasm, api.CoreFeaturesV2); err != nil {
		t.Fatalf("the runtime refuses the test module: %v", err)
	}
	if _, err := Instrument(wasm, Import{"env", "check"}, 10); err == nil {
		t.Fatal("table import with an initialiser accepted")
	}
}
