package wasmhost

import (
	"errors"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// TestKnownModules: a module that passed Compile is known to the next
// runtime of this build with the same limits, and only for the same bytes;
// a known module compiles in the background, its events waiting for it; one
// that fails there after all fails its events and is known no more; one
// the runtime's close cuts short stays known.
func TestKnownModules(t *testing.T) {
	cache := t.TempDir()
	wasm := guest(t, counterGuest)
	r := newRuntime(t, Config{CacheDir: cache})
	if r.Known(wasm) {
		t.Fatal("known before any compile")
	}
	mustCompile(t, r, "counter", wasm)
	if !r.Known(wasm) {
		t.Fatal("not known after its compile")
	}
	changed := append([]byte(nil), wasm...)
	changed[len(changed)-1] ^= 1
	if r.Known(changed) {
		t.Error("a module of other bytes is known")
	}
	if newRuntime(t, Config{CacheDir: cache, MemoryLimit: 32 << 20}).Known(wasm) {
		t.Error("known under another memory limit, which its check depends on")
	}

	later := newRuntime(t, Config{CacheDir: cache})
	later.Serving()
	ready := make(chan error, 1)
	p := later.CompileInBackground("counter", wasm, func(_ *Module, err error) { ready <- err })
	res := p.NewResident(ownership.Actor{Class: "counter", Name: "a"})
	st := memStorage{}
	for _, want := range []string{"1\n", "2\n"} {
		resp, err := res.Handle(t.Context(), get("", ""), st)
		if err != nil {
			t.Fatalf("event on the pending class: %v", err)
		}
		if string(resp.Body) != want {
			t.Fatalf("event on the pending class: %q, want %q", resp.Body, want)
		}
	}
	res.Close()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}

	// Bytes recorded as known that do not compile: the events fail, and
	// the record goes, so that the next start refuses them before serving.
	bad := []byte("\x00asm not really")
	later.markKnown(bad)
	p = later.CompileInBackground("bad", bad, func(_ *Module, err error) { ready <- err })
	if err := <-ready; err == nil {
		t.Fatal("a module that does not compile compiled")
	}
	if _, err := p.Handle(t.Context(), get("", ""), memStorage{}); !errors.Is(err, ErrNotCompiled) {
		t.Errorf("event on a class that did not compile: %v, want ErrNotCompiled", err)
	}
	if later.Known(bad) {
		t.Error("still known after its compile failed")
	}

	// Closed before its compile ran: ErrClosed, and the record stays.
	closing := newRuntime(t, Config{CacheDir: cache})
	if err := closing.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	p = closing.CompileInBackground("counter", wasm, func(_ *Module, err error) { ready <- err })
	if err := <-ready; !errors.Is(err, ErrClosed) {
		t.Errorf("compile after close: %v, want ErrClosed", err)
	}
	if !closing.Known(wasm) {
		t.Error("a compile cut short by close forgot the module")
	}
}
