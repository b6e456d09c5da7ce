// Package deps holds the module's dependency rules: which packages may
// import what. Each rule is checked against the module as `go list` sees
// it, and against a graph that breaks it, so a rule that checks nothing
// fails too.
package deps

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/wasmkeep/wasmkeep"

// pkg is what the rules read of a package: its own imports, everything it
// depends on (Deps: directly or not), and its files.
type pkg struct {
	Dir        string
	ImportPath string
	Imports    []string
	Deps       []string
	GoFiles    []string
}

// pure are the packages that do no I/O of their own: the protocol core, the
// bucket check (logic over the core's Bucket) and the runs of an actor's
// storage (they read through the Fetch they are given). None imports os or
// syscall itself, and none depends, even indirectly, on the network or on
// proto.actor (os they reach through fmt, which is why only their own
// imports are held to it).
var pure = []string{"ownership", "ownership/bucketcheck", "internal/kvrun"}

// impureDeps are what a pure package may not depend on, directly or not.
var impureDeps = []string{"github.com/asynkron/protoactor-go", "github.com/aws", "net/http", "net"}

// leaves are packages the node wires in that may not know what wires them:
// each with what it may not depend on, directly or not, and why.
var leaves = map[string]struct {
	forbidden []string
	why       string
}{
	"sockets": {[]string{"github.com/asynkron/protoactor-go", module + "/actors", module + "/wasmhost", module + "/ingress", module + "/ownership/keeper"},
		"the socket owner knows actors only as ownership.Actor: the node wires it in"},
	"actors": {[]string{"github.com/asynkron/protoactor-go", "github.com/ncruces/go-sqlite3", "github.com/gorilla/websocket", "github.com/aws",
		module + "/egress", module + "/internal/actorhost", module + "/internal/kvrun", module + "/sockets", module + "/wasmhost", module + "/ingress", module + "/supervisors", module + "/ownership/keeper"},
		"the class authors' API is small and stable; the runtime behind it is internal/actorhost"},
	"egress": {[]string{"github.com/asynkron/protoactor-go", module + "/internal/actorhost", module + "/internal/actorstore", module + "/wasmhost",
		module + "/ingress", module + "/supervisors", module + "/node", module + "/ownership/keeper", module + "/sockets"},
		"outbound HTTP only sends: the commit point before a request leaves is the runtime's, which uses it through its Fetcher"},
	"internal/kvrun": {[]string{module + "/actors", module + "/internal/actorhost", module + "/internal/actorstore", module + "/ownership/keeper", module + "/ownership/dirstore", module + "/ownership/sqlitestore", module + "/ownership/s3store"},
		"the runs of an actor's storage read through the Fetch they are given"},
	"internal/actorstore": {[]string{"github.com/asynkron/protoactor-go", module + "/internal/actorhost", module + "/wasmhost", module + "/ingress",
		module + "/supervisors", module + "/node", module + "/ownership/keeper"},
		"the storage engine of one actor does its I/O through the bucket it is given, and no actor-system work: the runtime uses it, never the other way"},
}

// forbiddenImports are direct imports that break the layout, with why.
var forbiddenImports = map[string]map[string]string{
	"ingress": {
		module + "/supervisors":      "the node is assembled around its HTTP entry, not by it",
		module + "/node":             "the node is assembled around its HTTP entry, not by it",
		module + "/ownership/keeper": "the entry hands events to the actors side and never asks the keeper itself",
	},
	"supervisors": {
		module + "/node":    "the tree supervises actors by role, and knows nothing of the node that uses it",
		module + "/ingress": "the tree supervises actors by role, and knows nothing of the node that uses it",
	},
	"peer": {
		module + "/ingress":          "the entry uses the peer client, never the other way",
		module + "/supervisors":      "the peer client knows the node only through the keeper's interface",
		module + "/ownership/keeper": "the peer client knows the node only through the keeper's interface",
	},
	"internal/actorhost": {
		module + "/ingress":     "actors are reached by the entry, never the other way",
		module + "/supervisors": "actors are supervised by the tree, and know nothing of it",
		module + "/wasmhost":    "wasm classes are one kind of class the actors side serves, not part of it",
	},
}

// matches says whether dep is path or under it.
func matches(dep, path string) bool { return dep == path || strings.HasPrefix(dep, path+"/") }

// testOnly are the packages only tests import (helpers of tests), with
// everything under examples/, tests/ and bench/.
var testOnly = []string{"internal/nodetest", "internal/s3test", "internal/damagetest", "internal/testlog", "internal/browser", "internal/wasmc", "ownership/internal/storetest"}

// actorPackages are where proto.actor actors live.
var actorPackages = []string{"internal/actorhost", "ownership/keeper", "supervisors", "node"}

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
			case forbiddenImports[r][imp] != "":
				out = append(out, fmt.Sprintf("%s imports %s: %s", r, rel(imp), forbiddenImports[r][imp]))
			case r == "ownership" && strings.HasPrefix(imp, module+"/"):
				out = append(out, fmt.Sprintf("ownership imports %s: the protocol core depends on nothing of the module", rel(imp)))
			case slices.Contains(pure, r) && r != "ownership" && strings.HasPrefix(imp, module+"/") && imp != module+"/ownership":
				out = append(out, fmt.Sprintf("%s imports %s: a pure package depends on the core's types alone", r, rel(imp)))
			case slices.Contains(pure, r) && (imp == "os" || strings.HasPrefix(imp, "os/") || imp == "syscall"):
				out = append(out, fmt.Sprintf("%s imports %s: it does no I/O of its own", r, imp))
			}
		}
		for _, dep := range p.Deps {
			if slices.Contains(pure, r) && slices.ContainsFunc(impureDeps, func(f string) bool { return matches(dep, f) }) {
				out = append(out, fmt.Sprintf("%s depends on %s: a pure package reaches no network and no actor system", r, dep))
			}
			if l, ok := leaves[r]; ok && slices.ContainsFunc(l.forbidden, func(f string) bool { return matches(dep, f) }) {
				out = append(out, fmt.Sprintf("%s depends on %s: %s", r, rel(dep), l.why))
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
	want := append([]string{"ownership", "cli", "cmd/wasmkeep", "examples/chat", "ingress", "sockets", "peer"}, actorPackages...)
	for _, want := range append(want, pure...) {
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
		"example in production":       {pkg{ImportPath: module + "/cli", Imports: []string{module + "/examples/chat"}}, "imports the example"},
		"test helper":                 {pkg{ImportPath: module + "/ingress", Imports: []string{module + "/internal/nodetest"}}, "a package for tests"},
		"proto.actor elsewhere":       {pkg{ImportPath: module + "/ingress", Imports: []string{"github.com/asynkron/protoactor-go/actor"}}, "imports proto.actor"},
		"entry assembling":            {pkg{ImportPath: module + "/ingress", Imports: []string{module + "/supervisors"}}, "not by it"},
		"entry asking keeper":         {pkg{ImportPath: module + "/ingress", Imports: []string{module + "/ownership/keeper"}}, "never asks the keeper"},
		"actors reaching entry":       {pkg{ImportPath: module + "/internal/actorhost", Imports: []string{module + "/ingress"}}, "never the other way"},
		"actors in the tree":          {pkg{ImportPath: module + "/internal/actorhost", Imports: []string{module + "/supervisors"}}, "know nothing of it"},
		"actors serving wasm":         {pkg{ImportPath: module + "/internal/actorhost", Imports: []string{module + "/wasmhost"}}, "not part of it"},
		"SDK with an actor system":    {pkg{ImportPath: module + "/actors", Deps: []string{"github.com/asynkron/protoactor-go/actor"}}, "small and stable"},
		"SDK with the runtime":        {pkg{ImportPath: module + "/actors", Deps: []string{module + "/internal/actorhost"}}, "small and stable"},
		"SDK with SQLite":             {pkg{ImportPath: module + "/actors", Deps: []string{"github.com/ncruces/go-sqlite3"}}, "small and stable"},
		"impure core":                 {pkg{ImportPath: module + "/ownership", Imports: []string{module + "/ownership/keeper"}}, "depends on nothing"},
		"core opening files":          {pkg{ImportPath: module + "/ownership", Imports: []string{"os"}}, "no I/O of its own"},
		"core on the network":         {pkg{ImportPath: module + "/ownership", Deps: []string{"net/http"}}, "reaches no network"},
		"check with an SDK":           {pkg{ImportPath: module + "/ownership/bucketcheck", Deps: []string{"github.com/aws/aws-sdk-go-v2/service/s3"}}, "reaches no network"},
		"check with a store":          {pkg{ImportPath: module + "/ownership/bucketcheck", Imports: []string{module + "/ownership/dirstore"}}, "the core's types alone"},
		"runs with syscalls":          {pkg{ImportPath: module + "/internal/kvrun", Imports: []string{"syscall"}}, "no I/O of its own"},
		"engine in an actor":          {pkg{ImportPath: module + "/internal/actorstore", Deps: []string{"github.com/asynkron/protoactor-go/actor"}}, "no actor-system work"},
		"engine with the runtime":     {pkg{ImportPath: module + "/internal/actorstore", Deps: []string{module + "/internal/actorhost"}}, "never the other way"},
		"engine with the keeper":      {pkg{ImportPath: module + "/internal/actorstore", Deps: []string{module + "/ownership/keeper"}}, "the bucket it is given"},
		"runs in an actor":            {pkg{ImportPath: module + "/internal/kvrun", Deps: []string{"github.com/asynkron/protoactor-go/actor"}}, "no actor system"},
		"socket owner knowing actors": {pkg{ImportPath: module + "/sockets", Deps: []string{module + "/actors"}}, "knows actors only as"},
		"peer client in the entry":    {pkg{ImportPath: module + "/peer", Imports: []string{module + "/ingress"}}, "the entry uses the peer client"},
		"peer client in the tree":     {pkg{ImportPath: module + "/peer", Imports: []string{module + "/supervisors"}}, "knows the node only"},
		"command with logic":          {pkg{ImportPath: module + "/cmd/wasmkeep", GoFiles: []string{"main.go", "serve.go"}}, "wiring only"},
		"command importing":           {pkg{ImportPath: module + "/cmd/wasmkeep", GoFiles: []string{"main.go"}, Imports: []string{module + "/ingress"}}, "nothing else"},
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

// TestEveryRuleFires: every entry of the rule tables (each leaf's
// forbidden dependencies, each forbidden import, each pure package against
// each impure dependency) reports a graph that breaks it, so that no rule
// sits in a table without being able to fire.
func TestEveryRuleFires(t *testing.T) {
	fires := func(what string, p pkg, want ...string) {
		t.Helper()
		for _, v := range violations([]pkg{p}) {
			if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(v, w) }) {
				return
			}
		}
		t.Errorf("%s: %q; want a violation saying %q", what, violations([]pkg{p}), want)
	}
	n := 0
	for r, l := range leaves {
		for _, f := range l.forbidden {
			fires(r+" depending on "+f, pkg{ImportPath: module + "/" + r, Deps: []string{f + "/x"}}, rel(f), l.why)
			n++
		}
	}
	for r, imps := range forbiddenImports {
		for imp, why := range imps {
			fires(r+" importing "+imp, pkg{ImportPath: module + "/" + r, Imports: []string{imp}}, rel(imp), why)
			n++
		}
	}
	for _, r := range pure {
		for _, d := range impureDeps {
			fires(r+" depending on "+d, pkg{ImportPath: module + "/" + r, Deps: []string{d}}, "reaches no network")
			n++
		}
	}
	if n < 60 {
		t.Fatalf("%d rules tried: the tables look empty", n)
	}
}

// clocked are the packages that take their time from a clock they are
// given (the Core takes it as inputs; the keeper as Config.Clock), so that
// the simulation and the tests drive it. The others read the time package,
// which testing/synctest drives in tests (RATIONALE.md, "Time").
var clocked = []string{"ownership", "ownership/keeper"}

// wallClockReads lists the calls of the time package's clock in the Go
// source src (file name for messages): time.Now, time.Since, time.Until.
// time.Now as a value (a Clock's default) is not a call.
func wallClockReads(name string, src []byte) ([]string, error) {
	fs := token.NewFileSet()
	f, err := parser.ParseFile(fs, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	timePkg := ""
	for _, imp := range f.Imports {
		if imp.Path.Value == `"time"` {
			timePkg = "time"
			if imp.Name != nil {
				timePkg = imp.Name.Name
			}
		}
	}
	if timePkg == "" {
		return nil, nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		s, ok := c.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := s.X.(*ast.Ident); ok && x.Name == timePkg && slices.Contains([]string{"Now", "Since", "Until"}, s.Sel.Name) {
			out = append(out, fmt.Sprintf("%s: time.%s(): a package that takes a clock reads it, not the wall clock", fs.Position(c.Pos()), s.Sel.Name))
		}
		return true
	})
	return out, nil
}

func TestClockedPackagesReadTheirClock(t *testing.T) {
	pkgs := modulePackages(t)
	checked := 0
	for _, p := range pkgs {
		if !slices.Contains(clocked, rel(p.ImportPath)) {
			continue
		}
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			reads, err := wallClockReads(path, src)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reads {
				t.Error(r)
			}
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files of %v: the rule would check nothing", checked, clocked)
	}
	// The rule fires on a read, whatever the import's name, and not on
	// time.Now as a value.
	bad := []byte("package p\nimport clock \"time\"\nfunc f() { _ = clock.Since(clock.Time{}); _ = clock.Now() }\n")
	if reads, _ := wallClockReads("bad.go", bad); len(reads) != 2 {
		t.Errorf("a read of the wall clock not caught: %q", reads)
	}
	good := []byte("package p\nimport \"time\"\nvar now = time.Now\nfunc f(d time.Duration) *time.Timer { return time.NewTimer(d) }\n")
	if reads, _ := wallClockReads("good.go", good); len(reads) != 0 {
		t.Errorf("a clock's default taken for a read: %q", reads)
	}
}

// retired are words the glossary (docs/ARCHITECTURE.md) replaced, with
// the word that took their place and lines each must catch (its proof).
// bench/RESULTS.md, a record of past runs, keeps the words of its day.
var retired = []struct {
	expr, instead string
	catches       []string
}{
	{`(?i)\bDESIGN\.md\b|\bDESIGN §|\bADR[ -]?0024\b`, "docs/ARCHITECTURE.md or docs/PROTOCOL.md",
		[]string{"see DESIGN.md", "as DESIGN § 4 says", "ADR 0024", "adr-0024"}},
	{`(?i)\bowner sweep\b`, "sweep", []string{"the owner sweep"}},
	{`(?i)\bwasm instances?\b|\bshared instances?\b|\binstances? per actor\b`, "guest",
		[]string{"a wasm instance", "the shared instances", "one instance per actor"}},
	{`(?i)\bactor'?s? instances?\b|\binstances? of (the|an|this) actor\b|\bresident instances?\b`, "resident actor",
		[]string{"the actor's instance", "an actor instance", "an instance of the actor", "the resident instance"}},
	{`\blateCaller\b|\bNodeConfig\b`, "(gone: node.Config, ingress.NewCaller)", []string{"lateCaller", "a NodeConfig"}},
	{`(?i)\bevent fences\b|\bfences the state\b`, "seal", []string{"event fences", "it fences the state"}},
}

// retiredWords lists the lines of text that use a retired word.
func retiredWords(name string, text string) []string {
	var out []string
	for _, r := range retired {
		re := regexp.MustCompile(r.expr)
		for i, line := range strings.Split(text, "\n") {
			if m := re.FindString(line); m != "" {
				out = append(out, fmt.Sprintf("%s:%d: %q: say %s", name, i+1, m, r.instead))
			}
		}
	}
	return out
}

func TestRetiredWordsAreGone(t *testing.T) {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root := strings.TrimSpace(string(dir))
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			// Hidden directories (.git, a benchmark's work tree of another
			// commit) and what is built are not the project's text.
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".h", ".c", ".sh":
		default:
			return nil
		}
		if rel == "bench/RESULTS.md" || rel == "tests/deps/deps_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for _, v := range retiredWords(rel, string(b)) {
			t.Error(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files: the rule would check nothing", checked)
	}
	// Each pattern catches its own lines, and the glossary's own use of
	// "instance" (a start of a node's process) is left alone.
	for _, r := range retired {
		for _, line := range r.catches {
			if got := retiredWords("x.go", "// "+line+"\n"); len(got) != 1 {
				t.Errorf("%q: caught %q, want one line by %s", line, got, r.expr)
			}
		}
	}
	if got := retiredWords("x.go", "// the holder's instance, as its lease names it; another instance of the node\n"); len(got) != 0 {
		t.Errorf("a node's instance taken for a retired word: %q", got)
	}
}
