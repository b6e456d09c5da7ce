package wasmhost

import (
	"context"
	"testing"
)

// waitPool waits for the goroutine filling m's pool, if any, to end, and
// fails the test unless the pool is full then.
func waitPool(tb testing.TB, m *Module) {
	tb.Helper()
	m.pool.fills.Wait()
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	if m.r.cfg.Prestart > 0 && len(m.pool.ready) < m.r.cfg.Prestart {
		tb.Fatalf("pool filled with %d of %d guests", len(m.pool.ready), m.r.cfg.Prestart)
	}
}

func TestPool(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, Config{Prestart: 2})
	m := mustCompile(t, r, "probe", guest(t, probeGuest))
	if len(m.pool.ready) != 0 || m.pool.filling {
		t.Fatal("pool filled before the class was used")
	}
	// Each actor gets its own fresh guest, pooled or not.
	for i := range 4 {
		g := m.NewGuest(nil)
		defer g.Close()
		if got := body(t, g, "/events"); got != "1" {
			t.Fatalf("actor %d: first event = %q, want 1", i, got)
		}
		if i == 0 {
			waitPool(t, m)
			if n := len(m.pool.ready); n != 2 {
				t.Fatalf("pool holds %d, want 2", n)
			}
		}
	}
	waitPool(t, m)
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(m.pool.ready) != 0 {
		t.Fatal("Module.Close left guests in the pool")
	}
	// A closed module's pool makes no more.
	g := m.NewGuest(nil)
	defer g.Close()
	_, _ = g.Handle(ctx, get("/events", ""), memStorage{})
	if m.pool.filling || len(m.pool.ready) != 0 {
		t.Fatal("closed pool refilled")
	}
}

func TestNoPool(t *testing.T) {
	r := newRuntime(t, Config{Prestart: -1})
	m := mustCompile(t, r, "probe", guest(t, probeGuest))
	g := m.NewGuest(nil)
	defer g.Close()
	body(t, g, "/events")
	if m.pool.filling || len(m.pool.ready) != 0 {
		t.Fatal("pool filled with Prestart < 0")
	}
}

// TestCloseWhileFilling closes the runtime while its pool is being
// filled: Close waits for the background starts.
func TestCloseWhileFilling(t *testing.T) {
	r := newRuntime(t, Config{Prestart: 4})
	m := mustCompile(t, r, "probe", guest(t, probeGuest))
	g := m.NewGuest(nil)
	body(t, g, "/events")
	g.Close()
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m.pool.filling {
		t.Fatal("pool still filling after Close")
	}
}

// TestModuleCloseWhileFilling closes a module while its pool is being
// filled: Close waits for the start under way and closes what it made.
func TestModuleCloseWhileFilling(t *testing.T) {
	r := newRuntime(t, Config{Prestart: 4})
	m := mustCompile(t, r, "probe", guest(t, probeGuest))
	g := m.NewGuest(nil)
	body(t, g, "/events")
	g.Close()
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	if m.pool.filling || len(m.pool.ready) != 0 {
		t.Fatalf("after Close: filling %v, %d ready", m.pool.filling, len(m.pool.ready))
	}
}
