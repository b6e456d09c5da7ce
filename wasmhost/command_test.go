package wasmhost

import (
	"strings"
	"testing"
)

// A module built as a command (exporting _start, as `go build` without
// -buildmode=c-shared makes it) is refused when compiled, saying how to
// rebuild it, rather than failing every event.
func TestCommandModuleRefused(t *testing.T) {
	r := newRuntime(t, Config{})
	command := wasmModule(
		wasmSection(1, []byte{1, 0x60, 0, 0}),                     // type 0: () -> ()
		wasmSection(3, []byte{1, 0}),                              // function 0 of type 0
		wasmSection(7, append([]byte{1, 6}, "_start\x00\x00"...)), // export it as _start
		wasmSection(10, []byte{1, 2, 0, 0x0b}),                    // its body: end
	)
	_, err := r.Compile(t.Context(), "cmd", command)
	if err == nil || !strings.Contains(err.Error(), "rebuild with -buildmode=c-shared") {
		t.Fatalf("compile a command module: %v; want a refusal saying to rebuild with -buildmode=c-shared", err)
	}
}
