package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// post returns a POST request for path with a query and a body.
func post(path, rawQuery, body string) *actors.Request {
	req := get(path, rawQuery)
	req.Method = http.MethodPost
	req.Body = []byte(body)
	return req
}

func TestGuestList(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{"a": []byte("A"), "b/1": []byte("1"), "b/2": []byte("2"), "b/3": []byte("3"), "c": []byte("C")}
	tests := []struct {
		query string
		want  string
	}{
		{"", "a=A\nb/1=1\nb/2=2\nb/3=3\nc=C\n"},
		{"prefix=b/", "b/1=1\nb/2=2\nb/3=3\n"},
		{"prefix=b/&reverse", "b/3=3\nb/2=2\nb/1=1\n"},
		{"prefix=b/&limit=2", "b/1=1\nb/2=2\n"},
		{"prefix=b/&limit=2&reverse", "b/3=3\nb/2=2\n"},
		{"start=b/2", "b/2=2\nb/3=3\nc=C\n"},
		{"start=b/2&end=c", "b/2=2\nb/3=3\n"},
		{"start=b/2&end=c&reverse&limit=1", "b/3=3\n"},
		{"prefix=x", ""},
	}
	for _, tt := range tests {
		resp := do(t, g, get("/list", tt.query), st)
		if resp.Status != http.StatusOK || string(resp.Body) != tt.want {
			t.Errorf("list ?%s = %d %q, want %q", tt.query, resp.Status, resp.Body, tt.want)
		}
	}
	// A negative limit never reaches the host: the SDK refuses it.
	if resp := do(t, g, get("/list", "limit=-1"), st); resp.Status != http.StatusBadRequest {
		t.Errorf("list with a negative limit = %d %q, want 400", resp.Status, resp.Body)
	}
}

func TestGuestBatch(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{"a": []byte("A")}
	batch := func(query, body, want string) {
		t.Helper()
		resp := do(t, g, post("/batch", query, body), st)
		if resp.Status != http.StatusOK || string(resp.Body) != want {
			t.Fatalf("batch ?%s %q = %d %q, want %q", query, body, resp.Status, resp.Body, want)
		}
	}
	batch("", "put b/1 one\nput b/2 two\ndel a", "ok\nb/1=one\nb/2=two\n")
	// An empty key in the middle: nothing of the batch is applied, the
	// event's earlier put stays.
	batch("put=x", "put c/1 x\nput  y\ndel b/1", "refused\nb/1=one\nb/2=two\nx=before\n")
	if _, ok := st["c/1"]; ok {
		t.Fatal("a refused batch wrote c/1")
	}
	var many strings.Builder
	for range actors.MaxBatchOps + 1 {
		many.WriteString("del b/1\n")
	}
	batch("", many.String(), "refused\nb/1=one\nb/2=two\nx=before\n")
	batch("", strings.Repeat("del b/1\n", actors.MaxBatchOps), "ok\nb/2=two\nx=before\n")
}

// TestGuestStorageInHost runs list and batch on the storage of real
// events (actorhost.Host over a bucket): a refused batch leaves the event's
// earlier write, which commits; nothing of the batch does.
func TestGuestStorageInHost(t *testing.T) {
	reg := probeRegistry(t, Config{})
	ctx := context.Background()
	h, err := actorhost.New(actorhost.Config{Keeper: anyKeeper{}, Bucket: memstore.New(memstore.Faults{}), Registry: reg, System: keeper.NewSystem(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.HibernateAll(ctx) }()
	a := ownership.Actor{Class: "probe", Name: "a"}
	expect := func(req *actors.Request, want string) {
		t.Helper()
		resp, err := h.Deliver(t.Context(), a, 1, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusOK || string(resp.Body) != want {
			t.Fatalf("%s ?%v = %d %q, want %q", req.Path, req.Query, resp.Status, resp.Body, want)
		}
	}
	expect(post("/batch", "", "put a 1\nput b 2\nput c 3"), "ok\na=1\nb=2\nc=3\n")
	expect(post("/batch", "put=x", "del a\nput d 4\nput  bad"), "refused\na=1\nb=2\nc=3\nx=before\n")
	expect(post("/batch", "put=y", "del a\nput b 22\ndel c\nput d 4"), "ok\nb=22\nd=4\nx=before\ny=before\n")
	expect(get("/list", ""), "b=22\nd=4\nx=before\ny=before\n")
	expect(get("/list", "reverse&limit=3&end=y"), "x=before\nd=4\nb=22\n")
}

// batchOps encodes ops as storage_batch takes them: kind 1 put (key,
// value), kind 2 delete (key).
func batchOps(count uint32, ops ...[]string) []byte {
	b := wire.AppendU32(nil, count)
	for _, op := range ops {
		if len(op) == 2 {
			b = append(b, batchPut)
			b = wire.AppendString(b, op[0])
			b = wire.AppendString(b, op[1])
		} else {
			b = append(b, batchDelete)
			b = wire.AppendString(b, op[0])
		}
	}
	return b
}

func TestDecodeBatch(t *testing.T) {
	ops, n, ok := decodeBatch(batchOps(3, []string{"a", "1"}, []string{"b"}, []string{"c", ""}))
	if !ok || n != 3 || len(ops) != 3 ||
		ops[0].Key != "a" || string(ops[0].Value) != "1" || ops[0].Delete ||
		ops[1].Key != "b" || !ops[1].Delete ||
		ops[2].Key != "c" || len(ops[2].Value) != 0 || ops[2].Delete {
		t.Fatalf("decodeBatch = %+v, %d, %v", ops, n, ok)
	}
	if ops, n, ok := decodeBatch(batchOps(0)); !ok || n != 0 || len(ops) != 0 {
		t.Fatalf("empty batch = %+v, %d, %v", ops, n, ok)
	}
	// Past MaxBatchOps the encoding is checked but the ops not kept.
	dels := make([][]string, actors.MaxBatchOps+2)
	for i := range dels {
		dels[i] = []string{"k"}
	}
	if ops, n, ok := decodeBatch(batchOps(uint32(len(dels)), dels...)); !ok || n != len(dels) || len(ops) != actors.MaxBatchOps {
		t.Fatalf("long batch: %d ops kept, n %d, ok %v", len(ops), n, ok)
	}

	good := batchOps(2, []string{"a", "1"}, []string{"b"})
	bad := map[string][]byte{
		"empty":          nil,
		"short count":    {1, 0},
		"truncated":      good[:len(good)-1],
		"left over":      append(good[:len(good):len(good)], 0),
		"count too high": batchOps(3, []string{"a", "1"}, []string{"b"}),
		"count too low":  batchOps(1, []string{"a", "1"}, []string{"b"}),
		"unknown kind":   append(wire.AppendString([]byte{1, 0, 0, 0, 3}, "a"), 0, 0, 0, 0),
		"put, no value":  wire.AppendString([]byte{1, 0, 0, 0, batchPut}, "a"),
		"huge count":     wire.AppendU32(nil, 1<<31),
		"key past end":   append([]byte{1, 0, 0, 0, batchDelete}, 9, 0, 0, 0, 'a'),
	}
	for name, b := range bad {
		if ops, n, ok := decodeBatch(b); ok {
			t.Errorf("%s: decodeBatch = %+v, %d, true", name, ops, n)
		}
	}
}

func TestDecodeListOptions(t *testing.T) {
	enc := func(limit, flags uint32) []byte {
		b := wire.AppendString(nil, "p")
		b = wire.AppendString(b, "s")
		b = wire.AppendString(b, "e")
		b = wire.AppendU32(b, limit)
		return wire.AppendU32(b, flags)
	}
	opt, ok := decodeListOptions(enc(7, listReverse))
	if want := (actors.ListOptions{Prefix: "p", Start: "s", End: "e", Limit: 7, Reverse: true}); !ok || opt != want {
		t.Fatalf("decodeListOptions = %+v, %v; want %+v", opt, ok, want)
	}
	if opt, ok := decodeListOptions(enc(0, 0)); !ok || opt.Reverse || opt.Limit != 0 {
		t.Fatalf("decodeListOptions without flags = %+v, %v", opt, ok)
	}
	for name, b := range map[string][]byte{
		"unknown flag": enc(0, 2),
		"short":        enc(0, 0)[:10],
		"left over":    append(enc(0, 0), 0),
	} {
		if opt, ok := decodeListOptions(b); ok {
			t.Errorf("%s: decodeListOptions = %+v, true", name, opt)
		}
	}
}

func TestEncodeEntries(t *testing.T) {
	r := wire.NewReader(encodeEntries([]actors.Entry{{Key: "a", Value: []byte("1")}, {Key: "b"}}))
	if r.Count(8) != 2 || r.String() != "a" || string(r.Bytes()) != "1" || r.String() != "b" || len(r.Bytes()) != 0 || r.Err() {
		t.Fatal("encodeEntries: wrong layout")
	}
}

// TestRawStorageABI hands the host encodings the SDK never makes: invalid
// list options answer -1, a batch over MaxBatchOps is refused with 1, and
// a malformed batch breaks the ABI, which discards the guest.
func TestRawStorageABI(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{"k": []byte("v")}
	raw := func(path string, body []byte, want string) {
		t.Helper()
		resp := do(t, g, &actors.Request{Method: http.MethodPost, Path: path, Header: http.Header{}, Body: body}, st)
		if string(resp.Body) != want {
			t.Fatalf("%s %v = %q, want %q", path, body, resp.Body, want)
		}
	}
	opts := func(flags uint32) []byte {
		b := wire.AppendString(nil, "")
		b = wire.AppendString(b, "")
		b = wire.AppendString(b, "")
		b = wire.AppendU32(b, 0)
		return wire.AppendU32(b, flags)
	}
	raw("/raw-list", opts(listReverse), "14") // count, "k", "v"
	raw("/raw-list", opts(4), "-1")
	raw("/raw-list", opts(0)[:7], "-1")
	dels := make([][]string, actors.MaxBatchOps+1)
	for i := range dels {
		dels[i] = []string{"k"}
	}
	raw("/raw-batch", batchOps(uint32(len(dels)), dels...), "1")
	raw("/raw-batch", batchOps(1, []string{"", "x"}), "1")
	if _, ok := st["k"]; !ok {
		t.Fatal("a refused batch deleted k")
	}
	raw("/raw-batch", batchOps(1, []string{"n", "x"}), "0")
	if string(st["n"]) != "x" {
		t.Fatalf("raw batch put n = %q", st["n"])
	}

	body(t, g, "/events")
	malformed := batchOps(2, []string{"a", "1"})
	req := &actors.Request{Method: http.MethodPost, Path: "/raw-batch", Header: http.Header{}, Body: malformed}
	if _, err := g.Handle(context.Background(), req, st); !errors.Is(err, ErrGuest) {
		t.Fatalf("malformed batch: err = %v, want ErrGuest", err)
	}
	if _, ok := st["a"]; ok {
		t.Fatal("a malformed batch wrote a")
	}
	if got := body(t, g, "/events"); got != "1" {
		t.Fatalf("event after the malformed batch = %q, want 1 (a fresh guest)", got)
	}
}

func TestGuestGetMany(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{"a": []byte("A"), "b": []byte(""), "c": []byte("C")}
	tests := []struct {
		query string
		want  string
	}{
		{"keys=a,x,b,c", "a=A\nx absent\nb=\nc=C\n"},
		{"keys=c,c,nope", "c=C\nc=C\nnope absent\n"},
		// A key the event wrote itself, before the read.
		{"keys=a,w&put=w", "a=A\nw=written\n"},
		{"keys=", " absent\n"}, // the empty key has no value
		{"", ""},
	}
	for _, tt := range tests {
		resp := do(t, g, get("/get-many", tt.query), st)
		if resp.Status != http.StatusOK || string(resp.Body) != tt.want {
			t.Errorf("get-many ?%s = %d %q, want %q", tt.query, resp.Status, resp.Body, tt.want)
		}
	}
	// Over one host call's keys: the SDK asks once per 128.
	for i := range 250 {
		st[fmt.Sprintf("k%d", i)] = []byte("v")
	}
	if resp := do(t, g, get("/get-many", "n=300"), st); string(resp.Body) != "250 found" {
		t.Fatalf("get-many of 300 keys = %q, want 250 found", resp.Body)
	}
}

func TestGuestPutMany(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{"a": []byte("A")}
	if resp := do(t, g, post("/put-many", "", "a 1\nb 2\nc "), st); string(resp.Body) != "ok" {
		t.Fatalf("put-many = %q", resp.Body)
	}
	if string(st["a"]) != "1" || string(st["b"]) != "2" || string(st["c"]) != "" || len(st) != 3 {
		t.Fatalf("after put-many: %q", st)
	}
	// All or nothing: an empty key refuses the whole, as do too many.
	if resp := do(t, g, post("/put-many", "", "d 4\n x"), st); string(resp.Body) != "refused" {
		t.Fatalf("put-many with an empty key = %q", resp.Body)
	}
	if resp := do(t, g, post("/put-many", fmt.Sprintf("n=%d", actors.MaxBatchOps+1), ""), st); string(resp.Body) != "refused" {
		t.Fatalf("put-many of %d = %q", actors.MaxBatchOps+1, resp.Body)
	}
	if _, ok := st["d"]; ok || len(st) != 3 {
		t.Fatalf("a refused put-many wrote: %q", st)
	}
}

func TestGuestDeleteAll(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{"a": []byte("A"), "b/1": []byte("1")}
	// The event's own write goes too; a write after it stays.
	if resp := do(t, g, get("/delete-all", "put=x&after=y"), st); string(resp.Body) != "y=after\n" {
		t.Fatalf("delete-all = %q, want only y", resp.Body)
	}
	if len(st) != 1 || string(st["y"]) != "after" {
		t.Fatalf("after delete-all: %q", st)
	}
	if resp := do(t, g, get("/delete-all", ""), st); string(resp.Body) != "" || len(st) != 0 {
		t.Fatalf("delete-all = %q, storage %q", resp.Body, st)
	}
}

// keysOf encodes keys as storage_get_many_len takes them.
func keysOf(count uint32, keys ...string) []byte {
	b := wire.AppendU32(nil, count)
	for _, k := range keys {
		b = wire.AppendString(b, k)
	}
	return b
}

func TestDecodeKeys(t *testing.T) {
	keys, n, ok := decodeKeys(keysOf(3, "a", "", "a"))
	if !ok || n != 3 || !slices.Equal(keys, []string{"a", "", "a"}) {
		t.Fatalf("decodeKeys = %q, %d, %v", keys, n, ok)
	}
	if keys, n, ok := decodeKeys(keysOf(0)); !ok || n != 0 || len(keys) != 0 {
		t.Fatalf("no keys = %q, %d, %v", keys, n, ok)
	}
	// Past maxGetKeys the encoding is checked but the keys not kept.
	many := make([]string, maxGetKeys+3)
	if keys, n, ok := decodeKeys(keysOf(uint32(len(many)), many...)); !ok || n != len(many) || len(keys) != maxGetKeys {
		t.Fatalf("many keys: %d kept, n %d, ok %v", len(keys), n, ok)
	}
	good := keysOf(2, "a", "b")
	for name, b := range map[string][]byte{
		"empty":          nil,
		"short count":    {1, 0},
		"truncated":      good[:len(good)-1],
		"left over":      append(good[:len(good):len(good)], 0),
		"count too high": keysOf(3, "a", "b"),
		"count too low":  keysOf(1, "a", "b"),
		"huge count":     wire.AppendU32(nil, 1<<31),
		"past the keep":  keysOf(maxGetKeys+1, make([]string, maxGetKeys)...),
	} {
		if keys, n, ok := decodeKeys(b); ok {
			t.Errorf("%s: decodeKeys = %q, %d, true", name, keys, n)
		}
	}
}

func TestEncodeValues(t *testing.T) {
	b := encodeValues(memStorage{"a": []byte("1"), "e": nil}, []string{"a", "x", "e"})
	want := []byte{3, 0, 0, 0, 1, 1, 0, 0, 0, '1', 0, 1, 0, 0, 0, 0}
	if !bytes.Equal(b, want) || cap(b) != len(b) {
		t.Fatalf("encodeValues = %v (cap %d), want %v", b, cap(b), want)
	}
}

// TestRawGetMany hands storage_get_many_len encodings the SDK never
// makes: over 128 keys answers -1, and a malformed one breaks the ABI,
// which fails the event and discards the guest.
func TestRawGetMany(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{"k": []byte("v")}
	raw := func(b []byte) (*actors.Response, error) {
		return g.Handle(context.Background(), &actors.Request{Method: http.MethodPost, Path: "/raw-get-many", Header: http.Header{}, Body: b}, st)
	}
	for _, tt := range []struct {
		keys []byte
		want string
	}{
		{keysOf(2, "k", "x"), "11"}, // count, found "v", absent
		{keysOf(maxGetKeys, make([]string, maxGetKeys)...), fmt.Sprint(4 + maxGetKeys)},
		{keysOf(maxGetKeys+1, make([]string, maxGetKeys+1)...), "-1"},
	} {
		resp, err := raw(tt.keys)
		if err != nil || string(resp.Body) != tt.want {
			t.Fatalf("raw get-many of %d bytes = %v %v, want %q", len(tt.keys), resp, err, tt.want)
		}
	}
	body(t, g, "/events")
	if _, err := raw(keysOf(2, "k")); !errors.Is(err, ErrGuest) {
		t.Fatalf("malformed get-many: err = %v, want ErrGuest", err)
	}
	if got := body(t, g, "/events"); got != "1" {
		t.Fatalf("event after the malformed get-many = %q, want 1 (a fresh guest)", got)
	}
}

// probeHost is the probe served as class "probe" of an actorhost.Host over a
// memory bucket, in one isolation (on one shared guest in class).
type probeHost struct {
	t        *testing.T
	h        *actorhost.Host
	m        *Module
	reg      *actors.Registry
	bucket   ownership.Bucket
	maxState int    // the host's bound on an actor's state; 0: the default
	failures uint64 // the guest failures the test causes
}

func newProbeHost(t *testing.T, iso Isolation) *probeHost {
	t.Helper()
	return newBoundProbeHost(t, iso, 0)
}

// newBoundProbeHost is newProbeHost with maxState as the host's bound on
// an actor's state.
func newBoundProbeHost(t *testing.T, iso Isolation, maxState int) *probeHost {
	t.Helper()
	r := newRuntime(t, Config{Isolation: map[string]Isolation{"probe": iso}, SharedGuests: 1})
	m := mustCompile(t, r, "probe", guest(t, probeGuest))
	reg := actors.NewRegistry()
	if err := reg.Register("probe", m); err != nil {
		t.Fatal(err)
	}
	p := &probeHost{t: t, m: m, reg: reg, bucket: memstore.New(memstore.Faults{}), maxState: maxState}
	p.start()
	t.Cleanup(func() {
		_ = p.h.HibernateAll(context.Background())
		if st := m.Stats(); st.Failures != p.failures {
			t.Errorf("%d guest failures, want %d", st.Failures, p.failures)
		}
	})
	return p
}

// start starts the host, on the bucket of the one before if any.
func (p *probeHost) start() {
	p.t.Helper()
	h, err := actorhost.New(actorhost.Config{Keeper: anyKeeper{}, Bucket: p.bucket, Registry: p.reg, System: keeper.NewSystem(nil),
		MaxState: p.maxState})
	if err != nil {
		p.t.Fatal(err)
	}
	p.h = h
}

// restart hibernates every actor and starts a new host on the bucket:
// what the actors' next events see is what their commits left there.
func (p *probeHost) restart() {
	p.t.Helper()
	if err := p.h.HibernateAll(p.t.Context()); err != nil {
		p.t.Fatal(err)
	}
	p.start()
}

// deliver delivers req to the probe name and returns the response.
func (p *probeHost) deliver(name string, req *actors.Request) *actors.Response {
	p.t.Helper()
	resp, err := p.h.Deliver(p.t.Context(), ownership.Actor{Class: "probe", Name: name}, 1, req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", name, req.Path, err)
	}
	return resp
}

// expect delivers req and fails unless the answer is 200 and want.
func (p *probeHost) expect(name string, req *actors.Request, want string) {
	p.t.Helper()
	if resp := p.deliver(name, req); resp.Status != http.StatusOK || string(resp.Body) != want {
		p.t.Fatalf("%s %s ?%v = %d %q, want %q", name, req.Path, req.Query, resp.Status, resp.Body, want)
	}
}

// TestGuestStorageManyInHost runs put-many, get-many and delete-all on the
// storage of real events, in both isolations: they act for the event's
// actor alone (a's keys stay when b, on the same shared guest,
// deletes all of its own), and delete-all commits with the event.
func TestGuestStorageManyInHost(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.String(), func(t *testing.T) {
			p := newProbeHost(t, iso)
			expect := p.expect
			expect("a", post("/put-many", "", "k1 a1\nk2 a2\nk3 a3"), "ok")
			expect("b", post("/put-many", "", "k1 b1\nb-only x"), "ok")
			expect("a", get("/get-many", "keys=k1,k2,b-only,k3,k4"), "k1=a1\nk2=a2\nb-only absent\nk3=a3\nk4 absent\n")
			expect("b", get("/delete-all", "after=k9"), "k9=after\n")
			expect("b", get("/get-many", "keys=k1,b-only,k9"), "k1 absent\nb-only absent\nk9=after\n")
			expect("a", get("/list", ""), "k1=a1\nk2=a2\nk3=a3\n")
			expect("a", get("/get-many", "keys=k1,w&put=w"), "k1=a1\nw=written\n")
			expect("a", get("/delete-all", "put=x"), "")
			expect("a", get("/list", ""), "")
			expect("b", get("/list", ""), "k9=after\n")
		})
	}
}
