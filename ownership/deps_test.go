package ownership

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the protocol core pure: the ownership package imports
// no proto.actor, no AWS SDK, no net/http and no os, directly or not (os
// only directly: the standard library reaches it through fmt). Its store
// adapters live in their own packages (dirstore, s3store, memstore,
// bucketurl) and its shell in keeper.
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
			t.Errorf("ownership imports %s: the core does no I/O", imp)
		}
	}
	forbidden := []string{"github.com/asynkron/protoactor-go", "github.com/aws/", "net/http", "net"}
	for _, dep := range append(pkg.Imports, pkg.Deps...) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("ownership depends on %s (forbidden: %s)", dep, f)
			}
		}
	}
	if len(pkg.Deps) == 0 {
		t.Fatal("go list reported no dependencies: the check checked nothing")
	}
}
