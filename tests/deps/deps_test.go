// Package deps holds the module's dependency rules: which packages may
// import what. Each rule is checked against the module as `go list` sees
// it, and against a graph that breaks it, so a rule that checks nothing
// fails too.
package deps

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/wasmkeep/wasmkeep"

// pkg is what the rules read of a package.
type pkg struct {
	ImportPath string
	Imports    []string
	GoFiles    []string
}

// testOnly are the packages only tests import (helpers of tests), with
// everything under examples/, tests/ and bench/.
var testOnly = []string{"internal/nodetest", "internal/s3test", "internal/damagetest", "internal/testlog", "internal/browser"}

// actorPackages are where proto.actor actors live.
var actorPackages = []string{"actors", "ownership/keeper", "supervisors"}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

// production says whether p is a package the node is built from.
func production(p string) bool {
	r := rel(p)
	for _, prefix := range []string{"examples", "tests", "bench", "cmd"} {
		if r == prefix || strings.HasPrefix(r, prefix+"/") {
			return false
		}
	}
	return !slices.Contains(testOnly, r)
}

// violations lists what the packages do that the rules forbid.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		r := rel(p.ImportPath)
		for _, imp := range p.Imports {
			switch {
			case production(p.ImportPath) && strings.HasPrefix(imp, module+"/examples/"):
				out = append(out, fmt.Sprintf("%s imports the example %s: examples are registered where the binary is wired (cmd/)", r, rel(imp)))
			case production(p.ImportPath) && strings.HasPrefix(imp, module+"/") && !production(imp):
				out = append(out, fmt.Sprintf("%s imports %s, a package for tests", r, rel(imp)))
			case strings.HasPrefix(imp, "github.com/asynkron/protoactor-go") && production(p.ImportPath) && !slices.Contains(actorPackages, r):
				out = append(out, fmt.Sprintf("%s imports proto.actor (%s): actors live in %v only", r, imp, actorPackages))
			case r == "ingress" && imp == module+"/supervisors":
				out = append(out, "ingress imports supervisors: the node is assembled around its HTTP entry, not by it")
			case r == "ownership" && strings.HasPrefix(imp, module+"/"):
				out = append(out, fmt.Sprintf("ownership imports %s: the protocol core depends on nothing of the module", rel(imp)))
			}
		}
		if strings.HasPrefix(r, "cmd/") {
			for _, f := range p.GoFiles {
				if f != "main.go" && f != "doc.go" {
					out = append(out, fmt.Sprintf("%s has %s: a command is wiring only, main.go (and doc.go)", r, f))
				}
			}
			for _, imp := range p.Imports {
				if !strings.HasPrefix(imp, module+"/cli") && !strings.HasPrefix(imp, module+"/examples/") {
					out = append(out, fmt.Sprintf("%s imports %s: a command wires cli and the classes it serves, nothing else", r, imp))
				}
			}
		}
	}
	return out
}

func modulePackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestModuleKeepsItsRules(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: the rules would check nothing", len(pkgs))
	}
	var names []string
	for _, p := range pkgs {
		names = append(names, rel(p.ImportPath))
	}
	for _, want := range append([]string{"ownership", "cli", "cmd/wasmkeep", "examples/chat"}, actorPackages...) {
		if !slices.Contains(names, want) {
			t.Fatalf("go list did not list %s", want)
		}
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// TestRulesCatchWhatTheyForbid: each rule reports a graph that breaks it.
func TestRulesCatchWhatTheyForbid(t *testing.T) {
	for name, tc := range map[string]struct {
		p    pkg
		want string
	}{
		"example in production": {pkg{ImportPath: module + "/cli", Imports: []string{module + "/examples/chat"}}, "imports the example"},
		"test helper":           {pkg{ImportPath: module + "/ingress", Imports: []string{module + "/internal/nodetest"}}, "a package for tests"},
		"proto.actor elsewhere": {pkg{ImportPath: module + "/ingress", Imports: []string{"github.com/asynkron/protoactor-go/actor"}}, "imports proto.actor"},
		"entry assembling":      {pkg{ImportPath: module + "/ingress", Imports: []string{module + "/supervisors"}}, "not by it"},
		"impure core":           {pkg{ImportPath: module + "/ownership", Imports: []string{module + "/ownership/keeper"}}, "depends on nothing"},
		"command with logic":    {pkg{ImportPath: module + "/cmd/wasmkeep", GoFiles: []string{"main.go", "serve.go"}}, "wiring only"},
		"command importing":     {pkg{ImportPath: module + "/cmd/wasmkeep", GoFiles: []string{"main.go"}, Imports: []string{module + "/ingress"}}, "nothing else"},
	} {
		got := violations([]pkg{tc.p})
		if len(got) != 1 || !strings.Contains(got[0], tc.want) {
			t.Errorf("%s: %q; want one violation saying %q", name, got, tc.want)
		}
	}
	if got := violations([]pkg{{ImportPath: module + "/cmd/wasmkeep", GoFiles: []string{"main.go"},
		Imports: []string{module + "/cli", module + "/examples/chat"}}}); len(got) != 0 {
		t.Errorf("the binary's wiring is refused: %q", got)
	}
}
