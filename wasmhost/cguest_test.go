package wasmhost_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/egress"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/internal/secrets"
	"github.com/wasmkeep/wasmkeep/internal/testlog"
	"github.com/wasmkeep/wasmkeep/internal/wasmc"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
	"github.com/wasmkeep/wasmkeep/wasmhost"
)

// Guests in C: the C SDK (sdk/c) and the C classes (examples/counter-c,
// examples/room-c), built with clang for wasm32-wasi and run by the real
// host, as a class of an actorhost.Host and on whole nodes.

const (
	cSDK     = "sdk/c"
	cCounter = "../examples/counter-c"
	cRoom    = "../examples/room-c"
	chatPage = "../examples/chat/page/page.html"
)

// cFlags build a C class as `make examples` does, warnings made errors.
// Debian's wasi-libc is in /usr (lib/wasm32-wasi, include/wasm32-wasi).
var cFlags = []string{
	"--target=wasm32-wasi", "--sysroot=/usr", "-mexec-model=reactor", "-O2",
	"-Wall", "-Wextra", "-Werror", "-Wl,--strip-debug",
}

// cClang returns the clang that scripts/wasm-c.sh finds (wasmc.Clang).
func cClang(t *testing.T) string { return wasmc.Clang(t, "..") }

// buildC compiles the C files of dir with the SDK into a module, adding
// flags. The chat page is there as chat_page.inc, as `make examples`
// makes it.
func buildC(t *testing.T, clang, dir string, flags ...string) []byte {
	t.Helper()
	out := t.TempDir()
	page, err := os.ReadFile(chatPage)
	if err != nil {
		t.Fatal(err)
	}
	var inc strings.Builder
	for i, c := range page {
		fmt.Fprintf(&inc, "0x%02x,", c)
		if i%16 == 15 {
			inc.WriteByte('\n')
		}
	}
	if err := os.WriteFile(filepath.Join(out, "chat_page.inc"), []byte(inc.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	srcs, err := filepath.Glob(filepath.Join(dir, "*.c"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no C files in %s (%v)", dir, err)
	}
	wasm := filepath.Join(out, filepath.Base(dir)+".wasm")
	args := append(slices.Clone(cFlags), flags...)
	args = append(args, "-I", cSDK, "-I", out, "-o", wasm, filepath.Join(cSDK, "wasmkeep.c"))
	cmd := exec.Command(clang, append(args, srcs...)...)
	if msg, err := cmd.CombinedOutput(); err != nil || len(msg) > 0 {
		t.Fatalf("%s %s: %v\n%s", clang, strings.Join(cmd.Args[1:], " "), err, msg)
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func cRuntime(t *testing.T) *wasmhost.Runtime {
	t.Helper()
	r, err := wasmhost.NewRuntime(context.Background(), wasmhost.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// TestCGuestSDKWarnings: the SDK compiles with no warning under strict C11
// and the stricter warnings, and the examples' modules are WASI reactors
// exporting what the ABI names and importing only the host and WASI.
func TestCGuestSDKWarnings(t *testing.T) {
	clang := cClang(t)
	obj := filepath.Join(t.TempDir(), "wasmkeep.o")
	cmd := exec.Command(clang, "--target=wasm32-wasi", "--sysroot=/usr", "-O2", "-std=c11", "-pedantic",
		"-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wconversion", "-Wsign-conversion",
		"-Wmissing-prototypes", "-Wstrict-prototypes", "-c", "-o", obj, filepath.Join(cSDK, "wasmkeep.c"))
	if msg, err := cmd.CombinedOutput(); err != nil || len(msg) > 0 {
		t.Fatalf("strict build of the SDK: %v\n%s", err, msg)
	}

	rt := wazero.NewRuntime(t.Context())
	defer rt.Close(context.Background())
	for _, tt := range []struct {
		dir    string
		socket bool
	}{{cCounter, false}, {cRoom, true}} {
		wasm := buildC(t, clang, tt.dir)
		t.Logf("%s: %d bytes", filepath.Base(tt.dir), len(wasm))
		cm, err := rt.CompileModule(t.Context(), wasm)
		if err != nil {
			t.Fatal(err)
		}
		exports := cm.ExportedFunctions()
		for _, name := range []string{"_initialize", "wasmkeep_abi_version", "wasmkeep_on_request", "wasmkeep_on_leave", "wasmkeep_isolation"} {
			if _, ok := exports[name]; !ok {
				t.Errorf("%s does not export %s", tt.dir, name)
			}
		}
		if _, ok := exports["wasmkeep_on_socket"]; ok != tt.socket {
			t.Errorf("%s exports wasmkeep_on_socket: %v, want %v", tt.dir, ok, tt.socket)
		}
		if _, ok := exports["_start"]; ok {
			t.Errorf("%s is a command (exports _start)", tt.dir)
		}
		if _, ok := cm.ExportedMemories()["memory"]; !ok {
			t.Errorf("%s exports no memory", tt.dir)
		}
		for _, f := range cm.ImportedFunctions() {
			if mod, name, _ := f.Import(); mod != "wasmkeep" && mod != "wasi_snapshot_preview1" {
				t.Errorf("%s imports %s.%s", tt.dir, mod, name)
			}
		}
	}
}

// grantAll lets every hold act.
type grantAll struct{}

func (grantAll) Acquire(context.Context, ownership.Actor) (keeper.Decision, error) {
	return keeper.Decision{Verdict: keeper.Granted, Gen: 1}, nil
}
func (grantAll) MayAct(ownership.Actor, ownership.Generation) bool            { return true }
func (grantAll) MayActNow(ownership.Actor, ownership.Generation) (bool, bool) { return true, true }

// RequestMayAct is never asked: MayActNow always knows.
func (grantAll) RequestMayAct(ownership.Actor, ownership.Generation, *actor.PID, uint64) {
	panic("RequestMayAct: MayActNow always knows")
}
func (grantAll) Idle(ownership.Actor, ownership.Generation)              {}
func (grantAll) HoldEnded(ownership.Actor, ownership.Generation, string) {}
func (grantAll) DamageFound(string, error)                               {}

func cGet(path, rawQuery string) *actors.Request {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		panic(err)
	}
	return &actors.Request{Method: http.MethodGet, Path: path, Query: q, Header: http.Header{}}
}

// TestCGuestCounter runs the C counter as a class of an actorhost.Host, as
// TestClassInHost runs the Go one: counts per actor, ?read, 405, and the
// counts going on after the host and its runtime are replaced (the module
// compiled again) over the same bucket.
func TestCGuestCounter(t *testing.T) {
	clang := cClang(t)
	wasm := buildC(t, clang, cCounter)
	bucket := memstore.New(memstore.Faults{})
	ctx := context.Background()
	start := func() *actorhost.Host {
		t.Helper()
		reg := actors.NewRegistry()
		if err := reg.Register("counter-c", wasmhost.MustCompile(t, cRuntime(t), "counter-c", wasm)); err != nil {
			t.Fatal(err)
		}
		h, err := actorhost.New(actorhost.Config{Keeper: grantAll{}, Bucket: bucket, Registry: reg, System: keeper.NewSystem(nil)})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := start()
	deliver := func(name string, req *actors.Request) *actors.Response {
		t.Helper()
		resp, err := h.Deliver(t.Context(), ownership.Actor{Class: "counter-c", Name: name}, 1, req)
		if err != nil {
			t.Fatalf("%s %s?%s: %v", name, req.Method, req.Query.Encode(), err)
		}
		return resp
	}
	expect := func(name, rawQuery, want string) {
		t.Helper()
		resp := deliver(name, cGet("", rawQuery))
		if resp.Status != http.StatusOK || string(resp.Body) != want+"\n" {
			t.Fatalf("%s ?%s = %d %q, want 200 %q", name, rawQuery, resp.Status, resp.Body, want)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Fatalf("Content-Type = %q", ct)
		}
	}
	expect("room", "", "1")
	expect("room", "", "2")
	expect("hall", "", "1")
	expect("room", "", "3")
	expect("room", "read", "3")
	expect("room", "x=1&read=no", "3")
	expect("room", "reading", "4")
	resp := deliver("room", &actors.Request{Method: http.MethodPost, Header: http.Header{}})
	if resp.Status != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" || string(resp.Body) != "counter: only GET\n" {
		t.Fatalf("POST = %d %q, Allow %q", resp.Status, resp.Body, resp.Header.Get("Allow"))
	}

	// A new host on a new runtime: the module loaded again, the counts
	// from the bucket.
	if err := h.HibernateAll(ctx); err != nil {
		t.Fatal(err)
	}
	h = start()
	defer func() { _ = h.HibernateAll(ctx) }()
	expect("room", "", "5")
	expect("hall", "", "2")
}

// TestCGuestABIVersion: a module whose wasmkeep_abi_version is not the
// host's is refused when it is compiled (at the node's start), and the
// error names both versions.
func TestCGuestABIVersion(t *testing.T) {
	clang := cClang(t)
	r := cRuntime(t)
	for _, v := range []string{"1", "3"} {
		_, err := r.Compile(t.Context(), "counter-c", buildC(t, clang, cCounter, "-DWASMKEEP_ABI_VERSION="+v))
		if err == nil || !strings.Contains(err.Error(), "the module speaks guest ABI version "+v+", and this host serves version 2") {
			t.Fatalf("compile a version %s guest: err = %v", v, err)
		}
	}
	if m := wasmhost.MustCompile(t, r, "counter-c", buildC(t, clang, cCounter)); m.Stats().Declared != wasmhost.IsolationClass {
		t.Fatalf("counter-c declares isolation %v, want class", m.Stats().Declared)
	}
}

// cProbe uses what the examples do not: batches, lists, deletes, the
// many-key puts and gets, delete-all, rollback, the storage limits, query
// parameters and headers, calls, outbound HTTP and WebSockets, alarms,
// secrets, and
// the actors' objects (a count of each actor's events in its data, freed
// as it leaves).
const cProbe = `#include "wasmkeep.h"

#include <stdlib.h>

static int leaves;

static void on_leave(wk_actor *a) {
	leaves++;
	free(a->data);
	a->data = NULL;
}

WK_ISOLATION(WK_ISOLATION_CLASS)
WK_HANDLE_LEAVE(on_leave)

static void list(wk_buf *out, wk_list_options opt) {
	const wk_entry *e;
	int32_t n = wk_storage_list(&opt, &e);
	wk_buf_write_cstr(out, "list");
	for (int32_t i = 0; i < n; i++) {
		wk_buf_write_byte(out, ' ');
		wk_buf_write_str(out, e[i].key);
		wk_buf_write_byte(out, '=');
		wk_buf_write_str(out, e[i].value);
	}
	wk_buf_write_byte(out, '\n');
}

static wk_response *serve(const wk_request *req) {
	wk_buf out = {0};
	if (wk_str_eq(req->path, WK_STR("/storage"))) {
		wk_op ops[] = {
			{false, WK_STR("a/1"), WK_STR("one")},
			{false, WK_STR("a/2"), WK_STR("two")},
			{false, WK_STR("a/3"), WK_STR("three")},
			{false, WK_STR("b/1"), WK_STR("bee")},
			{true, WK_STR("a/2"), WK_STR("")},
		};
		wk_buf_write_cstr(&out, wk_storage_batch(ops, 5) == WK_STORED ? "batch stored\n" : "batch refused\n");
		wk_op many[WK_MAX_BATCH_OPS + 1];
		for (int i = 0; i < WK_MAX_BATCH_OPS + 1; i++)
			many[i] = (wk_op){false, WK_STR("m"), WK_STR("x")};
		wk_buf_write_cstr(&out, wk_storage_batch(many, WK_MAX_BATCH_OPS + 1) == WK_LIMIT ? "129 ops refused\n" : "129 ops stored\n");
		wk_buf_write_cstr(&out, wk_storage_put(WK_STR(""), WK_STR("x")) == WK_LIMIT ? "empty key refused\n" : "empty key stored\n");
		list(&out, (wk_list_options){.prefix = WK_STR("a/")});
		list(&out, (wk_list_options){.prefix = WK_STR("a/"), .limit = 1, .reverse = true});
		list(&out, (wk_list_options){.start = WK_STR("a/2"), .end = WK_STR("b/")});
		wk_storage_delete(WK_STR("b/1"));
		wk_storage_delete(WK_STR("never"));
		wk_str v;
		wk_buf_write_cstr(&out, wk_storage_get(WK_STR("b/1"), &v) ? "b/1 kept\n" : "b/1 deleted\n");
	} else if (wk_str_eq(req->path, WK_STR("/list"))) {
		list(&out, (wk_list_options){0});
	} else if (wk_str_eq(req->path, WK_STR("/many"))) {
		wk_entry puts[] = {{WK_STR("a"), WK_STR("1")}, {WK_STR("b"), WK_STR("2")}, {WK_STR("c"), WK_STR("")}};
		wk_buf_write_cstr(&out, wk_storage_put_many(puts, 3) == WK_STORED ? "put many stored\n" : "put many refused\n");
		wk_entry bad[] = {{WK_STR("d"), WK_STR("4")}, {WK_STR(""), WK_STR("x")}};
		wk_buf_write_cstr(&out, wk_storage_put_many(bad, 2) == WK_LIMIT ? "empty key refused\n" : "empty key stored\n");
		wk_str keys[] = {WK_STR("a"), WK_STR("x"), WK_STR("c"), WK_STR("d"), WK_STR("a")};
		wk_str vals[5];
		bool found[5];
		size_t n = wk_storage_get_many(keys, 5, vals, found);
		wk_buf_write_cstr(&out, "get many");
		for (int i = 0; i < 5; i++) {
			wk_buf_write_byte(&out, ' ');
			wk_buf_write_str(&out, keys[i]);
			wk_buf_write_byte(&out, found[i] ? '=' : '-');
			wk_buf_write_str(&out, vals[i]);
		}
		wk_buf_write_cstr(&out, " found=");
		wk_buf_write_int(&out, (int64_t)n);
		wk_buf_write_byte(&out, '\n');
		/* 300 keys, the first 100 stored: three host calls. */
		wk_str *many = wk_alloc(300 * sizeof *many), *mv = wk_alloc(300 * sizeof *mv);
		wk_entry *hundred = wk_alloc(100 * sizeof *hundred);
		for (int i = 0; i < 300; i++) {
			wk_buf kb = {0};
			wk_buf_write_byte(&kb, 'k');
			wk_buf_write_int(&kb, i);
			many[i] = wk_buf_str(&kb);
			if (i < 100)
				hundred[i] = (wk_entry){many[i], many[i]};
		}
		wk_buf_write_cstr(&out, wk_storage_put_many(hundred, 100) == WK_STORED ? "100 stored\n" : "100 refused\n");
		n = wk_storage_get_many(many, 300, mv, NULL);
		wk_buf_write_cstr(&out, "300 keys: found=");
		wk_buf_write_int(&out, (int64_t)n);
		wk_buf_write_cstr(&out, " k99=");
		wk_buf_write_str(&out, mv[99]);
		wk_buf_write_cstr(&out, " k299=");
		wk_buf_write_str(&out, mv[299]);
		wk_buf_write_byte(&out, '\n');
		wk_buf_write_cstr(&out, wk_storage_delete_all() == 0 ? "deleted all\n" : "delete all refused\n");
		wk_storage_put(WK_STR("z"), WK_STR("after"));
		list(&out, (wk_list_options){0});
	} else if (wk_str_eq(req->path, WK_STR("/rollback"))) {
		wk_storage_put(WK_STR("rb"), WK_STR("x"));
		wk_storage_delete_all();
		wk_response *resp = wk_rollback(wk_response_new(409));
		wk_request call = {.method = WK_STR("GET"), .path = WK_STR(""), .query = WK_STR("")};
		wk_response *called;
		wk_buf_write_cstr(&out, "rolled back, call ");
		wk_buf_write_int(&out, wk_call(WK_STR("counter-c"), WK_STR("rb"), &call, &called));
		wk_buf_write_byte(&out, '\n');
		wk_response_header(resp, "X-Rollback", WK_STR("yes"));
		resp->body = wk_buf_str(&out);
		return resp;
	} else if (wk_str_eq(req->path, WK_STR("/echo"))) {
		wk_response *resp = wk_response_new(201);
		wk_str v;
		wk_response_header(resp, "X-Method", req->method);
		wk_response_header(resp, "X-Query", req->query);
		if (wk_query(req, "q", &v))
			wk_response_header(resp, "X-Q", v);
		if (wk_header(req, "x-token", &v))
			wk_response_header(resp, "X-Token", v);
		resp->body = req->body;
		return resp;
	} else if (wk_str_eq(req->path, WK_STR("/actor"))) {
		wk_actor *a = wk_current();
		int *n = a->data;
		if (n == NULL) {
			n = calloc(1, sizeof *n);
			a->data = n;
		}
		(*n)++;
		wk_buf_write_str(&out, a->class_name);
		wk_buf_write_byte(&out, '/');
		wk_buf_write_str(&out, a->name);
		wk_buf_write_cstr(&out, " events=");
		wk_buf_write_int(&out, *n);
		wk_buf_write_cstr(&out, " actors=");
		wk_buf_write_int(&out, (int64_t)wk_actors());
		wk_buf_write_cstr(&out, " leaves=");
		wk_buf_write_int(&out, leaves);
		wk_buf_write_cstr(&out, " pages=");
		wk_buf_write_int(&out, (int64_t)__builtin_wasm_memory_size(0));
	} else if (wk_str_eq(req->path, WK_STR("/call"))) {
		wk_request call = {.method = WK_STR("GET"), .path = WK_STR(""), .query = WK_STR("")};
		wk_response *resp;
		int code = wk_call(WK_STR("counter-c"), WK_STR("called"), &call, &resp);
		wk_buf_write_cstr(&out, "counter-c: ");
		if (code == 0) {
			wk_buf_write_int(&out, resp->status);
			wk_buf_write_byte(&out, ' ');
			wk_buf_write_str(&out, resp->body);
		} else {
			wk_buf_write_int(&out, code);
			wk_buf_write_byte(&out, '\n');
		}
		wk_buf_write_cstr(&out, "nope: ");
		wk_buf_write_int(&out, wk_call(WK_STR("nope"), WK_STR("x"), &call, &resp));
		wk_buf_write_byte(&out, '\n');
	} else if (wk_str_eq(req->path, WK_STR("/alarm-set"))) {
		wk_buf_write_int(&out, wk_alarm_set(WK_STR("tick"), 1000));
		wk_buf_write_byte(&out, ' ');
		wk_buf_write_int(&out, wk_alarm_set(WK_STR(".."), 1000));
		int64_t at = 0;
		wk_buf_write_cstr(&out, wk_alarm_get(WK_STR("tick"), &at) ? " get " : " none ");
		wk_buf_write_int(&out, at);
		size_t n;
		const wk_alarm *list = wk_alarm_list(&n);
		for (size_t i = 0; i < n; i++) {
			wk_buf_write_byte(&out, ' ');
			wk_buf_write_str(&out, list[i].name);
		}
		wk_buf_write_byte(&out, '\n');
	} else if (wk_str_eq(req->path, WK_STR("/alarm-fired"))) {
		wk_str v;
		if (wk_storage_get(WK_STR("fired"), &v))
			wk_buf_write_str(&out, v);
		size_t n;
		wk_alarm_list(&n);
		wk_buf_write_cstr(&out, " left ");
		wk_buf_write_int(&out, (int64_t)n);
		wk_buf_write_byte(&out, '\n');
	} else if (wk_str_eq(req->path, WK_STR("/fetch"))) {
		wk_str url;
		if (!wk_query(req, "url", &url))
			return wk_text(400, WK_STR("url?\n"));
		wk_field token = {WK_STR("X-Token"), WK_STR("c")};
		wk_fetch_request f = {.method = WK_STR("POST"), .url = url, .headers = &token, .n_headers = 1, .body = WK_STR("from c")};
		wk_response *resp;
		int code = wk_fetch(&f, &resp);
		if (code == 0) {
			wk_buf_write_int(&out, resp->status);
			wk_buf_write_byte(&out, ' ');
			wk_buf_write_str(&out, resp->body);
		} else {
			wk_buf_write_int(&out, code);
		}
		wk_buf_write_byte(&out, '\n');
	} else if (wk_str_eq(req->path, WK_STR("/secret"))) {
		wk_buf long_name = {0};
		for (int i = 0; i < 129; i++)
			wk_buf_write_byte(&long_name, 'k');
		wk_str names[] = {WK_STR("api-key"), WK_STR("nope"), WK_STR(""), wk_buf_str(&long_name)};
		for (size_t i = 0; i < 4; i++) {
			wk_str v = WK_STR("kept");
			bool found = wk_secret(names[i], &v);
			wk_buf_write_int(&out, (int64_t)names[i].len);
			wk_buf_write_cstr(&out, found ? " found " : " none ");
			wk_buf_write_str(&out, v);
			wk_buf_write_byte(&out, '\n');
		}
		wk_log(WK_INFO, WK_STR("c probe read its secrets"));
	} else if (wk_str_eq(req->path, WK_STR("/dial"))) {
		wk_str url;
		if (!wk_query(req, "url", &url))
			return wk_text(400, WK_STR("url?\n"));
		wk_field token = {WK_STR("X-Token"), WK_STR("c")};
		wk_str tags[] = {WK_STR("feed"), WK_STR("c")};
		int64_t id = wk_ws_dial(url, &token, 1, tags, 2);
		if (id > 0)
			wk_buf_write_cstr(&out, wk_ws_dialed((uint64_t)id) ? "dialed" : "accepted?");
		else
			wk_buf_write_int(&out, id);
		wk_buf_write_byte(&out, '\n');
	} else if (wk_str_eq(req->path, WK_STR("/dial-closed"))) {
		wk_str v;
		if (wk_storage_get(WK_STR("dial-closed"), &v))
			wk_buf_write_str(&out, v);
		wk_buf_write_byte(&out, '\n');
	} else {
		return wk_text(404, WK_STR("no such probe\n"));
	}
	return wk_text(200, wk_buf_str(&out));
}

WK_HANDLE_REQUEST(serve)

/* A dialed socket's service gets "c:" and what it sent back, or for "list"
 * the URLs of the sockets tagged feed; its close is kept under
 * dial-closed, with the URL and tags. */
static int on_socket(const wk_socket_event *ev) {
	if (!wk_ws_dialed(ev->socket))
		return 0;
	wk_buf b = {0};
	if (ev->kind == WK_SOCKET_MESSAGE) {
		if (wk_str_eq(ev->data, WK_STR("list"))) {
			const wk_socket *list;
			size_t n = wk_ws_list(WK_STR("feed"), &list);
			for (size_t i = 0; i < n; i++) {
				if (i > 0)
					wk_buf_write_byte(&b, ' ');
				wk_buf_write_str(&b, list[i].url);
			}
		} else {
			wk_buf_write_cstr(&b, "c:");
			wk_buf_write_str(&b, ev->data);
		}
		wk_ws_send(ev->socket, true, wk_buf_str(&b));
		return 0;
	}
	wk_buf_write_int(&b, ev->code);
	wk_buf_write_byte(&b, ' ');
	wk_buf_write_str(&b, ev->url);
	for (size_t i = 0; i < ev->n_tags; i++) {
		wk_buf_write_byte(&b, i == 0 ? ' ' : ',');
		wk_buf_write_str(&b, ev->tags[i]);
	}
	return wk_storage_put(WK_STR("dial-closed"), wk_buf_str(&b)) == WK_STORED ? 0 : 1;
}

WK_HANDLE_SOCKET(on_socket)

static int on_alarm(const wk_alarm *a) {
	wk_buf v = {0};
	wk_buf_write_str(&v, a->name);
	wk_buf_write_cstr(&v, " fired, due ");
	wk_buf_write_int(&v, a->at_ms);
	return wk_storage_put(WK_STR("fired"), wk_buf_str(&v)) == WK_STORED ? 0 : 1;
}

WK_HANDLE_ALARM(on_alarm)
`

// readmeClass returns the class of sdk/c/README.md, its only C block.
func readmeClass(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cSDK, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, code, ok := strings.Cut(string(b), "```c\n")
	if ok {
		code, _, ok = strings.Cut(code, "```")
	}
	if !ok {
		t.Fatal("no C block in sdk/c/README.md")
	}
	return code
}

// TestCGuestProbe drives the rest of the SDK on a node: storage batches
// and lists, the limits, query and header helpers, a call to the C
// counter, a fetch and an outbound socket to a local service, alarms, a
// secret sealed in the node's bucket (whose value the node's log never
// holds); and the class of the SDK's README.
func TestCGuestProbe(t *testing.T) {
	clang := cClang(t)
	build := func(name, src string) []byte {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".c"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return buildC(t, clang, dir)
	}
	var log testlog.Log
	logger := slog.New(&log)
	r, err := wasmhost.NewRuntime(context.Background(), wasmhost.Config{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	const secretValue = "c-5ecr3t-77d2"
	feeds := make(chan *websocket.Conn, 4)
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			if r.Header.Get("X-Token") != "c" {
				http.Error(w, "no token", http.StatusForbidden)
				return
			}
			if c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil); err == nil {
				feeds <- c
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Header.Get("X-Token"), body)
	}))
	defer service.Close()
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{
		"c-probe":   wasmhost.MustCompile(t, r, "c-probe", build("probe", cProbe)),
		"c-readme":  wasmhost.MustCompile(t, r, "c-readme", build("readme", readmeClass(t))),
		"counter-c": wasmhost.MustCompile(t, r, "counter-c", buildC(t, clang, cCounter)),
	}, Configure: func(c *node.Config) {
		allow, err := egress.ParseAllow([]string{service.Listener.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		c.Egress.Allow = allow
		c.Logger = logger
		// A secret sealed in the node's bucket, opened with its identity.
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		if err := secrets.SetRecipients(t.Context(), c.Bucket, []string{id.Recipient().String()}, nil); err != nil {
			t.Fatal(err)
		}
		if err := secrets.Set(t.Context(), c.Bucket, "api-key", []byte(secretValue)); err != nil {
			t.Fatal(err)
		}
		c.Secrets = secrets.NewVault(c.Bucket, []age.Identity{id})
		if _, err := c.Secrets.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}})
	do := func(method, path string, body string, header http.Header) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, n.URL+"/actor/"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	text := func(path string, status int, want string) {
		t.Helper()
		resp := do(http.MethodGet, path, "", nil)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != status || string(b) != want {
			t.Fatalf("%s = %d:\n%s\nwant %d:\n%s", path, resp.StatusCode, b, status, want)
		}
	}
	probe := func(path, want string) { t.Helper(); text("c-probe/x"+path, http.StatusOK, want) }
	probe("/storage", "batch stored\n129 ops refused\nempty key refused\n"+
		"list a/1=one a/3=three\nlist a/3=three\nlist a/3=three\nb/1 deleted\n")
	probe("/list", "list a/1=one a/3=three\n") // committed with the event
	probe("/many", "put many stored\nempty key refused\nget many a=1 x- c= d- a=1 found=3\n"+
		"100 stored\n300 keys: found=100 k99=k99 k299=\ndeleted all\nlist z=after\n")
	probe("/list", "list z=after\n")
	// A rollback: the client gets the guest's answer, the event's put and
	// delete-all are discarded, and a call after it is refused.
	rb := do(http.MethodGet, "c-probe/x/rollback", "", nil)
	rbBody, _ := io.ReadAll(rb.Body)
	rb.Body.Close()
	if rb.StatusCode != http.StatusConflict || string(rbBody) != "rolled back, call -1\n" || rb.Header.Get("X-Rollback") != "yes" {
		t.Fatalf("rollback = %d %q %v", rb.StatusCode, rbBody, rb.Header)
	}
	probe("/list", "list z=after\n")
	text("counter-c/rb", http.StatusOK, "1\n") // never called
	probe("/call", "counter-c: 200 1\nnope: -3\n")
	probe("/call", "counter-c: 200 2\nnope: -3\n")
	probe("/fetch?url="+url.QueryEscape(service.URL+"/x"), "200 POST c from c\n")
	probe("/fetch?url="+url.QueryEscape("http://10.9.9.9/"), "-2\n")
	probe("/fetch?url="+url.QueryEscape("gopher://x/"), "-1\n")
	probe("/secret", "7 found "+secretValue+"\n4 none kept\n0 none kept\n129 none kept\n")
	require.True(t, log.Has("c probe read its secrets", "guest=true"), "the C guest's log line is not in the log")
	require.NotContains(t, log.String(), secretValue, "the node's log holds the secret's value")
	// An outbound socket: the service's messages reach the socket handler,
	// which answers on the socket, and its close comes with the URL and
	// tags.
	feedURL := "ws" + strings.TrimPrefix(service.URL, "http") + "/feed"
	probe("/dial?url="+url.QueryEscape(feedURL), "dialed\n")
	var feed *websocket.Conn
	select {
	case feed = <-feeds:
		defer feed.Close()
	case <-time.After(nodetest.Wait):
		t.Fatal("the C guest's socket did not reach the service")
	}
	for msg, want := range map[string]string{"hi": "c:hi", "list": feedURL} {
		require.NoError(t, feed.WriteMessage(websocket.TextMessage, []byte(msg)))
		require.NoError(t, feed.SetReadDeadline(time.Now().Add(nodetest.Wait)))
		_, b, err := feed.ReadMessage()
		require.NoError(t, err)
		require.Equal(t, want, string(b), "the C guest's answer to %q", msg)
	}
	require.NoError(t, feed.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "bye"), time.Now().Add(time.Second)))
	// The close travels over a real WebSocket to a node over real TCP,
	// and reaches the guest as an event of its own: nothing the test
	// holds says when it has run, so its record is read until it is there.
	require.Eventually(t, func() bool {
		resp := do(http.MethodGet, "c-probe/x/dial-closed", "", nil)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b) == "4000 "+feedURL+" feed,c\n"
	}, nodetest.Wait, 10*time.Millisecond, "the C guest's close event, with the URL and tags")
	probe("/dial?url="+url.QueryEscape("ws://10.9.9.9/"), "-2\n")
	probe("/dial?url="+url.QueryEscape(service.URL+"/feed"), "-1\n") // http://
	probe("/alarm-set", "0 -1 get 1000 tick\n")
	// The node delivers the alarm from its own poller, on the wall clock
	// of a node over real TCP: its record is read until it fired.
	require.Eventually(t, func() bool {
		resp := do(http.MethodGet, "c-probe/x/alarm-fired", "", nil)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b) == "tick fired, due 1000 left 0\n"
	}, 10*time.Second, 20*time.Millisecond, "the C guest's alarm fired and ended")
	text("c-readme/book?who=ada", http.StatusOK, "ada\n")
	text("c-readme/book?who=bob", http.StatusOK, "ada\nbob\n")
	text("c-readme/book", http.StatusBadRequest, "who?\n")

	resp := do(http.MethodPut, "c-probe/x/echo?z=1&q=a+b%21", "hello", http.Header{"X-Token": {"secret"}})
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || string(b) != "hello" || resp.Header.Get("X-Method") != "PUT" ||
		resp.Header.Get("X-Query") != "q=a+b%21&z=1" || resp.Header.Get("X-Q") != "a b!" || resp.Header.Get("X-Token") != "secret" {
		t.Fatalf("echo = %d %q %v", resp.StatusCode, b, resp.Header)
	}
}

// TestCGuestActors: the C SDK keeps an object per actor on a shared guest,
// its data kept between the actor's events; as actors hibernate the leave
// handler sees each, the objects go, and the guest's memory does not grow
// with the actors that came and went.
func TestCGuestActors(t *testing.T) {
	clang := cClang(t)
	dir := filepath.Join(t.TempDir(), "probe")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "probe.c"), []byte(cProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := wasmhost.NewRuntime(t.Context(), wasmhost.Config{Logger: slog.New(slog.DiscardHandler), SharedGuests: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	m := wasmhost.MustCompile(t, r, "c-probe", buildC(t, clang, dir))
	reg := actors.NewRegistry()
	if err := reg.Register("c-probe", m); err != nil {
		t.Fatal(err)
	}
	h, err := actorhost.New(actorhost.Config{Keeper: grantAll{}, Bucket: memstore.New(memstore.Faults{}), Registry: reg,
		System: keeper.NewSystem(nil), IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.HibernateAll(context.Background()) }()
	probe := func(name string) (events, objects, leaves, pages int) {
		t.Helper()
		resp, err := h.Deliver(t.Context(), ownership.Actor{Class: "c-probe", Name: name}, 1, cGet("/actor", ""))
		if err != nil {
			t.Fatal(err)
		}
		var who string
		if _, err := fmt.Sscanf(string(resp.Body), "%s events=%d actors=%d leaves=%d pages=%d", &who, &events, &objects, &leaves, &pages); err != nil || who != "c-probe/"+name {
			t.Fatalf("%s /actor = %d %q (%v)", name, resp.Status, resp.Body, err)
		}
		return events, objects, leaves, pages
	}
	gone := func() {
		t.Helper()
		// The actors hibernate on their idle timers (real ones: the guest
		// runs compiled code on real goroutines), and each one's object
		// leaves the guest after that, on whichever goroutine holds the
		// guest then: no event marks the last, so the counts are read
		// until they are zero.
		deadline := time.Now().Add(nodetest.Wait)
		for h.Resident() > 0 || m.Stats().Placed > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d actors still resident", h.Resident())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	const perRound = 100
	var warm int
	for round := range 10 {
		for i := range perRound {
			name := fmt.Sprintf("r%d-%d", round, i)
			for want := 1; want <= 2; want++ {
				if events, _, _, _ := probe(name); events != want {
					t.Fatalf("%s: its object counts %d events, want %d", name, events, want)
				}
			}
		}
		gone()
		_, objects, leaves, pages := probe(fmt.Sprint("after", round))
		if want := (round+1)*perRound + round; objects != 1 || leaves != want {
			t.Fatalf("after round %d: %d objects, %d leaves; want 1 and %d", round, objects, leaves, want)
		}
		gone()
		if round == 2 {
			warm = pages
		} else if round > 2 && pages > warm {
			t.Fatalf("round %d: the guest's memory grew from %d to %d pages with actors that came and went", round, warm, pages)
		}
	}
	if st := m.Stats(); st.Failures != 0 || st.Shared != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// startCRoom starts a node serving the C room as class "room-c", with a
// short idle timeout, and more classes if given.
func startCRoom(t *testing.T, clang string, more map[string][]byte) *nodetest.Node {
	t.Helper()
	r := cRuntime(t)
	classes := map[string]actors.Class{"room-c": wasmhost.MustCompile(t, r, "room-c", buildC(t, clang, cRoom))}
	for name, wasm := range more {
		classes[name] = wasmhost.MustCompile(t, r, name, wasm)
	}
	return nodetest.Start(t, nodetest.Options{Classes: classes, IdleTimeout: 150 * time.Millisecond})
}

// TestCGuestRoom: the C room on a real node, as
// TestRoomHibernatesWithItsSockets and TestRoomEcho drive the Go one: the
// page, two people whose messages reach both, presence as people come and
// go, the room hibernating with its sockets open and woken by a message on
// a fresh guest, the socket's tag, and the plain echo and broadcast
// protocol.
func TestCGuestRoom(t *testing.T) {
	clang := cClang(t)
	n := startCRoom(t, clang, nil)

	resp, err := http.Get(n.URL + "/actor/room-c/lobby")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page, err := os.ReadFile(chatPage)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || !bytes.Equal(got, page) {
		t.Fatalf("page: %d %s, %d bytes (want %d)", resp.StatusCode, resp.Header.Get("Content-Type"), len(got), len(page))
	}

	ada := n.Join(t, "room-c", "lobby", "ada")
	if h := ada.AwaitHistory(); len(h) != 0 {
		t.Fatalf("history of a new room: %+v", h)
	}
	ada.AwaitPresence("ada")
	bob := n.Join(t, "room-c", "lobby", "bob")
	bob.AwaitHistory()
	ada.AwaitPresence("ada", "bob")
	bob.AwaitPresence("ada", "bob")

	ada.Say("hello \"world\" ☃")
	ada.AwaitSaid("ada", "hello \"world\" ☃")
	bob.AwaitSaid("ada", "hello \"world\" ☃")

	n.AwaitIdle(t, "room-c/lobby")
	if s := n.Status(); s.Parked != 1 {
		t.Fatalf("after hibernation: %d parked records, want 1", s.Parked)
	}
	// A message wakes it on a fresh guest, with its storage and the
	// sockets' attachments.
	bob.Say("still here")
	ada.AwaitSaid("bob", "still here")
	bob.AwaitSaid("bob", "still here")

	n.AwaitIdle(t, "room-c/lobby")
	carol := n.Join(t, "room-c", "lobby", "carol")
	h := carol.AwaitHistory()
	if len(h) != 2 || h[0].From != "ada" || h[0].Text != "hello \"world\" ☃" || h[1].From != "bob" || h[1].Text != "still here" ||
		h[1].At < time.Now().Add(-time.Minute).UnixMilli() || h[1].At > time.Now().UnixMilli() {
		t.Fatalf("history after two hibernations: %+v", h)
	}
	ada.AwaitPresence("ada", "bob", "carol")

	// A close event after hibernation: the others hear who is left.
	n.AwaitIdle(t, "room-c/lobby")
	carol.Conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	ada.AwaitPresence("ada", "bob")
	bob.AwaitPresence("ada", "bob")

	// Saying before joining closes the socket with 1008.
	eve := n.Dial(t, "room-c", "lobby")
	if err := eve.WriteJSON(map[string]string{"type": "say", "text": "sneaky"}); err != nil {
		t.Fatal(err)
	}
	eve.SetReadDeadline(time.Now().Add(nodetest.Wait))
	for {
		_, _, err := eve.ReadMessage()
		if err == nil {
			continue
		}
		if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
			t.Fatalf("say before join: %v, want close 1008", err)
		}
		break
	}

	// The plain protocol: an echo to the socket, "all:" to every socket of
	// the room, members or not, and nothing to another room.
	a, b := n.Dial(t, "room-c", "bench"), n.Dial(t, "room-c", "bench")
	other := n.Dial(t, "room-c", "elsewhere")
	read := func(c *websocket.Conn, who string, wantType int) string {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(nodetest.Wait))
		typ, msg, err := c.ReadMessage()
		if err != nil || typ != wantType {
			t.Fatalf("%s read: %v (type %d, want %d)", who, err, typ, wantType)
		}
		return string(msg)
	}
	for _, msg := range []string{"ping 0", "ping 1"} {
		a.WriteMessage(websocket.TextMessage, []byte(msg))
		if got := read(a, "a", websocket.TextMessage); got != msg {
			t.Fatalf("echo: %q, want %q", got, msg)
		}
	}
	a.WriteMessage(websocket.BinaryMessage, []byte("all:\x00"))
	if got := read(a, "a", websocket.BinaryMessage); got != "all:\x00" {
		t.Fatalf("binary echo: %q", got)
	}
	b.WriteMessage(websocket.TextMessage, []byte("all:hi"))
	for _, c := range []*websocket.Conn{a, b} {
		if got := read(c, "bench", websocket.TextMessage); got != "all:hi" {
			t.Fatalf("broadcast: %q", got)
		}
	}
	other.WriteMessage(websocket.TextMessage, []byte("me"))
	if got := read(other, "other", websocket.TextMessage); got != "me" {
		t.Fatalf("other room got %q", got)
	}

	// The tag the room accepts its sockets with, as the host hands it to
	// the node.
	mod := wasmhost.MustCompile(t, cRuntime(t), "room-c", buildC(t, clang, cRoom))
	up, err := mod.Handle(t.Context(), &actors.Request{Method: http.MethodGet, Header: http.Header{"Upgrade": {"WebSocket"}, "Connection": {"Upgrade"}}}, nil)
	if err != nil || up.Accept == nil || !slices.Equal(up.Accept.Tags, []string{"member"}) {
		t.Fatalf("upgrade = %+v, %v; want accepted with tag member", up, err)
	}
	if resp, err := mod.Handle(t.Context(), &actors.Request{Method: http.MethodPost, Header: http.Header{}}, nil); err != nil ||
		resp.Status != http.StatusNotFound || string(resp.Body) != "not found\n" {
		t.Fatalf("POST = %+v, %v; want 404", resp, err)
	}
}

// TestCGuestOldMinor: a module of minor version 1 (the C room built as
// the SDK was before outbound sockets) gets socket events and lists as
// minor 1 has them, which its decoder, refusing bytes left over, reads:
// joins, messages and a close reach the room, and presence (the list)
// follows.
func TestCGuestOldMinor(t *testing.T) {
	clang := cClang(t)
	m := wasmhost.MustCompile(t, cRuntime(t), "room-c", buildC(t, clang, cRoom, "-DWASMKEEP_ABI_MINOR=1"))
	if got := m.Stats().Minor; got != 1 {
		t.Fatalf("the room built for minor 1 speaks minor %d", got)
	}
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"room-c": m}, IdleTimeout: 150 * time.Millisecond})
	ada := n.Join(t, "room-c", "old", "ada")
	ada.AwaitHistory()
	ada.AwaitPresence("ada")
	bob := n.Join(t, "room-c", "old", "bob")
	bob.AwaitHistory()
	ada.AwaitPresence("ada", "bob")
	bob.Say("hi")
	ada.AwaitSaid("bob", "hi")
	n.AwaitIdle(t, "room-c/old")
	bob.Conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	ada.AwaitPresence("ada")
	if st := m.Stats(); st.Failures != 0 {
		t.Fatalf("%d guest failures", st.Failures)
	}
}

// step is one message a client sends in TestCGuestRoomMatchesGo.
type step struct {
	binary bool
	msg    string
}

// roomSteps try the corners of the room's JSON and of its input cleaning.
// After each close the client goes on in a fresh room.
func roomSteps() []step {
	s := func(msgs ...string) []step {
		out := make([]step, len(msgs))
		for i, m := range msgs {
			out[i] = step{msg: m}
		}
		return out
	}
	var steps []step
	steps = append(steps, s(
		`{"type":"say","text":"early"}`, // closed: join first
		`{"type":"join"}`,               // closed: a name is required
		`{"type":"join","name":" \u00a0\u2003Ada\u0085\u0007\u3000 "}`,
		`{"type":"say","text":"a \"quoted\" \\ back\/slash \b\f\n\r\t tab"}`,
		`{"type":"say","text":"\ud83d\ude00 \ud800x \udc00\u0041 \uDBFF\uDFFF \ud800"}`,
		`{"type":"say","text":"héllo ☃ \u00e9 \u0000nul\u007fdel\u0085nel\u200bzw\u2029"}`,
		`{"type":"x","text":"dup1","o":{"a":[1,true,null,"]",{"b":-1.5e3}],"c":{}},"e":[],"text":"dup2","type":"say","n":1e}`,
		`{"type":1,"text":"ignored"}`,
		`{"type":"say","text":1}`,
		`{"type":"say","text":"kept","text":2}`,
		` {"type":"say","text":"a leading space: an echo"}`,
		"{ \"type\" : \"say\" , \"text\" : \"  spaced  \" } \n\t",
		`{"type":"say","text":"x`+strings.Repeat("é", 1050)+`"}`,
		`{"type":"join","name":"`+strings.Repeat("ñ", 30)+`"}`,
		"all:hi",
		"plain",
	)...)
	steps = append(steps, step{binary: true, msg: `{"type":"say","text":"bin"}`})
	steps = append(steps, s(
		"",
		`[1]`,
		`{"type":"say","text":"ok"} x`, // closed: not one object
		`{"a":`+strings.Repeat("[", 40)+strings.Repeat("]", 40)+`}`, // closed: too deep
		`{}`,
		`{"type":"join","name":"bob"}`,
		`{"type":"say","text":"\t\n  "}`,
	)...)
	for i := range 103 {
		steps = append(steps, step{msg: fmt.Sprintf(`{"type":"say","text":"n%d"}`, i)})
	}
	steps = append(steps, s(
		`{"type":"join","name":"bob"}`, // the last 100
		`{"type":"say","text":"\x"}`,   // closed: a bad escape
		`{"type":"join","name":"\udfff"}`,
		`{"type":"say","text":"`+strings.Repeat("a", 1999)+`é"}`,
		"{\"type\":\"say\",\"text\":\"a\tb\"}",                  // closed: a raw control character
		`{"type":"join","name":"\ud800\u12"}`,                   // closed: a short escape
		`{"type":"join","name":"x"`,                             // closed: cut short
		`{"type":"join","name":"zed","type":"say","text":"hi"}`, // closed: join first
		`{"type":"join","name":"\u212a\u017f"}`,
		`{"type":"say","text":"bye"}`,
	)...)
	return steps
}

var atField = regexp.MustCompile(`"at":-?[0-9]+`)

// transcript runs roomSteps against class and returns what came back,
// each message's time made 0. After each step it sends "sync", which the
// room echoes, to know the step's answers are all in.
func transcript(t *testing.T, n *nodetest.Node, class string) []string {
	room := 0
	conn := n.Dial(t, class, "diff-0")
	var out []string
	for i, st := range roomSteps() {
		typ := websocket.TextMessage
		if st.binary {
			typ = websocket.BinaryMessage
		}
		if err := conn.WriteMessage(typ, []byte(st.msg)); err != nil {
			t.Fatalf("%s step %d: %v", class, i, err)
		}
		_ = conn.WriteMessage(websocket.TextMessage, []byte("sync")) // the room may have closed the socket
		conn.SetReadDeadline(time.Now().Add(nodetest.Wait))
		for {
			typ, b, err := conn.ReadMessage()
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				out = append(out, fmt.Sprintf("%d: close %d %q", i, ce.Code, ce.Text))
				room++
				conn = n.Dial(t, class, fmt.Sprintf("diff-%d", room))
				break
			}
			if err != nil {
				t.Fatalf("%s step %d: %v", class, i, err)
			}
			if typ == websocket.TextMessage && string(b) == "sync" {
				break
			}
			out = append(out, fmt.Sprintf("%d: %d %s", i, typ, atField.ReplaceAll(b, []byte(`"at":0`))))
		}
	}
	return out
}

// TestCGuestRoomMatchesGo: the C room and the Go room (examples/room-wasm)
// answer the same frames and closes, byte for byte but the times, to the
// same messages, and the same HTTP answers.
func TestCGuestRoomMatchesGo(t *testing.T) {
	clang := cClang(t)
	goRoom := filepath.Join(t.TempDir(), "room-wasm.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", goRoom, "../examples/room-wasm")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the Go room: %v\n%s", err, msg)
	}
	wasm, err := os.ReadFile(goRoom)
	if err != nil {
		t.Fatal(err)
	}
	n := startCRoom(t, clang, map[string][]byte{"room-wasm": wasm})

	for _, path := range []string{"", "/x"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			var answers [2]string
			for i, class := range []string{"room-wasm", "room-c"} {
				req, _ := http.NewRequestWithContext(t.Context(), method, n.URL+"/actor/"+class+"/page"+path, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				answers[i] = fmt.Sprintf("%d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			if answers[0] != answers[1] {
				t.Errorf("%s %s: Go %.200s, C %.200s", method, path, answers[0], answers[1])
			}
		}
	}

	want, got := transcript(t, n, "room-wasm"), transcript(t, n, "room-c")
	if len(want) < 130 {
		t.Fatalf("the Go room answered %d frames, want more", len(want))
	}
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			t.Fatalf("frame %d (of %d from Go, %d from C):\nGo: %.600q\nC:  %.600q", i, len(want), len(got), w, g)
		}
	}
}
