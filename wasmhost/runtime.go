package wasmhost

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// ABIVersion is the version of the guest ABI this host serves
// (wasmhost/ABI.md).
const ABIVersion = wire.Version

// Defaults for Config.
const (
	// DefaultMemoryLimit bounds a guest's linear memory.
	DefaultMemoryLimit = 256 << 20
	// DefaultEventTimeout bounds one event of a guest.
	DefaultEventTimeout = 5 * time.Second
	// DefaultPrestart is how many started guests a class keeps ready.
	DefaultPrestart = 2
	// DefaultTrimInterval is how long memory kept for reuse may go unused
	// before it is returned to the system.
	DefaultTrimInterval = 3 * time.Second
)

// trimSteps is how many steps of the trim clock a Config.TrimInterval
// spans: memory kept for reuse goes back to the system between one and
// 1+1/trimSteps TrimIntervals after it was last used.
const trimSteps = 4

// pageSize is the size of a WebAssembly memory page.
const pageSize = 64 << 10

// Config configures a Runtime. The zero value is valid: no compilation
// cache on disk, the default limits, the timeout on, and the default pool
// of started guests.
type Config struct {
	// CacheDir, if set, is a directory where compiled modules are kept
	// across processes, so that compiling the same module again is cheap.
	// It is created if missing. Several processes may share it.
	CacheDir string
	// MemoryLimit bounds the linear memory of every guest, in bytes; it is
	// rounded down to whole 64 KiB pages. Zero means DefaultMemoryLimit. A
	// guest that grows past it fails its event (and its guest is
	// discarded); a module that needs more to start fails to instantiate.
	MemoryLimit int64
	// EventTimeout bounds the guest time of one event: a guest still
	// running when it passes is stopped, its event fails with an error
	// wrapping ErrTimeout, and its guest is discarded. Zero means
	// DefaultEventTimeout. The limit costs a context and a map entry per
	// event, and a few instructions per guest loop ("The time limit" in the
	// package doc).
	EventTimeout time.Duration
	// NoEventTimeout turns the time limit off: a guest in an endless loop
	// then holds its actor forever. Only for trusted guests.
	NoEventTimeout bool
	// Prestart is how many started guests each class keeps ready
	// (instantiated and initialised in the background, from the class's
	// first start on), so that a wake does not wait for one: it cuts the
	// latency of an actor's first event (about 5×), not CPU, and holds the
	// memory of that many idle guests per class (for a Go guest,
	// about 0.4 MB each of its own; see pool.go) until the class has
	// started none for TrimInterval. Zero means DefaultPrestart; a negative
	// value keeps none.
	Prestart int
	// TrimInterval is how long memory kept for reuse may go unused before
	// it is returned to the system: a closed guest's memory kept for the
	// next guest (see memory.go), and the started guests of a class's pool
	// (Prestart) when the class has started none for that long. A node
	// busier than that keeps its fast starts; an idle one gives the memory
	// back within 1.25 TrimIntervals, and the first start after that runs
	// on fresh memory (about twice the CPU) and, for a class whose pool was
	// emptied, on the event's path. Zero means DefaultTrimInterval; a
	// negative value keeps the memory until Close. A positive value must be
	// at least a millisecond.
	TrimInterval time.Duration
	// Isolation overrides, by class name, the isolation a module
	// declares (its export wasmkeep_isolation; IsolationActor if it
	// declares none); the key "" applies to every class not named. Nil:
	// each class as its module declares.
	Isolation map[string]Isolation
	// SharedGuests is how many guests serve the resident actors of a class
	// in class isolation on this node, each many actors (one more is
	// started for an event whose every shared guest is held by an event
	// waiting, through actor calls, for it). Zero means GOMAXPROCS, as many
	// as the events that can run at once.
	SharedGuests int
	// Registerer takes the runtime's metrics (metrics.go). Nil: they are
	// kept (Module.Stats) but not exported.
	Registerer prometheus.Registerer
	// Logger receives guest logs and guest lifecycle messages. Nil
	// means slog.Default().
	Logger *slog.Logger
}

// Isolation is how the resident actors of a class share guests (see the
// package doc).
type Isolation int

// Isolations, as a module declares them (ABI.md, wasmkeep_isolation).
const (
	// IsolationActor: a guest of its own for each resident actor.
	IsolationActor Isolation = wire.IsolationActor
	// IsolationClass: a few guests per class (Config.SharedGuests), each
	// serving many resident actors.
	IsolationClass Isolation = wire.IsolationClass
)

func (i Isolation) String() string {
	switch i {
	case IsolationActor:
		return "actor"
	case IsolationClass:
		return "class"
	}
	return fmt.Sprintf("Isolation(%d)", int(i))
}

// ParseIsolation parses "actor" or "class".
func ParseIsolation(s string) (Isolation, error) {
	switch s {
	case "actor":
		return IsolationActor, nil
	case "class":
		return IsolationClass, nil
	}
	return 0, fmt.Errorf("isolation %q: want actor or class", s)
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	switch {
	case c.MemoryLimit < 0:
		return fmt.Errorf("wasmhost config: negative memory limit %d", c.MemoryLimit)
	case c.MemoryLimit != 0 && c.MemoryLimit < pageSize:
		return fmt.Errorf("wasmhost config: memory limit %d is under one 64 KiB page", c.MemoryLimit)
	case c.MemoryLimit > 4<<30:
		return fmt.Errorf("wasmhost config: memory limit %d is over 4 GiB", c.MemoryLimit)
	case c.EventTimeout < 0:
		return fmt.Errorf("wasmhost config: negative event timeout %v", c.EventTimeout)
	case c.TrimInterval > 0 && c.TrimInterval < time.Millisecond:
		return fmt.Errorf("wasmhost config: trim interval %v is under a millisecond", c.TrimInterval)
	case c.SharedGuests < 0:
		return fmt.Errorf("wasmhost config: negative shared guests %d", c.SharedGuests)
	}
	for class, iso := range c.Isolation {
		if iso != IsolationActor && iso != IsolationClass {
			return fmt.Errorf("wasmhost config: isolation of class %q: %v is neither actor nor class", class, iso)
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MemoryLimit == 0 {
		c.MemoryLimit = DefaultMemoryLimit
	}
	if c.EventTimeout == 0 {
		c.EventTimeout = DefaultEventTimeout
	}
	if c.Prestart == 0 {
		c.Prestart = DefaultPrestart
	}
	if c.TrimInterval == 0 {
		c.TrimInterval = DefaultTrimInterval
	}
	if c.SharedGuests == 0 {
		c.SharedGuests = runtime.GOMAXPROCS(0)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Runtime compiles and runs wasm actor classes. It is safe for concurrent
// use.
type Runtime struct {
	cfg   Config
	rt    wazero.Runtime
	cache wazero.CompilationCache // nil without CacheDir

	// alloc makes the linear memories of guests (memory.go); nil
	// leaves it to wazero (Go slices). images turns on data images
	// (memory.go), with alloc; merge turns on mergeDataSegments for the
	// modules without one; warm turns on populating the pages a module's
	// guests touch as they start (warmth). All are set by NewRuntime; the
	// benchmarks turn them off to compare.
	alloc  allocator
	images bool
	merge  bool
	warm   bool

	// Background work (pool fills, the trim clock) runs under bg,
	// cancelled by Close, which waits for it: closing a wazero runtime
	// closes the guests a goroutine may still be starting.
	bg       context.Context
	cancelBg context.CancelFunc
	mu       sync.Mutex     // guards closed, work.Add, imgs and mods
	closed   bool           // Close was called
	work     sync.WaitGroup // background goroutines
	imgs     []*image       // of the modules compiled, closed by Close
	mods     []*Module      // compiled and not closed, for trim

	// serving is closed by Serving: background compiles wait for it.
	serving     chan struct{}
	servingOnce sync.Once

	// step is the trim clock: how many trim steps have run.
	step atomic.Uint64

	// watch stops the guests that run past their event timeout (watch.go).
	watch watch

	// ids numbers the residencies of actors, for the ids their events
	// carry (actorRef).
	ids atomic.Uint64

	metrics *metrics
}

// goBackground runs f in a goroutine with a context cancelled by Close,
// which waits for it; it reports false if the runtime is closed.
func (r *Runtime) goBackground(f func(ctx context.Context)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.work.Add(1)
	go func() {
		defer r.work.Done()
		f(r.bg)
	}()
	return true
}

// isClosed reports whether Close was called.
func (r *Runtime) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// NewRuntime returns a Runtime for cfg, with the host modules guests
// import (the wasmkeep ABI and WASI preview 1) instantiated. Close it when
// done.
func NewRuntime(ctx context.Context, cfg Config) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// No WithCloseOnContextDone: guests are metered (Compile, meter.go).
	rc := wazero.NewRuntimeConfigCompiler().
		WithMemoryLimitPages(uint32(cfg.MemoryLimit / pageSize))
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, alloc: newAllocator(), images: true, merge: true, warm: true, metrics: met, serving: make(chan struct{})}
	r.bg, r.cancelBg = context.WithCancel(context.Background())
	if cfg.CacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasmhost compilation cache %s: %w", cfg.CacheDir, err)
		}
		r.cache = cache
		rc = rc.WithCompilationCache(cache)
	}
	r.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	// WASI is what the Go runtime of a wasip1 guest needs (clocks, random,
	// fd_write for its crash messages, proc_exit). The module config of
	// each guest grants no files, no arguments and no environment.
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r.rt); err != nil {
		_ = r.Close(ctx)
		return nil, fmt.Errorf("wasmhost: instantiate wasi: %w", err)
	}
	if err := instantiateABI(ctx, r.rt); err != nil {
		_ = r.Close(ctx)
		return nil, fmt.Errorf("wasmhost: instantiate abi: %w", err)
	}
	if !cfg.NoEventTimeout {
		r.goBackground(func(ctx context.Context) { every(ctx, watchPeriod(cfg.EventTimeout), r.watch.check) })
	}
	if cfg.TrimInterval > 0 && (r.alloc != nil || cfg.Prestart > 0) {
		r.goBackground(func(ctx context.Context) { every(ctx, cfg.TrimInterval/trimSteps, func(time.Time) { r.trim() }) })
	}
	return r, nil
}

// every calls f with the time of each tick, every period, until ctx is
// done.
func every(ctx context.Context, period time.Duration, f func(now time.Time)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}

// trim is a step of the trim clock: it returns to the system the memory
// kept for reuse that has gone unused for trimSteps whole steps, that is
// a Config.TrimInterval: the pools of the classes that started no
// guest in that time, and the mappings that no guest took
// (memory.go). The step runs every TrimInterval/trimSteps; tests call it
// directly.
func (r *Runtime) trim() {
	step := r.step.Add(1)
	r.mu.Lock()
	mods := slices.Clone(r.mods)
	r.mu.Unlock()
	for _, m := range mods {
		m.trimPool(step, trimSteps)
		m.shared.trim(step, trimSteps)
	}
	if r.alloc != nil {
		r.alloc.trim(step, trimSteps)
	}
}

// Close releases the runtime, every module compiled by it and every
// guest of them. Its Residents must not be used after it.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	imgs := r.imgs
	r.imgs = nil
	r.mu.Unlock()
	r.cancelBg()
	r.work.Wait()
	err := r.rt.Close(ctx)
	if r.alloc != nil {
		r.alloc.Close()
	}
	for _, img := range imgs {
		img.Close()
	}
	if r.cache != nil {
		err = errors.Join(err, r.cache.Close(ctx))
	}
	return err
}

// Module is one compiled wasm actor class. It is safe for concurrent use.
type Module struct {
	r         *Runtime
	class     string
	outLimit  outLimit // spaces the log lines of its guests' output
	compiled  wazero.CompiledModule
	onRequest bool      // exports wasmkeep_on_request
	onSocket  bool      // exports wasmkeep_on_socket
	onLeave   bool      // exports wasmkeep_on_leave
	onAlarm   bool      // exports wasmkeep_on_alarm
	isolation Isolation // as declared, or as Config.Isolation overrides it
	declared  Isolation // as the module declares it
	minor     uint32    // of the ABI, as the module declares it: its encodings
	img       *image    // the data segments, not in compiled; nil if in it
	dataEnd   uint64    // end of the data segments in memory, 0 if unknown
	pool      pool
	shared    *classPool // the shared guests, in class isolation
	log       *slog.Logger
	stats     moduleStats

	// warmth is the pages a guest touches as it starts, once learned from a
	// guest started on a fresh mapping (memory.go).
	warmth atomic.Pointer[warmth]
}

// Guest exports.
const (
	exportABIVersion = "wasmkeep_abi_version"
	exportIsolation  = "wasmkeep_isolation"
	exportOnRequest  = "wasmkeep_on_request"
	exportOnSocket   = "wasmkeep_on_socket"
	exportOnLeave    = "wasmkeep_on_leave"
	exportOnAlarm    = "wasmkeep_on_alarm"
	exportABIMinor   = "wasmkeep_abi_minor"
)

// Compile compiles wasm as the module of the class named class (its name
// in logs and metrics, and the class its events name to the guest). It
// starts one guest of it to learn what it declares, and fails for a module
// that is not valid wasm, that imports what the host does not offer, that
// speaks another ABI version than ABIVersion, whose guest fails to start,
// or that exports neither wasmkeep_on_request nor wasmkeep_on_socket (it
// would serve nothing); a module that lacks one of them compiles, and the
// events it lacks are answered 501 or dropped. A module whose initial
// memory is over Config.MemoryLimit fails to compile.
func (r *Runtime) Compile(ctx context.Context, class string, wasm []byte) (*Module, error) {
	source := wasm
	wasm, err := instrument(wasm)
	if err != nil {
		return nil, fmt.Errorf("compile class %q: %w", class, err)
	}
	// The data segments go into an image if they can (all below the
	// memory's initial size, so that instantiation cannot fail on them),
	// else are merged.
	d, ok := parseModuleData(wasm)
	var img *image
	if ok && r.alloc != nil && r.images && d.end() <= d.memMin {
		if i, err := newImage(d.segs, d.end()); err == nil {
			img, wasm = i, d.withoutData(wasm)
		}
	}
	if img == nil && r.merge {
		wasm = mergeDataSegments(wasm)
	}
	cm, err := r.rt.CompileModule(ctx, wasm)
	if err != nil {
		if img != nil {
			img.Close()
		}
		return nil, fmt.Errorf("compile class %q: %w", class, err)
	}
	m := &Module{r: r, class: class, compiled: cm, img: img, dataEnd: d.end(), isolation: IsolationActor,
		log: r.cfg.Logger.With(slog.String("class", class))}
	m.shared = newClassPool(m)
	r.mu.Lock()
	if img != nil {
		r.imgs = append(r.imgs, img)
	}
	r.mods = append(r.mods, m)
	r.mu.Unlock()
	if err := m.check(ctx); err != nil {
		_ = m.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("compile class %q: %w", class, err)
	}
	m.declared = m.isolation
	if iso, ok := r.cfg.Isolation[class]; ok {
		m.isolation = iso
	} else if iso, ok := r.cfg.Isolation[""]; ok {
		m.isolation = iso
	}
	r.markKnown(source) // a later start may serve before compiling it (known.go)
	return m, nil
}

// Signatures of the guest exports (ABI.md).
var (
	resultI32 = []api.ValueType{api.ValueTypeI32}
	actorI64  = []api.ValueType{api.ValueTypeI64}
)

// check checks the module's exports and starts a guest of it to ask the ABI
// version it speaks (first: a module of another version is refused saying
// so, rather than for the signatures that changed) and the isolation it
// declares.
func (m *Module) check(ctx context.Context) error {
	exports := m.compiled.ExportedFunctions()
	if _, command := exports["_start"]; command {
		if _, reactor := exports["_initialize"]; !reactor {
			// Its runtime would never be started (the host runs
			// _initialize), and every event would fail inside it.
			return errors.New("a command module (it exports _start, not _initialize): rebuild with -buildmode=c-shared (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared)")
		}
	}
	for _, name := range []string{exportABIVersion, exportIsolation, exportABIMinor} {
		if fn, ok := exports[name]; ok && !sameSignature(fn, nil, resultI32) {
			return fmt.Errorf("%s has the wrong signature", name)
		}
	}
	ictx, cancel := ctx, context.CancelFunc(func() {})
	if !m.r.cfg.NoEventTimeout {
		ictx, cancel = context.WithTimeout(ctx, m.r.cfg.EventTimeout)
	}
	defer cancel()
	mod, mem, err := m.instantiate(ictx)
	if err != nil {
		return fmt.Errorf("start a guest: %w", err)
	}
	defer closeModule(context.WithoutCancel(ctx), mod, mem)
	for name, on := range map[string]*bool{exportOnRequest: &m.onRequest, exportOnSocket: &m.onSocket, exportOnLeave: &m.onLeave, exportOnAlarm: &m.onAlarm} {
		if fn, ok := exports[name]; ok {
			if !sameSignature(fn, actorI64, resultI32) {
				return fmt.Errorf("%s has the wrong signature", name)
			}
			*on = true
		}
	}
	if !m.onRequest && !m.onSocket {
		// A module with neither handler serves nothing: it is not a class
		// (a Go guest built without -buildmode=c-shared, say), and is
		// refused here rather than answering 501 to every request.
		return fmt.Errorf("the module exports neither %s nor %s, so it serves no event: a Go guest is built with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared on wasmhost/guest, a C guest on wasmhost/sdk/c (ABI.md)",
			exportOnRequest, exportOnSocket)
	}
	if fn := mod.ExportedFunction(exportABIMinor); fn != nil {
		res, err := fn.Call(ictx)
		if err != nil {
			return fmt.Errorf("%s: %w", exportABIMinor, err)
		}
		v := api.DecodeU32(res[0])
		if v > wire.Minor {
			return fmt.Errorf("the module speaks guest ABI %d.%d, and this host serves %d.%d: run it on a newer node, or rebuild it with this host's SDK (wasmhost/guest, wasmhost/sdk/c)",
				wire.Version, v, wire.Version, wire.Minor)
		}
		// Its events are laid out as its minor version has them: an older
		// guest refuses the fields a newer one added.
		m.minor = v
	}
	if fn := mod.ExportedFunction(exportIsolation); fn != nil {
		res, err := fn.Call(ictx)
		if err != nil {
			return fmt.Errorf("%s: %w", exportIsolation, err)
		}
		switch iso := Isolation(api.DecodeU32(res[0])); iso {
		case IsolationActor, IsolationClass:
			m.isolation = iso
		default:
			return fmt.Errorf("%s returned %d, neither %d (actor) nor %d (class)", exportIsolation, res[0], IsolationActor, IsolationClass)
		}
	}
	return nil
}

func sameSignature(fn api.FunctionDefinition, params, results []api.ValueType) bool {
	return string(fn.ParamTypes()) == string(params) && string(fn.ResultTypes()) == string(results)
}

// Close releases the compiled module and the guests it keeps ready.
// Its actors' guests must be closed first.
func (m *Module) Close(ctx context.Context) error {
	m.r.mu.Lock()
	if i := slices.Index(m.r.mods, m); i >= 0 {
		m.r.mods = slices.Delete(m.r.mods, i, i+1)
	}
	m.r.mu.Unlock()
	m.closePool(ctx)
	m.shared.close(ctx)
	if m.img != nil {
		m.img.Close()
	}
	return m.compiled.Close(ctx)
}

// moduleConfig is the configuration of every guest: anonymous (many
// guests of one module coexist), started by the reactor's
// _initialize, with real clocks and randomness and nothing else: no files,
// arguments, environment or stdin, and stdout and stderr both into out,
// the tail the host logs (guestOut).
func (m *Module) moduleConfig(out *guestOut) wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions("_initialize").
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader).
		WithStdout(out).
		WithStderr(out)
}

// instantiate starts a guest of m, as start does, for a caller that does
// not read what it writes.
func (m *Module) instantiate(ctx context.Context) (api.Module, experimental.LinearMemory, error) {
	s, err := m.start(ctx)
	return s.mod, s.mem, err
}

// start starts a guest of m: instantiate, _initialize, and the check of
// the ABI version the guest speaks. Its mem is the guest's linear memory
// if the host allocated it, for closeModule; its out what the guest
// writes. The first guest started on a fresh mapping teaches m its warmth.
func (m *Module) start(ctx context.Context) (started, error) {
	out := &guestOut{}
	mod, mem, err := m.instantiateWith(ctx, out)
	return started{mod: mod, mem: mem, out: out}, err
}

func (m *Module) instantiateWith(ctx context.Context, out *guestOut) (mod api.Module, mem experimental.LinearMemory, err error) {
	warm := dataWarmth(m.img, m.dataEnd)
	if w := m.warmth.Load(); w != nil {
		warm = *w
	}
	ictx, memOf := withMemory(ctx, m.r.alloc, m.img, warm)
	mod, err = m.r.rt.InstantiateModule(ictx, m.compiled, m.moduleConfig(out))
	mem = memOf()
	if err != nil {
		if mem != nil {
			mem.Free() // wazero does not when instantiation fails
		}
		return nil, nil, err
	}
	if fn := mod.ExportedFunction(exportABIVersion); fn != nil {
		res, err := fn.Call(ctx)
		if err != nil {
			closeModule(ctx, mod, mem)
			return nil, nil, err
		}
		if v := api.DecodeU32(res[0]); v != wire.Version {
			closeModule(ctx, mod, mem)
			return nil, nil, fmt.Errorf("the module speaks guest ABI version %d, and this host serves version %d: rebuild it with this host's SDK (wasmhost/guest, wasmhost/sdk/c)", v, wire.Version)
		}
	}
	if m.r.warm && m.warmth.Load() == nil {
		if w := learnWarmth(mem); w != nil {
			m.warmth.CompareAndSwap(nil, &w)
		}
	}
	return mod, mem, nil
}

// closeModule closes a guest and frees its memory. wazero frees it
// too, except when a timeout closed the module while no call was running
// to notice it; Free may be called twice.
func closeModule(ctx context.Context, mod api.Module, mem experimental.LinearMemory) {
	_ = mod.Close(ctx)
	if mem != nil {
		mem.Free()
	}
}
