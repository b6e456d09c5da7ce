package kvrun

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the package pure: it encodes and decodes runs and
// reads through the Fetch it is given, so it imports no os, no network and
// no bucket code, directly or not, and nothing of wasmkeep but ownership's
// sentinel errors.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkg struct {
		Imports []string
		Deps    []string
	}
	if err := json.Unmarshal(out, &pkg); err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if imp == "os" || strings.HasPrefix(imp, "os/") || imp == "syscall" {
			t.Errorf("kvrun imports %s: it does no I/O of its own", imp)
		}
		if strings.HasPrefix(imp, "github.com/wasmkeep/wasmkeep/") && imp != "github.com/wasmkeep/wasmkeep/ownership" {
			t.Errorf("kvrun imports %s", imp)
		}
	}
	forbidden := []string{"github.com/asynkron/protoactor-go", "github.com/aws/", "net/http", "net"}
	for _, dep := range pkg.Deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("kvrun depends on %s (forbidden: %s)", dep, f)
			}
		}
	}
	if len(pkg.Deps) == 0 {
		t.Fatal("go list reported no dependencies: the check checked nothing")
	}
}
