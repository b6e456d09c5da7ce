package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/testlog"
)

// shared is the state of one test binary run: guests are built once, and
// every runtime shares one compilation cache.
var shared struct {
	dir    string // temp dir: guest modules and the compilation cache
	mu     sync.Mutex
	guests map[string][]byte // by package path
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasmhost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared.dir = dir
	shared.guests = map[string][]byte{}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// guest returns the module built from the package at pkg (relative to
// this directory), building it on first use.
func guest(tb testing.TB, pkg string) []byte {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if wasm, ok := shared.guests[pkg]; ok {
		return wasm
	}
	out := filepath.Join(shared.dir, strings.NewReplacer("/", "_", ".", "_").Replace(pkg)+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build guest %s: %v\n%s", pkg, err, msg)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	shared.guests[pkg] = wasm
	return wasm
}

// mustCompile compiles wasm as the module of class on r, failing tb if it
// does not compile (Compile's error names the class).
func mustCompile(tb testing.TB, r *Runtime, class string, wasm []byte) *Module {
	tb.Helper()
	m, err := r.Compile(tb.Context(), class, wasm)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// MustCompile is mustCompile for the package's external tests (cguest_test.go,
// csql_test.go), which cannot see it otherwise.
var MustCompile = mustCompile

const (
	counterGuest = "../examples/counter-wasm"
	probeGuest   = "./testdata/probe"
)

func newRuntime(tb testing.TB, cfg Config) *Runtime {
	tb.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(shared.dir, "cache")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r, err := NewRuntime(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func newGuest(tb testing.TB, cfg Config, pkg string) *Guest {
	tb.Helper()
	r := newRuntime(tb, cfg)
	m := mustCompile(tb, r, "test", guest(tb, pkg))
	g := m.NewGuest(nil)
	tb.Cleanup(g.Close)
	return g
}

// guestOn returns a Guest of m started already on mod, a module of m
// instantiated elsewhere; closing mod is the caller's.
func guestOn(m *Module, mod api.Module) *Guest {
	w := &wasm{mod: mod, request: mod.ExportedFunction(exportOnRequest)}
	return &Guest{m: m, w: w, ref: m.r.newActorRef(m.class, "", m.log, false)}
}

// memStorage stands in for the storage of one actor's events.
type memStorage map[string][]byte

func (s memStorage) Get(key string) ([]byte, bool) {
	v, ok := s[key]
	return bytes.Clone(v), ok
}

func (s memStorage) Put(key string, value []byte) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", actors.ErrLimit)
	}
	s[key] = bytes.Clone(value)
	return nil
}

func (s memStorage) Delete(key string) { delete(s, key) }

func (s memStorage) List(opt actors.ListOptions) ([]actors.Entry, error) {
	if opt.Limit < 0 {
		return nil, fmt.Errorf("negative limit %d", opt.Limit)
	}
	var keys []string
	for k := range s {
		if strings.HasPrefix(k, opt.Prefix) && (opt.Start == "" || k >= opt.Start) && (opt.End == "" || k < opt.End) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if opt.Reverse {
		slices.Reverse(keys)
	}
	if opt.Limit > 0 && len(keys) > opt.Limit {
		keys = keys[:opt.Limit]
	}
	entries := make([]actors.Entry, len(keys))
	for i, k := range keys {
		entries[i] = actors.Entry{Key: k, Value: bytes.Clone(s[k])}
	}
	return entries, nil
}

// Batch checks only the count of ops and empty keys, the limits the
// tests reach.
func (s memStorage) Batch(ops ...actors.Op) error {
	if len(ops) > actors.MaxBatchOps {
		return fmt.Errorf("%w: batch of %d ops", actors.ErrLimit, len(ops))
	}
	for i, op := range ops {
		if op.Key == "" {
			return fmt.Errorf("%w: batch op %d: empty key", actors.ErrLimit, i)
		}
	}
	for _, op := range ops {
		if op.Delete {
			delete(s, op.Key)
		} else {
			s[op.Key] = bytes.Clone(op.Value)
		}
	}
	return nil
}

func get(path, rawQuery string) *actors.Request {
	q, _ := url.ParseQuery(rawQuery)
	return &actors.Request{Method: http.MethodGet, Path: path, Query: q, Header: http.Header{}}
}

// do runs req and returns the response, failing the test on an error.
func do(t *testing.T, g *Guest, req *actors.Request, st actors.Storage) *actors.Response {
	t.Helper()
	resp, err := g.Handle(context.Background(), req, st)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	return resp
}

func body(t *testing.T, g *Guest, path string) string {
	t.Helper()
	return string(do(t, g, get(path, ""), memStorage{}).Body)
}

func TestCounter(t *testing.T) {
	g := newGuest(t, Config{}, counterGuest)
	st := memStorage{}
	for i, want := range []string{"1\n", "2\n", "3\n"} {
		resp := do(t, g, get("", ""), st)
		if resp.Status != http.StatusOK || string(resp.Body) != want {
			t.Fatalf("GET %d = %d %q, want 200 %q", i+1, resp.Status, resp.Body, want)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Fatalf("Content-Type = %q", ct)
		}
	}
	if got := string(st["count"]); got != "3" {
		t.Fatalf("stored count = %q, want 3", got)
	}
	if resp := do(t, g, get("", "read"), st); string(resp.Body) != "3\n" || string(st["count"]) != "3" {
		t.Fatalf("GET ?read = %q, stored %q", resp.Body, st["count"])
	}
	post := &actors.Request{Method: http.MethodPost, Header: http.Header{}}
	if resp := do(t, g, post, st); resp.Status != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" {
		t.Fatalf("POST = %d, Allow %q", resp.Status, resp.Header.Get("Allow"))
	}
	// The count is in storage, not in the guest: a fresh one goes on.
	g2 := g.m.NewGuest(nil)
	defer g2.Close()
	if resp := do(t, g2, get("", ""), st); string(resp.Body) != "4\n" {
		t.Fatalf("GET on a fresh guest = %q, want 4", resp.Body)
	}
}

func TestEcho(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	req := &actors.Request{
		Method: http.MethodPut,
		Path:   "/echo",
		Query:  url.Values{"b": {"2"}, "a": {"1 x"}},
		Header: http.Header{"X-Token": {"secret"}, "Accept": {"a", "b"}},
		Body:   []byte("hello"),
	}
	resp := do(t, g, req, memStorage{})
	if resp.Status != http.StatusCreated || string(resp.Body) != "hello" ||
		resp.Header.Get("X-Method") != "PUT" || resp.Header.Get("X-Query") != "a=1+x&b=2" ||
		resp.Header.Get("X-Token") != "secret" {
		t.Fatalf("echo = %d %q %v", resp.Status, resp.Body, resp.Header)
	}
}

func TestTimeoutStopsGuest(t *testing.T) {
	g := newGuest(t, Config{EventTimeout: 100 * time.Millisecond}, probeGuest)
	if got := body(t, g, "/events"); got != "1" {
		t.Fatalf("first event = %q", got)
	}
	_, err := g.Handle(context.Background(), get("/loop", ""), memStorage{})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("endless loop: err = %v, want ErrTimeout", err)
	}
	if g.Started() {
		t.Fatal("guest kept after a timeout")
	}
	if got := body(t, g, "/events"); got != "1" {
		t.Fatalf("event after the timeout = %q, want 1 (a fresh guest)", got)
	}
}

func TestCallerCancelIsNotTimeout(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := g.Handle(ctx, get("/events", ""), memStorage{})
	if err == nil || errors.Is(err, ErrTimeout) || !errors.Is(err, ErrGuest) {
		t.Fatalf("cancelled caller: err = %v, want ErrGuest", err)
	}
}

func TestMemoryLimit(t *testing.T) {
	g := newGuest(t, Config{MemoryLimit: 64 << 20}, probeGuest)
	if got := body(t, g, "/events"); got != "1" {
		t.Fatalf("first event = %q", got)
	}
	_, err := g.Handle(context.Background(), get("/grow", ""), memStorage{})
	if !errors.Is(err, ErrGuest) {
		t.Fatalf("growing past the limit: err = %v, want ErrGuest", err)
	}
	if !strings.Contains(err.Error(), "reached the limit") || !strings.Contains(err.Error(), "--wasm-memory") {
		t.Errorf("growing past the limit: %v, want the limit and its flag named", err)
	}
	if got := body(t, g, "/events"); got != "1" {
		t.Fatalf("event after the failure = %q, want 1 (a fresh guest)", got)
	}
	// A module that needs more than the limit to start does not compile.
	small := newRuntime(t, Config{MemoryLimit: 1 << 20})
	if _, err := small.Compile(context.Background(), "test", guest(t, probeGuest)); err == nil {
		t.Fatal("compiled a module whose initial memory is over the limit")
	}
}

func TestRecoveredPanicKeepsGuest(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	for i, path := range []string{"/events", "/recover", "/events"} {
		if got, want := body(t, g, path), fmt.Sprint(i+1); got != want {
			t.Fatalf("%s = %q, want %q", path, got, want)
		}
	}
}

// TestGuestErrorsDiscardGuest: a guest that panics without recovering is
// discarded, and the next event starts a fresh one.
func TestGuestErrorsDiscardGuest(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	body(t, g, "/events")
	if _, err := g.Handle(context.Background(), get("/panic", ""), memStorage{}); !errors.Is(err, ErrGuest) {
		t.Fatalf("err = %v, want ErrGuest", err)
	}
	if got := body(t, g, "/events"); got != "1" {
		t.Fatalf("next event = %q, want 1 (a fresh guest)", got)
	}
}

// TestHandlerFailureKeepsGuest: a handler that reports failure (a Go
// guest's handler that returns nil, code 1) fails its event with
// ErrHandler, and the guest, which returned in order, serves the next.
func TestHandlerFailureKeepsGuest(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	body(t, g, "/events")
	_, err := g.Handle(context.Background(), get("/nil", ""), memStorage{})
	if !errors.Is(err, ErrHandler) || errors.Is(err, ErrGuest) {
		t.Fatalf("err = %v, want ErrHandler", err)
	}
	if got := body(t, g, "/events"); got != "3" {
		t.Fatalf("next event = %q, want 3 (the same guest)", got)
	}
	if st := g.m.Stats(); st.Failures != 0 {
		t.Errorf("%d guest failures counted, want none", st.Failures)
	}
}

func TestStorageLimitReachesGuest(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	if got := body(t, g, "/limit"); got != "refused" {
		t.Fatalf("/limit = %q", got)
	}
}

// recorder is a slog handler that keeps messages.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func TestGuestLog(t *testing.T) {
	rec := &recorder{}
	g := newGuest(t, Config{Logger: slog.New(rec)}, probeGuest)
	body(t, g, "/log")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.msgs) != 1 || rec.msgs[0] != "hello from the guest" {
		t.Fatalf("logged %q", rec.msgs)
	}
}

// TestModuleWithoutHandlersRefused: a valid module that exports neither
// handler is no class: Compile refuses it, naming the exports and how a
// guest is built, instead of a class that answers 501 to every request.
func TestModuleWithoutHandlersRefused(t *testing.T) {
	r := newRuntime(t, Config{})
	empty := []byte("\x00asm\x01\x00\x00\x00") // a valid module with no exports
	_, err := r.Compile(context.Background(), "empty", empty)
	if err == nil || !strings.Contains(err.Error(), "exports neither wasmkeep_on_request nor wasmkeep_on_socket") ||
		!strings.Contains(err.Error(), "-buildmode=c-shared") {
		t.Fatalf("Compile of a module with no handler = %v, want a refusal naming the exports", err)
	}
}

func TestCompileRejectsGarbage(t *testing.T) {
	r := newRuntime(t, Config{})
	if _, err := r.Compile(context.Background(), "junk", []byte("not wasm")); err == nil {
		t.Fatal("Compile accepted junk")
	}
}

func TestClosedGuest(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	body(t, g, "/events")
	g.Close()
	if _, err := g.Handle(context.Background(), get("/events", ""), memStorage{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Handle after Close: err = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, true},
		{Config{MemoryLimit: 64 << 10, EventTimeout: time.Second}, true},
		{Config{MemoryLimit: -1}, false},
		{Config{MemoryLimit: 1000}, false},
		{Config{MemoryLimit: 8 << 30}, false},
		{Config{EventTimeout: -time.Second}, false},
		{Config{TrimInterval: -1}, true},
		{Config{TrimInterval: time.Millisecond}, true},
		{Config{TrimInterval: time.Microsecond}, false},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", tt.cfg, err, tt.ok)
		}
	}
}

// TestGuestOutputLogged: what a guest writes to stderr reaches the log
// with its actor, after the event; a guest that panics has its panic
// message logged with its failure, not only a wasm stack.
func TestGuestOutputLogged(t *testing.T) {
	logs := &testlog.Log{}
	g := newGuest(t, Config{Logger: slog.New(logs)}, probeGuest)
	if got := body(t, g, "/print"); got != "printed" {
		t.Fatalf("/print = %q", got)
	}
	if !logs.Has("guest output", "output=hello on stderr") {
		t.Errorf("no line with the guest's output:\n%s", logs)
	}
	if _, err := g.Handle(context.Background(), get("/panic", ""), memStorage{}); !errors.Is(err, ErrGuest) {
		t.Fatalf("/panic: err = %v, want ErrGuest", err)
	}
	if !logs.Has("guest discarded", "panic: not recovered") {
		t.Errorf("the panic's message is not logged with the failure:\n%s", logs)
	}
}

// TestGuestOutBounded: a guest's output is kept up to maxGuestOut bytes,
// its first and its last, with what was dropped between said; each take
// starts afresh.
func TestGuestOutBounded(t *testing.T) {
	var o guestOut
	o.Write([]byte("panic: the first line\n"))
	o.Write([]byte(strings.Repeat("a", maxGuestOut)))
	o.Write([]byte("the end\n"))
	got := o.take()
	if !strings.HasPrefix(got, "panic: the first line\n") || !strings.HasSuffix(got, "a"+"the end") ||
		!strings.Contains(got, "[30 bytes not kept]") || len(got) > maxGuestOut+40 {
		t.Fatalf("take = %.60q…%q (%d bytes)", got, got[max(0, len(got)-20):], len(got))
	}
	if o.take() != "" {
		t.Error("a second take gives again what the first took")
	}
	var l outLimit
	now := time.Unix(1_700_000_000, 0)
	for i := range outBurst {
		if ok, _ := l.allow(now); !ok {
			t.Fatalf("line %d refused within the burst", i)
		}
	}
	if ok, _ := l.allow(now); ok {
		t.Fatal("a line past the burst is allowed")
	}
	if ok, skipped := l.allow(now.Add(time.Second)); !ok || skipped != 1 {
		t.Fatalf("the next second: allowed %v, skipped %d; want true, 1", ok, skipped)
	}
}

// TestGoGuestSharesByDefault: a Go guest that declares nothing (the probe)
// is served in IsolationClass, the SDK's default; the node may still
// choose the other.
func TestGoGuestSharesByDefault(t *testing.T) {
	r := newRuntime(t, Config{})
	m := mustCompile(t, r, "probe", guest(t, probeGuest))
	if st := m.Stats(); st.Declared != IsolationClass || st.Isolation != IsolationClass {
		t.Fatalf("stats %+v, want a declared and served IsolationClass", st)
	}
	r = newRuntime(t, Config{Isolation: map[string]Isolation{"": IsolationActor}})
	m = mustCompile(t, r, "probe", guest(t, probeGuest))
	if st := m.Stats(); st.Declared != IsolationClass || st.Isolation != IsolationActor {
		t.Fatalf("stats %+v, want IsolationActor as the node chose", st)
	}
}
