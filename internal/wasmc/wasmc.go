// Package wasmc finds the C toolchain for wasm guests, for tests: the
// clang that scripts/wasm-c.sh installs and finds.
package wasmc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Clang returns the clang for wasm32-wasi that scripts/wasm-c.sh (under
// the module's root) finds. Without one the test fails where CI is set
// (its setup installs clang) and skips elsewhere.
func Clang(t testing.TB, root string) string {
	t.Helper()
	cmd := exec.Command("sh", filepath.Join(root, "scripts/wasm-c.sh"), "--check")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		return strings.TrimSpace(string(out))
	}
	why := strings.TrimSpace(stderr.String())
	if os.Getenv("CI") != "" {
		t.Fatalf("no clang for wasm32-wasi under CI, where `make wasm-c` (scripts/wasm-c.sh) installs it: %v: %s", err, why)
	}
	t.Skipf("no clang for wasm32-wasi: install it with scripts/wasm-c.sh (%s)", why)
	return ""
}
