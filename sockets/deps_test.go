package sockets

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the socket owner a leaf the node wires in: it knows
// actors only as ownership.Actor, never the actors host, proto.actor, the
// wasm host or the ingress (which will import it).
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkg struct{ Deps []string }
	if err := json.Unmarshal(out, &pkg); err != nil {
		t.Fatal(err)
	}
	forbidden := []string{
		"github.com/asynkron/protoactor-go", "github.com/wasmkeep/wasmkeep/actors",
		"github.com/wasmkeep/wasmkeep/wasmhost", "github.com/wasmkeep/wasmkeep/ingress",
		"github.com/wasmkeep/wasmkeep/ownership/keeper",
	}
	for _, dep := range pkg.Deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("sockets depends on %s", dep)
			}
		}
	}
	if len(pkg.Deps) == 0 {
		t.Fatal("go list reported no dependencies: the check checked nothing")
	}
}
