package wasmhost

import (
	"context"
	"log/slog"
	"sync"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// A pool keeps a few started guests of a Module ready
// (Config.Prestart), so that an actor's first event after a wake takes
// one instead of instantiating and initialising on its path. It cuts the
// wake's latency, not CPU: every guest is still started once, in the
// background, by one goroutine per class at a time. It starts filling at
// the class's first start, so classes never used cost nothing, and is
// emptied when the class has started no guest for a
// Config.TrimInterval (trimPool), so that idle classes cost nothing
// either; the next start fills it again.
type pool struct {
	mu       sync.Mutex
	ready    []started
	filling  bool // a goroutine is starting guests
	closed   bool
	lastTake uint64         // step of the trim clock at the last take
	fills    sync.WaitGroup // the filling goroutine, for closePool
}

// started is a guest started and not yet used.
type started struct {
	mod api.Module
	mem experimental.LinearMemory
	out *guestOut // what it writes to stdout and stderr
}

// take returns a started guest of m: a ready one if the pool has one, else
// one started now. Either way it has the pool refilled.
func (m *Module) take(ctx context.Context) (started, error) {
	p := &m.pool
	p.mu.Lock()
	p.lastTake = m.r.step.Load()
	var s started
	if n := len(p.ready); n > 0 {
		s = p.ready[n-1]
		p.ready = p.ready[:n-1]
	}
	m.refillLocked()
	p.mu.Unlock()
	if s.mod != nil {
		return s, nil
	}
	return m.start(ctx)
}

// refillLocked starts the goroutine that fills the pool, unless it runs,
// the pool is full or closed, or there is no pool. p.mu must be held.
func (m *Module) refillLocked() {
	p := &m.pool
	if m.r.cfg.Prestart <= 0 || p.filling || p.closed || len(p.ready) >= m.r.cfg.Prestart {
		return
	}
	p.fills.Add(1)
	p.filling = m.r.goBackground(func(ctx context.Context) {
		defer p.fills.Done()
		m.fill(ctx)
	})
	if !p.filling {
		p.fills.Done()
	}
}

// fill starts guests until the pool is full or closed, or a start
// fails (the next take tries again). Each start is bounded by the event
// timeout, as on an event's path, and stopped when ctx (the runtime's)
// is cancelled.
func (m *Module) fill(ctx context.Context) {
	p := &m.pool
	for {
		ictx, cancel := ctx, context.CancelFunc(func() {})
		if !m.r.cfg.NoEventTimeout {
			ictx, cancel = context.WithTimeout(ctx, m.r.cfg.EventTimeout)
		}
		st, err := m.start(ictx)
		mod, mem := st.mod, st.mem
		cancel()
		p.mu.Lock()
		if err != nil || p.closed {
			p.filling = false
			p.mu.Unlock()
			if err != nil && !m.r.isClosed() {
				m.log.Warn("guest for the pool failed to start", slog.Any("err", err))
			} else if err == nil {
				closeModule(context.Background(), mod, mem)
			}
			return
		}
		p.ready = append(p.ready, st)
		if len(p.ready) >= m.r.cfg.Prestart {
			p.filling = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// trimPool closes the ready guests if the class has started none for idle
// whole steps of the trim clock (since before step-idle), with their memory
// unmapped rather than kept for reuse.
func (m *Module) trimPool(step, idle uint64) {
	p := &m.pool
	p.mu.Lock()
	var ready []started
	if p.lastTake+idle < step {
		ready = p.ready
		p.ready = nil
	}
	p.mu.Unlock()
	for _, s := range ready {
		dropOnFree(s.mem)
		closeModule(context.Background(), s.mod, s.mem)
	}
}

// closePool closes the ready guests, after waiting for the start
// under way, if any; the pool makes no more.
func (m *Module) closePool(ctx context.Context) {
	p := &m.pool
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.fills.Wait()
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, s := range ready {
		closeModule(ctx, s.mod, s.mem)
	}
}
