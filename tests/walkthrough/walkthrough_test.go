// Package walkthrough runs the walkthroughs of docs/FIRST-CLASS.md as a
// newcomer would, so that they cannot rot: each in a fresh home directory,
// its files written from the page, its commands run, its node started, and
// each curl of its transcript checked against the answer the page prints.
//
// The page marks what is run with the info strings of its fenced blocks:
//
//   - a block with title=NAME (```go title=main.go) is a file, written as
//     NAME in the directory the commands before it left;
//   - a sh block is commands, one a line (a trailing \ continues it), run
//     in order by sh in that directory, with the exports before it;
//   - a console block is a transcript: each `$ curl ...` line is a request,
//     and the lines under it, to the next `$ `, its output.
//
// Everything else (prose, indented blocks, other fences) is for the reader
// alone. A few commands are not run as written: `export WASMKEEP=...` has
// the checkout in place of /path/to/wasmkeep; `make -C $WASMKEEP build`
// builds cmd/wasmkeep into a directory of the test's (nothing is written
// into the checkout); `go run . ARGS` is `go build` then the program run
// with ARGS; `$WASMKEEP/bin/wasmkeep ARGS` runs that build; and clang-16 is
// the clang scripts/wasm-c.sh finds. A node's 127.0.0.1:8080 is a free
// port, and the transcript's localhost:8080 the same.
package walkthrough

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/proctest"
	"github.com/wasmkeep/wasmkeep/internal/wasmc"
)

const (
	page        = "docs/FIRST-CLASS.md"
	placeholder = "/path/to/wasmkeep"
	// docListen is where the page's nodes listen, docHost where its curl
	// reaches them.
	docListen = "127.0.0.1:8080"
	docHost   = "localhost:8080"
)

// walkthroughs are the sections of the page that are run, by heading.
var walkthroughs = []string{"A Go class in the node's process", "A Go guest (wasm)", "A C guest"}

type stepKind int

const (
	command stepKind = iota
	file
	transcript
)

// step is one thing a walkthrough does, at line of the page.
type step struct {
	kind stepKind
	line int
	text string     // a command (continuation lines joined), a file's content
	name string     // a file's name
	ex   []exchange // a transcript's requests
}

// exchange is one `$ curl` of a transcript and the output under it.
type exchange struct {
	line int
	cmd  string
	want string
}

// section is what the page says under one `## ` heading.
type section struct {
	title string
	line  int
	steps []step
}

// parsePage returns the page's sections, in order.
func parsePage(doc string) ([]*section, error) {
	var sections []*section
	var cur *section
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		if title, ok := strings.CutPrefix(lines[i], "## "); ok {
			cur = &section{title: strings.TrimSpace(title), line: i + 1}
			sections = append(sections, cur)
			continue
		}
		info, ok := strings.CutPrefix(lines[i], "```")
		if !ok {
			continue
		}
		open := i + 1
		var body []string
		for i++; i < len(lines) && strings.TrimRight(lines[i], " ") != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: the block never ends", open)
		}
		if cur == nil {
			continue
		}
		fields := strings.Fields(info)
		lang := ""
		if len(fields) > 0 {
			lang = fields[0]
		}
		name := ""
		for _, f := range fields[min(1, len(fields)):] {
			if v, ok := strings.CutPrefix(f, "title="); ok {
				name = v
			}
		}
		switch {
		case name != "":
			if name != filepath.Base(name) || name == "." || name == ".." {
				return nil, fmt.Errorf("line %d: title=%s is not a file name", open, name)
			}
			cur.steps = append(cur.steps, step{kind: file, line: open, name: name, text: strings.Join(body, "\n") + "\n"})
		case lang == "sh":
			cur.steps = append(cur.steps, commands(body, open+1)...)
		case lang == "console":
			ex, err := exchanges(body, open+1)
			if err != nil {
				return nil, err
			}
			cur.steps = append(cur.steps, step{kind: transcript, line: open, ex: ex})
		}
	}
	return sections, nil
}

// commands are the commands of a sh block whose first line is line first:
// one a line, a trailing backslash joining the next; blank lines and
// comments skipped.
func commands(body []string, first int) []step {
	var out []step
	var cmd []string
	start := 0
	for j, l := range body {
		if len(cmd) == 0 {
			if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			start = first + j
		}
		more := strings.HasSuffix(l, "\\")
		cmd = append(cmd, strings.TrimSpace(strings.TrimSuffix(l, "\\")))
		if !more {
			out = append(out, step{kind: command, line: start, text: strings.Join(cmd, " ")})
			cmd = nil
		}
	}
	if len(cmd) > 0 {
		out = append(out, step{kind: command, line: start, text: strings.Join(cmd, " ")})
	}
	return out
}

// exchanges are the requests of a console block whose first line is line
// first, each with the output under it (the block's trailing blank lines
// dropped).
func exchanges(body []string, first int) ([]exchange, error) {
	for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
		body = body[:len(body)-1]
	}
	var out []exchange
	var want []string
	flush := func() {
		if len(out) > 0 && len(want) > 0 {
			out[len(out)-1].want = strings.Join(want, "\n") + "\n"
		}
		want = nil
	}
	for j, l := range body {
		if cmd, ok := strings.CutPrefix(l, "$ "); ok {
			flush()
			out = append(out, exchange{line: first + j, cmd: cmd})
			continue
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("line %d: a transcript starts with a `$ ` command", first+j)
		}
		want = append(want, l)
	}
	flush()
	if len(out) == 0 {
		return nil, fmt.Errorf("line %d: an empty transcript", first-1)
	}
	return out, nil
}

// shellWords splits s into words as sh would, for the simple commands the
// page runs outside sh: quotes and backslashes, and no expansion, so
// anything sh would expand or treat as syntax is an error.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			continue
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("%s: unterminated '", s)
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '$' || s[i] == '`' {
					return nil, fmt.Errorf("%s: %c: nothing is expanded here", s, s[i])
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, fmt.Errorf(`%s: unterminated "`, s)
			}
		case c == '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("%s: a trailing backslash", s)
			}
			i++
			w.WriteByte(s[i])
		case strings.IndexByte("$`|&;<>()*?[#", c) >= 0, c == '~' && !inWord:
			return nil, fmt.Errorf("%s: %c: sh would expand it or read it as syntax", s, c)
		default:
			w.WriteByte(c)
		}
		inWord = true
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// curlRequest is what a transcript's curl asks: curl's -d, -X and -w,
// -w with %{http_code} and \n only.
type curlRequest struct {
	method, url, body, writeOut string
}

func parseCurl(cmd string) (curlRequest, error) {
	words, err := shellWords(cmd)
	if err != nil {
		return curlRequest{}, err
	}
	if len(words) == 0 || words[0] != "curl" {
		return curlRequest{}, fmt.Errorf("%s: a transcript runs only curl", cmd)
	}
	var r curlRequest
	hasBody := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch w {
		case "-d", "--data", "-X", "--request", "-w", "--write-out":
			if i+1 == len(words) {
				return curlRequest{}, fmt.Errorf("%s: %s without its value", cmd, w)
			}
			i++
			switch w {
			case "-d", "--data":
				if strings.HasPrefix(words[i], "@") {
					return curlRequest{}, fmt.Errorf("%s: -d @FILE is not supported here", cmd)
				}
				r.body, hasBody = words[i], true
			case "-X", "--request":
				r.method = words[i]
			default:
				r.writeOut = strings.ReplaceAll(words[i], `\n`, "\n")
				if strings.Contains(strings.ReplaceAll(r.writeOut, "%{http_code}", ""), "%") {
					return curlRequest{}, fmt.Errorf("%s: -w supports %%{http_code} and \\n only", cmd)
				}
			}
		default:
			if strings.HasPrefix(w, "-") {
				return curlRequest{}, fmt.Errorf("%s: curl's %s is not supported here (-d, -X and -w are)", cmd, w)
			}
			if r.url != "" {
				return curlRequest{}, fmt.Errorf("%s: two URLs", cmd)
			}
			r.url = w
		}
	}
	if r.url == "" {
		return curlRequest{}, fmt.Errorf("%s: no URL", cmd)
	}
	if !strings.Contains(r.url, "://") {
		r.url = "http://" + r.url
	}
	if r.method == "" {
		r.method = http.MethodGet
		if hasBody {
			r.method = http.MethodPost
		}
	}
	return r, nil
}

// do makes the request on addr in place of the page's host, and returns
// what curl would print.
func (r curlRequest) do(addr string) (string, error) {
	if !strings.Contains(r.url, "//"+docHost+"/") {
		return "", fmt.Errorf("%s: the page's requests go to %s", r.url, docHost)
	}
	req, err := http.NewRequest(r.method, strings.Replace(r.url, "//"+docHost+"/", "//"+addr+"/", 1), strings.NewReader(r.body))
	if err != nil {
		return "", err
	}
	if r.body != "" || r.method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl -d does
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	return string(b) + strings.ReplaceAll(r.writeOut, "%{http_code}", fmt.Sprint(res.StatusCode)), nil
}

// shared is what the walkthroughs share: the checkout, the Go paths a
// child must keep whatever its HOME, and the wasmkeep binary, built once.
type shared struct {
	root     string
	goEnv    map[string]string
	binDir   string
	wasmkeep string
}

// runner follows one walkthrough.
type runner struct {
	t     *testing.T
	s     *shared
	home  string
	cwd   string
	state string // where sh leaves its working directory
	vars  []string
	clang string
	node  *proctest.Node
}

func TestFirstClass(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	sections, err := parsePage(string(doc))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	s := &shared{root: root, goEnv: goEnv(t), binDir: t.TempDir()}
	for _, sec := range sections {
		if !slices.Contains(walkthroughs, sec.title) && slices.ContainsFunc(sec.steps, func(st step) bool { return st.kind == transcript }) {
			t.Errorf("%s:%d: %q has a transcript but is not a walkthrough the test runs", page, sec.line, sec.title)
		}
	}
	for _, title := range walkthroughs {
		i := slices.IndexFunc(sections, func(sec *section) bool { return sec.title == title })
		if i < 0 {
			t.Errorf("%s has no section %q", page, title)
			continue
		}
		t.Run(title, func(t *testing.T) { run(t, s, sections[i]) })
	}
}

// run follows sec's steps in order.
func run(t *testing.T, s *shared, sec *section) {
	start := time.Now()
	r := &runner{t: t, s: s, home: t.TempDir(), state: filepath.Join(t.TempDir(), "pwd")}
	r.cwd = r.home
	served, checked := false, 0
	for _, st := range sec.steps {
		if st.kind == command && strings.HasPrefix(st.text, "clang-16 ") && r.clang == "" {
			r.clang = clang(t, s.root)
		}
	}
	for _, st := range sec.steps {
		switch st.kind {
		case file:
			if err := os.WriteFile(filepath.Join(r.cwd, st.name), []byte(st.text), 0o644); err != nil {
				t.Fatal(err)
			}
		case command:
			served = r.command(st) || served
		case transcript:
			if r.node == nil {
				t.Fatalf("%s:%d: a transcript before the walkthrough starts a node", page, st.line)
			}
			for _, ex := range st.ex {
				r.exchange(ex)
				checked++
			}
		}
	}
	if !served || checked == 0 {
		t.Fatalf("%s:%d: %q must start a node and check requests against it (node started: %v, requests checked: %d)", page, sec.line, sec.title, served, checked)
	}
	// Stopped as an operator would: SIGTERM, and a clean exit.
	r.node.Signal(t, syscall.SIGTERM)
	if code := r.node.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("node exited %d on SIGTERM\n%s", code, proctest.Tail(r.node.Stderr.String(), 4000))
	}
	t.Logf("%d requests checked in %v", checked, time.Since(start).Round(time.Millisecond))
}

// command runs one command of the page, and says whether it started the
// node.
func (r *runner) command(st step) bool {
	t := r.t
	cmd := st.text
	switch {
	case strings.HasPrefix(cmd, "export "):
		name, value, ok := strings.Cut(strings.TrimPrefix(cmd, "export "), "=")
		if !ok || strings.ContainsAny(value, " '\"$") {
			t.Fatalf("%s:%d: %s: an export here is NAME=VALUE", page, st.line, cmd)
		}
		r.vars = append(r.vars, name+"="+strings.ReplaceAll(value, placeholder, r.s.root))
	case cmd == "make -C $WASMKEEP build":
		r.s.buildWasmkeep(t)
	case strings.HasPrefix(cmd, "go run . "):
		bin := filepath.Join(t.TempDir(), "node")
		r.goCommand(st, "build", "-o", bin, ".")
		r.serve(st, bin, strings.TrimPrefix(cmd, "go run . "))
		return true
	case strings.HasPrefix(cmd, "$WASMKEEP/bin/wasmkeep "):
		if r.s.wasmkeep == "" {
			t.Fatalf("%s:%d: the walkthrough runs bin/wasmkeep and has not built it (make -C $WASMKEEP build)", page, st.line)
		}
		r.serve(st, r.s.wasmkeep, strings.TrimPrefix(cmd, "$WASMKEEP/bin/wasmkeep "))
		return true
	case strings.HasPrefix(cmd, "clang-16 "):
		// clang has nothing to say of code that is right: a warning fails.
		if out := r.sh(st, r.clang+strings.TrimPrefix(cmd, "clang-16")); out != "" {
			t.Fatalf("%s:%d: %s:\n%s", page, st.line, cmd, out)
		}
	default:
		r.sh(st, cmd)
	}
	return false
}

// environ is the environment of the walkthrough's commands: the test's,
// HOME the walkthrough's own (and nothing of the user's cache or config
// directories), Go's caches where they were, and the page's exports.
func (r *runner) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "HOME" || name == "PWD" || name == "OLDPWD" || name == "WASMKEEP" || strings.HasPrefix(name, "XDG_") || r.s.goEnv[name] != "" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+r.home)
	for name, v := range r.s.goEnv {
		env = append(env, name+"="+v)
	}
	return append(env, r.vars...)
}

// sh runs cmd with sh in the walkthrough's directory, as the page's
// terminal would, and returns its output; the directory it leaves is the
// next command's.
func (r *runner) sh(st step, cmd string) string {
	t := r.t
	c := exec.Command("sh", "-e", "-c", "cd \"$WALKTHROUGH_CWD\"\n"+cmd+"\npwd >\"$WALKTHROUGH_PWD\"\n")
	c.Env = append(r.environ(), "WALKTHROUGH_CWD="+r.cwd, "WALKTHROUGH_PWD="+r.state)
	began := time.Now()
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s:%d: %s: %v\n%s", page, st.line, st.text, err, out)
	}
	pwd, err := os.ReadFile(r.state)
	if err != nil {
		t.Fatal(err)
	}
	r.cwd = strings.TrimSpace(string(pwd))
	t.Logf("%s:%d: %s (%v)", page, st.line, st.text, time.Since(began).Round(time.Millisecond))
	return string(out)
}

// goCommand runs the go command in the walkthrough's directory.
func (r *runner) goCommand(st step, args ...string) {
	c := exec.Command("go", args...)
	c.Dir, c.Env = r.cwd, r.environ()
	began := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		r.t.Fatalf("%s:%d: %s: go %s: %v\n%s", page, st.line, st.text, strings.Join(args, " "), err, out)
	}
	r.t.Logf("%s:%d: %s: go %s (%v)", page, st.line, st.text, strings.Join(args, " "), time.Since(began).Round(time.Millisecond))
}

// serve starts the node bin with the page's arguments, on a free port in
// place of the page's, and waits until it is ready.
func (r *runner) serve(st step, bin, argLine string) {
	t := r.t
	if r.node != nil {
		t.Fatalf("%s:%d: a second node in one walkthrough", page, st.line)
	}
	args, err := shellWords(argLine)
	if err != nil {
		t.Fatalf("%s:%d: %v", page, st.line, err)
	}
	addr := proctest.Free(t)
	i := slices.Index(args, docListen)
	if i < 1 || args[i-1] != "--listen" {
		t.Fatalf("%s:%d: %s: the node is to listen on %s (--listen), where the transcript reaches it", page, st.line, st.text, docListen)
	}
	args[i] = addr
	c := exec.Command(bin, args...)
	c.Dir, c.Env = r.cwd, r.environ()
	r.node = proctest.StartCmd(t, c)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, err := r.node.Get("/readyz")
		if err == nil && code == http.StatusOK {
			break
		}
		r.node.Alive(t)
		if time.Now().After(deadline) {
			t.Fatalf("%s:%d: the node is not ready after 30 s (%d, %v)\n%s", page, st.line, code, err, proctest.Tail(r.node.Stderr.String(), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s:%d: %s: serving on %s", page, st.line, st.text, r.node.Addr)
}

// exchange makes one request of a transcript and compares what curl would
// print with what the page does.
func (r *runner) exchange(ex exchange) {
	t := r.t
	req, err := parseCurl(ex.cmd)
	if err != nil {
		t.Fatalf("%s:%d: %v", page, ex.line, err)
	}
	got, err := req.do(r.node.Addr)
	if err != nil {
		t.Fatalf("%s:%d: %v", page, ex.line, err)
	}
	if got != ex.want {
		t.Errorf("%s:%d: $ %s\ngot:\n%s\nthe page says:\n%s", page, ex.line, ex.cmd, got, ex.want)
	}
}

// buildWasmkeep builds cmd/wasmkeep of the checkout, once, where make
// build would (bin/wasmkeep) were it not the checkout.
func (s *shared) buildWasmkeep(t *testing.T) {
	if s.wasmkeep != "" {
		return
	}
	bin := filepath.Join(s.binDir, "wasmkeep")
	c := exec.Command("go", "build", "-o", bin, "./cmd/wasmkeep")
	c.Dir = s.root
	began := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/wasmkeep: %v\n%s", err, out)
	}
	t.Logf("make -C $WASMKEEP build: go build ./cmd/wasmkeep (%v)", time.Since(began).Round(time.Millisecond))
	s.wasmkeep = bin
}

// goEnv is where Go keeps its caches and settings, which move with HOME
// unless set.
func goEnv(t *testing.T) map[string]string {
	out, err := exec.Command("go", "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	env := map[string]string{}
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatal(err)
	}
	return env
}

// clang returns the clang that scripts/wasm-c.sh finds (wasmc.Clang): it
// fails where CI is set (its setup installs clang) and skips elsewhere.
func clang(t *testing.T, root string) string { return wasmc.Clang(t, root) }

// TestPageParsing: the page's conventions read as the package says, and
// what the test cannot run faithfully is refused rather than guessed.
func TestPageParsing(t *testing.T) {
	doc := "# T\n\n```sh\nignored\n```\n\n## W\n\ntext\n\n```sh\n# a comment\nexport A=/path/to/wasmkeep\n\nclang-16 -a \\\n  -b c.c\n```\n\n" +
		"```c title=c.c\nint x;\n```\n\n```text\nignored\n```\n\n    $ curl ignored\n\n" +
		"```console\n$ curl -d 'a b' -w '%{http_code}\\n' 'localhost:8080/actor/x/y?z=1'\nout\n201\n$ curl localhost:8080/actor/x/y\n\n```\n"
	secs, err := parsePage(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 1 || secs[0].title != "W" {
		t.Fatalf("sections: %+v", secs)
	}
	st := secs[0].steps
	if len(st) != 4 || st[0].text != "export A=/path/to/wasmkeep" || st[1].text != "clang-16 -a -b c.c" ||
		st[2].kind != file || st[2].name != "c.c" || st[2].text != "int x;\n" || st[3].kind != transcript {
		t.Fatalf("steps: %+v", st)
	}
	if ex := st[3].ex; len(ex) != 2 || ex[0].want != "out\n201\n" || ex[1].want != "" || ex[1].line != 33 {
		t.Fatalf("exchanges: %+v", ex)
	}
	req, err := parseCurl(st[3].ex[0].cmd)
	if err != nil || req != (curlRequest{method: "POST", url: "http://localhost:8080/actor/x/y?z=1", body: "a b", writeOut: "%{http_code}\n"}) {
		t.Fatalf("curl: %+v, %v", req, err)
	}

	for _, bad := range []string{
		"curl localhost:8080/actor/x/y?z=1", // sh would glob the ?
		"curl -i localhost:8080/actor/x/y",
		"curl -d @body localhost:8080/actor/x/y",
		"curl -w '%{size_download}' localhost:8080/actor/x/y",
		"curl \"localhost:8080/actor/$NAME\"",
		"wget localhost:8080/actor/x/y",
		"curl 'localhost:8080/actor/x/y",
	} {
		if _, err := parseCurl(bad); err == nil {
			t.Errorf("%s: read as a request", bad)
		}
	}
	for _, bad := range []string{"```sh\nnever ends\n", "## W\n```console\nout before a command\n```\n"} {
		if _, err := parsePage(bad); err == nil {
			t.Errorf("%q: read as a page", bad)
		}
	}
	if _, err := parsePage("## W\n```go title=../x.go\n```\n"); err == nil || !strings.Contains(err.Error(), "not a file name") {
		t.Errorf("a title out of the directory: %v", err)
	}
}
