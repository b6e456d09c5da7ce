package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// Class isolation (shared.go) and what it must keep of isolation actor:
// tests of both isolations run the tenant guest, which tries from one
// actor's events to reach another's storage and sockets.

const tenantGuest = "./testdata/tenant"

var isolations = []Isolation{IsolationActor, IsolationClass}

// tenants is the tenant class served by an actorhost.Host in one isolation,
// on one shared guest (unless cfg says otherwise) in isolation class.
type tenants struct {
	t *testing.T
	h *actorhost.Host
	m *Module
}

func newTenants(t *testing.T, iso Isolation, cfg Config) *tenants {
	t.Helper()
	return newTenantsIdle(t, iso, cfg, 0)
}

// newTenantsIdle is newTenants whose actors hibernate once idle for idle
// (0: the default).
func newTenantsIdle(t *testing.T, iso Isolation, cfg Config, idle time.Duration) *tenants {
	t.Helper()
	cfg.Isolation = map[string]Isolation{"": iso}
	if cfg.SharedGuests == 0 {
		cfg.SharedGuests = 1
	}
	m := mustCompile(t, newRuntime(t, cfg), "tenant", guest(t, tenantGuest))
	if st := m.Stats(); st.Isolation != iso || st.Declared != IsolationClass {
		t.Fatalf("tenant compiled in isolation %v, declared %v; want %v, declared class", st.Isolation, st.Declared, iso)
	}
	reg := actors.NewRegistry()
	if err := reg.Register("tenant", m); err != nil {
		t.Fatal(err)
	}
	h, err := actorhost.New(actorhost.Config{Keeper: anyKeeper{}, Bucket: memstore.New(memstore.Faults{}), Registry: reg,
		System: keeper.NewSystem(nil), IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the actors leave before the runtime closes.
	t.Cleanup(func() { _ = h.HibernateAll(context.Background()) })
	return &tenants{t: t, h: h, m: m}
}

// call delivers GET path?rawQuery to the tenant name and returns the
// status and body.
func (ts *tenants) call(name, path, rawQuery string) (int, string) {
	ts.t.Helper()
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		ts.t.Fatal(err)
	}
	resp, err := ts.h.Deliver(context.Background(), ownership.Actor{Class: "tenant", Name: name}, 1,
		&actors.Request{Method: http.MethodGet, Path: path, Query: q, Header: http.Header{}})
	if err != nil {
		ts.t.Fatalf("%s %s?%s: %v", name, path, rawQuery, err)
	}
	return resp.Status, string(resp.Body)
}

// expect calls and fails unless the answer is 200 and body.
func (ts *tenants) expect(name, path, rawQuery, body string) {
	ts.t.Helper()
	if status, got := ts.call(name, path, rawQuery); status != http.StatusOK || got != body {
		ts.t.Fatalf("%s %s?%s = %d %q, want 200 %q", name, path, rawQuery, status, got, body)
	}
}

// awaitGone waits for every actor to have left memory: hibernated, once
// idle.
func (ts *tenants) awaitGone() {
	ts.t.Helper()
	// The actors hibernate on their idle timers (real ones: the guest runs
	// compiled code on real goroutines), and each one's object leaves the
	// guest after that, on whichever goroutine holds the guest then: no
	// event marks the last, so the counts are read until they are zero.
	deadline := time.Now().Add(nodetest.Wait)
	for ts.h.Resident() > 0 || ts.m.Stats().Placed > 0 {
		if time.Now().After(deadline) {
			ts.t.Fatalf("%d actors still resident, %d placed", ts.h.Resident(), ts.m.Stats().Placed)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// id is what /id says of an actor: its events on its guest's object, the
// guest, and the objects that guest holds.
type id struct {
	who                    string
	events, actors, served int
	guest                  string
}

func (ts *tenants) id(name string) id {
	ts.t.Helper()
	status, body := ts.call(name, "/id", "")
	var got id
	if _, err := fmt.Sscanf(body, "%s events=%d guest=%s guest-events=%d actors=%d", &got.who, &got.events, &got.guest, &got.served, &got.actors); err != nil || status != http.StatusOK {
		ts.t.Fatalf("%s /id = %d %q (%v)", name, status, body, err)
	}
	if got.who != "tenant/"+name {
		ts.t.Fatalf("%s /id: the guest sees actor %q", name, got.who)
	}
	return got
}

// TestStorageIsolated: in both isolations, an actor reads, lists, writes
// and deletes only its own storage, even when its guest knows the keys
// another actor wrote on their shared guest and tries them.
func TestStorageIsolated(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.String(), func(t *testing.T) {
			ts := newTenants(t, iso, Config{})
			ts.expect("a", "/put", "k=secret&v=a-secret", "put")
			ts.expect("a", "/put", "k=secret/other&v=a-other", "put")
			a, b := ts.id("a"), ts.id("b")
			if shared := a.guest == b.guest; shared != (iso == IsolationClass) || (iso == IsolationClass && b.actors != 2) {
				t.Fatalf("a on %s, b on %s holding %d objects: shared %v in isolation %v", a.guest, b.guest, b.actors, shared, iso)
			}
			// b names a's keys; in class isolation its guest knows them too.
			ts.expect("b", "/steal", "keys=secret,secret/other", "")
			ts.expect("c", "/steal", "", "")
			ts.expect("a", "/get", "k=secret", "a-secret")
			ts.expect("a", "/get", "k=secret/other", "a-other")
			ts.expect("b", "/get", "k=secret", "overwritten by b")
			if iso == IsolationClass {
				// c's guest found a's keys in shared memory: it tried them,
				// and wrote only its own storage.
				ts.expect("c", "/get", "k=secret", "overwritten by c")
			} else if status, _ := ts.call("c", "/get", "k=secret"); status != http.StatusNotFound {
				t.Fatalf("c's own guest knew a's keys: %d", status)
			}
			ts.expect("a", "/steal", "", "got secret=a-secret\ngot secret/other=a-other\nlisted secret=a-secret\nlisted secret/other=a-other")
		})
	}
}

// socketClient is a WebSocket to a tenant, speaking its commands.
type socketClient struct {
	t    *testing.T
	conn *websocket.Conn
}

func (c socketClient) send(cmd string) {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(cmd)); err != nil {
		c.t.Fatal(err)
	}
}

func (c socketClient) read() string {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(nodetest.Wait))
	_, b, err := c.conn.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return string(b)
}

func (c socketClient) ask(cmd string) string {
	c.t.Helper()
	c.send(cmd)
	return c.read()
}

// TestSocketsIsolated: in both isolations, an actor's events cannot send
// to, close, broadcast to, list, or read or set the attachment of another
// actor's socket, even when its guest knows the socket's id from their
// shared guest; the victim's socket sees nothing of it.
func TestSocketsIsolated(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.String(), func(t *testing.T) {
			r := newRuntime(t, Config{Isolation: map[string]Isolation{"tenant": iso}, SharedGuests: 1})
			m := mustCompile(t, r, "tenant", guest(t, tenantGuest))
			n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"tenant": m}})
			a := socketClient{t, n.Dial(t, "tenant", "a")}
			aid := a.ask("id")
			if got := a.ask("att mine"); got != "att=mine" {
				t.Fatalf("a's attachment: %q", got)
			}
			b := socketClient{t, n.Dial(t, "tenant", "b")}
			bid := b.ask("id")
			want := func(cmd string, ids int) {
				t.Helper()
				b.send(cmd)
				if got := b.read(); got != "broadcast from b" {
					t.Fatalf("%s: b's first frame %q, want its own broadcast", cmd, got)
				}
				if got, want := b.read(), fmt.Sprintf("stole %d: listed %s", ids, bid); got != want {
					t.Fatalf("%s: %q, want %q", cmd, got, want)
				}
			}
			want("steal "+aid, 1)
			if iso == IsolationClass {
				want("steal a", 1) // the id from shared memory
			} else {
				want("steal a", 0) // b's own guest never met a
			}
			// a's socket is open, heard nothing, and keeps its attachment.
			if got := a.ask("getatt"); got != "att=mine" {
				t.Fatalf("a after the thefts: %q, want its attachment", got)
			}
			if got := a.ask("echo still here"); got != "still here" {
				t.Fatalf("a's echo: %q", got)
			}
			if st := m.Stats(); st.Failures != 0 {
				t.Fatalf("%d guest failures", st.Failures)
			}
		})
	}
}

// TestTrap: a trap in one actor's event fails that event and is counted;
// in isolation class it discards the shared guest with every actor's object
// (counted), and the other actors' next events are served on a fresh one,
// their state loaded from storage; in isolation actor the others' guests
// are untouched.
func TestTrap(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.String(), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			ts := newTenants(t, iso, Config{Registerer: reg})
			names := []string{"a", "b", "c"}
			for _, name := range names {
				ts.expect(name, "/put", "k=n&v="+name, "put")
			}
			before := ts.id("b")
			if status, _ := ts.call("a", "/panic", ""); status != http.StatusInternalServerError {
				t.Fatalf("a's panic: %d, want 500", status)
			}
			st := ts.m.Stats()
			dropped := map[Isolation]uint64{IsolationActor: 0, IsolationClass: 3}[iso]
			if st.Failures != 1 || st.Dropped != dropped {
				t.Fatalf("stats %+v, want 1 failure and %d objects dropped", st, dropped)
			}
			want := map[string]float64{"wasmkeep_wasm_guest_failures_total": 1}
			if iso == IsolationClass {
				want["wasmkeep_wasm_shared_actors_dropped_total"] = 3
			}
			if got := gathered(t, reg, "tenant"); !maps.Equal(got, want) {
				t.Fatalf("metrics %v, want %v", got, want)
			}
			after := ts.id("b")
			switch iso {
			case IsolationClass:
				if after.guest == before.guest || after.events != 1 || after.actors != 1 {
					t.Fatalf("b after the trap: %+v (before %+v); want a fresh guest and a new object", after, before)
				}
			case IsolationActor:
				if after.guest != before.guest || after.events != before.events+1 {
					t.Fatalf("b after a's trap: %+v (before %+v); want its own guest untouched", after, before)
				}
			}
			for _, name := range names {
				ts.expect(name, "/get", "k=n", name)
			}
			if st := ts.m.Stats(); st.Failures != 1 {
				t.Fatalf("%d failures after the others' events, want 1", st.Failures)
			}
		})
	}
}

// gathered returns the counters of reg with the label class=class, by
// name.
func gathered(t *testing.T, reg *prometheus.Registry, class string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "class" && l.GetValue() == class && m.GetCounter() != nil {
					out[f.GetName()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// sharedMemory returns the size of the linear memory of the first shared
// guest of m, waiting for its token.
func sharedMemory(t *testing.T, m *Module) uint32 {
	t.Helper()
	s := m.shared.slots[0]
	s.sem <- struct{}{}
	defer s.unlock()
	if s.w == nil {
		t.Fatal("no shared guest")
	}
	return s.w.mod.Memory().Size()
}

// TestLeave: actors that hibernate are dropped from their shared guest,
// which sees it (its leave handler runs, its objects go), and the guest's
// memory does not grow with actors that came and went.
func TestLeave(t *testing.T) {
	ts := newTenantsIdle(t, IsolationClass, Config{}, 20*time.Millisecond)
	const perRound = 200
	round := func(r int) {
		t.Helper()
		for i := range perRound {
			if got := ts.id(fmt.Sprintf("r%d-%d", r, i)); got.events != 1 {
				t.Fatalf("a new actor's object counts %d events", got.events)
			}
		}
		ts.awaitGone()
	}
	round(0)
	status, body := ts.call("after", "/leaves", "")
	left := strings.Split(strings.TrimPrefix(body, fmt.Sprintf("leaves=%d actors=1 left=", perRound)), ",")
	if status != http.StatusOK || len(left) != perRound || !slices.Contains(left, "r0-0") || !slices.Contains(left, fmt.Sprintf("r0-%d", perRound-1)) {
		t.Fatalf("/leaves after a round = %d %.100q; want the %d actors left and only its own object", status, body, perRound)
	}
	ts.awaitGone()
	// What the guest's heap holds once collected, and its linear memory:
	// neither grows with the actors that came and went, once warm.
	live := func(r int) (int, uint32) {
		t.Helper()
		var n, actors int
		status, body := ts.call(fmt.Sprint("gc", r), "/gc", "")
		if _, err := fmt.Sscanf(body, "live=%d actors=%d", &n, &actors); err != nil || status != http.StatusOK || actors != 1 {
			t.Fatalf("/gc = %d %q (%v)", status, body, err)
		}
		ts.awaitGone()
		return n, sharedMemory(t, ts.m)
	}
	for r := 1; r < 4; r++ {
		round(r)
		live(r)
	}
	heap0, mem0 := live(4)
	for r := 5; r < 15; r++ {
		round(r)
		live(r)
	}
	heap1, mem1 := live(15)
	if mem1 > mem0 || heap1 > heap0+16<<10 {
		t.Fatalf("after %d more actors came and went, the guest's heap holds %d bytes (was %d) and its memory is %d bytes (was %d)", 10*perRound, heap1, heap0, mem1, mem0)
	}
	status, body = ts.call("last", "/leaves", "")
	// 14 rounds, "after", and the 15 actors that asked /gc.
	if want := fmt.Sprintf("leaves=%d actors=1 ", 14*perRound+1+15); status != http.StatusOK || !strings.HasPrefix(body, want) {
		t.Fatalf("/leaves = %d %.60q, want it to start %q", status, body, want)
	}
	if st := ts.m.Stats(); st.Failures != 0 || st.Shared != 1 {
		t.Fatalf("stats %+v, want no failure and one shared guest", st)
	}
}

// TestLeaveActsForNoActor: a guest that uses storage while told an actor
// left breaks the ABI: the shared guest is discarded, counted.
func TestLeaveActsForNoActor(t *testing.T) {
	ts := newTenantsIdle(t, IsolationClass, Config{}, 20*time.Millisecond)
	ts.expect("a", "/leave-storage", "", "armed")
	before := ts.id("b")
	ts.awaitGone()
	// The leave runs after its actor's Close, on whichever goroutine holds
	// the guest's token then (slot.unlock), so it may end after the last
	// actor is gone: its failure is waited for, not read at once.
	deadline := time.Now().Add(nodetest.Wait)
	for ts.m.Stats().Failures == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := ts.m.Stats(); st.Failures != 1 {
		t.Fatalf("stats %+v, want the leave's storage call counted as a failure", st)
	}
	if after := ts.id("b"); after.guest == before.guest || after.events != 1 {
		t.Fatalf("b after the failed leave: %+v, want a fresh guest", after)
	}
}

// TestOtherABIVersionRefused: a module that speaks another ABI version is
// refused when it compiles, with an error naming both versions.
func TestOtherABIVersionRefused(t *testing.T) {
	r := newRuntime(t, Config{})
	for _, v := range []byte{1, 3} {
		mod := wasmModule(
			wasmSection(1, []byte{1, 0x60, 0, 1, 0x7f}), // type 0: () -> i32
			wasmSection(3, []byte{1, 0}),                // function 0 of type 0
			wasmSection(7, append([]byte{1, 20}, "wasmkeep_abi_version\x00\x00"...)),
			wasmSection(10, []byte{1, 4, 0, 0x41, v, 0x0b}), // its body: i32.const v
		)
		_, err := r.Compile(t.Context(), "old", mod)
		want := fmt.Sprintf("compile class \"old\": start a guest: the module speaks guest ABI version %d, and this host serves version %d", v, ABIVersion)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("compile a version %d module: %v; want %q", v, err, want)
		}
	}
	if ABIVersion != 2 {
		t.Fatalf("ABIVersion = %d", ABIVersion)
	}
}

// TestSharedLimits: the event timeout and the memory limit hold per event
// on a shared guest: the spinning (or growing) actor's event is
// stopped and fails, counted, and the actor that waited meanwhile for the
// guest is served, its wait not taken from its own time.
func TestSharedLimits(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts := newTenants(t, IsolationClass, Config{EventTimeout: timeout, MemoryLimit: 64 << 20})
	ts.expect("b", "/put", "k=n&v=b", "put")
	for i, path := range []string{"/loop", "/grow"} {
		t.Run(path, func(t *testing.T) {
			spun := make(chan int, 1)
			start := time.Now()
			go func() {
				status, _ := ts.call("a", path, "")
				spun <- status
			}()
			// Once a's event holds the guest, b's waits for it. Nothing
			// signals the hold, so it is read until it is there.
			s := ts.m.shared.slots[0]
			for !s.heldBy([]ownership.Actor{{Class: "tenant", Name: "a"}}) {
				if time.Since(start) > nodetest.Wait {
					t.Fatal("a's event never held the shared guest")
				}
				time.Sleep(time.Millisecond)
			}
			got := ts.id("b")
			waited := time.Since(start)
			if status := <-spun; status != http.StatusInternalServerError {
				t.Fatalf("a %s: %d, want 500", path, status)
			}
			if got.events != 1 {
				t.Fatalf("b after a's %s: %+v, want a fresh object", path, got)
			}
			if path == "/loop" && waited < timeout {
				t.Fatalf("b was served after %v, before a's timeout of %v", waited, timeout)
			}
			if st := ts.m.Stats(); st.Failures != uint64(i+1) {
				t.Fatalf("stats %+v, want %d failures", st, i+1)
			}
			ts.expect("b", "/get", "k=n", "b")
		})
	}
}

// TestSharedTimeoutError: a Resident of isolation class reports the event
// timeout as a Guest does.
func TestSharedTimeoutError(t *testing.T) {
	m := mustCompile(t, newRuntime(t, Config{EventTimeout: 100 * time.Millisecond, SharedGuests: 1}), "tenant", guest(t, tenantGuest))
	a := m.NewResident(ownership.Actor{Class: "tenant", Name: "a"})
	defer a.Close()
	if _, err := a.Handle(t.Context(), get("/loop", ""), memStorage{}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("endless loop: %v, want ErrTimeout", err)
	}
	if resp, err := a.Handle(t.Context(), get("/id", ""), memStorage{}); err != nil || !strings.Contains(string(resp.Body), "events=1 ") {
		t.Fatalf("after the timeout: %v, %v", resp, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	b := m.NewResident(ownership.Actor{Class: "tenant", Name: "b"})
	defer b.Close()
	s := m.shared.slots[0]
	s.sem <- struct{}{} // held, as by another event
	_, err := b.Handle(ctx, get("/id", ""), memStorage{})
	s.unlock()
	if !errors.Is(err, ErrWait) {
		t.Fatalf("a caller gone while waiting: %v, want ErrWait", err)
	}
}

// TestPlacementStable: actors spread over the shared guests, each
// staying on its own while it is resident.
func TestPlacementStable(t *testing.T) {
	ts := newTenants(t, IsolationClass, Config{SharedGuests: 2})
	on := map[string]string{}
	count := map[string]int{}
	for round := 1; round <= 3; round++ {
		for i := range 20 {
			name := "p" + strconv.Itoa(i)
			got := ts.id(name)
			if round == 1 {
				on[name] = got.guest
				count[got.guest]++
			} else if got.guest != on[name] {
				t.Fatalf("%s moved from %s to %s", name, on[name], got.guest)
			}
			if got.events != round {
				t.Fatalf("%s round %d: its object counts %d events", name, round, got.events)
			}
		}
	}
	if len(count) != 2 || count[on["p0"]] != 10 {
		t.Fatalf("placement %v, want 10 actors on each of 2", count)
	}
}

// TestCallChainMoves: an actor called (through a call chain) by an event
// that holds its shared guest moves to another, started past the
// pool's size if none is free, rather than wait for it forever; the guest
// it left is told.
func TestCallChainMoves(t *testing.T) {
	r := newRuntime(t, Config{SharedGuests: 1})
	m := mustCompile(t, r, "tenant", guest(t, tenantGuest))
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"tenant": m}})
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(n.URL + "/actor/tenant/" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	first := get("b/id")
	for i := 1; i <= 2; i++ {
		got := get("a/call?class=tenant&name=b&path=/id")
		if !strings.HasPrefix(got, fmt.Sprintf("200 tenant/b events=%d ", i)) || strings.Contains(got, first[strings.Index(first, "guest="):strings.Index(first, " guest-events")]) {
			t.Fatalf("a's call %d to b: %q (b first %q); want b's new object, on another guest", i, got, first)
		}
	}
	if st := m.Stats(); st.Shared != 2 || st.Placed != 2 {
		t.Fatalf("stats %+v, want 2 shared guests, 2 actors placed", st)
	}
	if got := get("c/leaves"); !strings.Contains(got, "left=b") {
		t.Fatalf("the first guest was not told b left: %q", got)
	}
}

// TestSharedConcurrent: many actors' events at once on a few shared guests,
// each actor's in order (run with -race).
func TestSharedConcurrent(t *testing.T) {
	ts := newTenants(t, IsolationClass, Config{SharedGuests: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			name := "c" + strconv.Itoa(g)
			for i := 1; i <= 20; i++ {
				q := url.Values{"k": {"n"}, "v": {strconv.Itoa(i)}}
				resp, err := ts.h.Deliver(context.Background(), ownership.Actor{Class: "tenant", Name: name}, 1,
					&actors.Request{Method: http.MethodGet, Path: "/put", Query: q, Header: http.Header{}})
				if err != nil || resp.Status != http.StatusOK {
					errs <- fmt.Errorf("%s put %d: %v %v", name, i, resp, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for g := range 16 {
		ts.expect("c"+strconv.Itoa(g), "/get", "k=n", "20")
	}
	if st := ts.m.Stats(); st.Failures != 0 || st.Placed != 16 || st.Shared != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSharedTrim: a shared guest on which no actor has been placed
// for a TrimInterval is closed, and the next actor placed there starts a
// fresh one; one that serves actors is kept.
func TestSharedTrim(t *testing.T) {
	ts := newTenantsIdle(t, IsolationClass, Config{SharedGuests: 2, TrimInterval: -1}, 300*time.Millisecond)
	r := ts.m.r
	a, b := ts.id("a"), ts.id("b")
	if a.guest == b.guest || ts.m.Stats().Shared != 2 {
		t.Fatalf("a on %s, b on %s, stats %+v; want two shared guests", a.guest, b.guest, ts.m.Stats())
	}
	ts.awaitGone()
	ts.id("c") // keeps one of them in use
	for range trimSteps + 1 {
		r.trim()
	}
	if st := ts.m.Stats(); st.Shared != 1 || st.Placed != 1 {
		t.Fatalf("after a TrimInterval: %+v; want only c's shared guest kept", st)
	}
	if got := ts.id("c"); got.events != 2 {
		t.Fatalf("c after the trim: %+v, want its object kept", got)
	}
	if got := ts.id("d"); got.events != 1 || got.served != 1 || ts.m.Stats().Shared != 2 {
		t.Fatalf("d after the trim: %+v (stats %+v); want a fresh shared guest", got, ts.m.Stats())
	}
}
