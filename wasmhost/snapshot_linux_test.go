package wasmhost

// A prototype of starting guests from a snapshot, measured by
// BenchmarkSnapshot and not used by the host (see bench/RESULTS.md, wasm
// section, for why). After a template guest's _initialize, its linear
// memory goes into a memfd and its globals are read; a new guest is
// instantiated from a variant of the module without data segments and
// without _initialize, its memory a private (copy-on-write) mapping of the
// memfd, and its globals set from the template's. wazero has no API to set
// a global that the module does not export, and a Go guest exports none, so
// the module is rewritten to export its globals.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// snapshotVariants returns wasm with its globals exported as
// "snapshot.global.<i>", and the same without its data section.
func snapshotVariants(tb testing.TB, wasm []byte) (exported, stripped []byte, globals int) {
	tb.Helper()
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	for p := 8; p < len(wasm); {
		size, n := binary.Uvarint(wasm[p+1:])
		body := p + 1 + n
		secs = append(secs, section{wasm[p], wasm[body : body+int(size)]})
		p = body + int(size)
	}
	imported := 0
	for _, s := range secs {
		switch s.id {
		case 2: // imports: count the globals
			count, n := binary.Uvarint(s.body)
			p := n
			name := func() {
				l, n := binary.Uvarint(s.body[p:])
				p += n + int(l)
			}
			uleb := func() { _, n := binary.Uvarint(s.body[p:]); p += n }
			limits := func() {
				flags := s.body[p]
				p++
				uleb()
				if flags&1 != 0 {
					uleb()
				}
			}
			for range count {
				name()
				name()
				kind := s.body[p]
				p++
				switch kind {
				case 0:
					uleb()
				case 1:
					p++
					limits()
				case 2:
					limits()
				case 3:
					p += 2
					imported++
				default:
					tb.Fatalf("import kind %d", kind)
				}
			}
		case 6:
			count, _ := binary.Uvarint(s.body)
			globals = int(count)
		}
	}
	var out, noData []byte
	out = append(out, wasm[:8]...)
	noData = append(noData, wasm[:8]...)
	for _, s := range secs {
		body := s.body
		if s.id == 7 {
			count, n := binary.Uvarint(body)
			nb := binary.AppendUvarint(nil, count+uint64(globals))
			nb = append(nb, body[n:]...)
			for i := range globals {
				name := "snapshot.global." + strconv.Itoa(i)
				nb = binary.AppendUvarint(nb, uint64(len(name)))
				nb = append(nb, name...)
				nb = append(nb, 3)
				nb = binary.AppendUvarint(nb, uint64(imported+i))
			}
			body = nb
		}
		sec := append(binary.AppendUvarint([]byte{s.id}, uint64(len(body))), body...)
		out = append(out, sec...)
		if s.id != 11 {
			noData = append(noData, sec...)
		}
	}
	return out, noData, globals
}

// snapshot is a template guest's state after _initialize.
type snapshot struct {
	fd      int      // memfd with the linear memory
	size    uint64   // bytes of linear memory
	globals []uint64 // values of the globals
	clone   wazero.CompiledModule
}

func newSnapshot(tb testing.TB, r *Runtime, wasm []byte) *snapshot {
	tb.Helper()
	ctx := context.Background()
	exported, stripped, n := snapshotVariants(tb, wasm)
	tmpl, err := r.rt.CompileModule(ctx, exported)
	if err != nil {
		tb.Fatal(err)
	}
	clone, err := r.rt.CompileModule(ctx, stripped)
	if err != nil {
		tb.Fatal(err)
	}
	m := &Module{r: r, compiled: tmpl}
	mod, mem, err := m.instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer closeModule(ctx, mod, mem)
	s := &snapshot{size: uint64(mod.Memory().Size()), clone: clone}
	for i := range n {
		s.globals = append(s.globals, mod.ExportedGlobal("snapshot.global."+strconv.Itoa(i)).Get())
	}
	if s.fd, err = unix.MemfdCreate("wasm-snapshot", unix.MFD_CLOEXEC); err != nil {
		tb.Fatal(err)
	}
	b, _ := mod.Memory().Read(0, uint32(s.size))
	if _, err := unix.Pwrite(s.fd, b, 0); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = unix.Close(s.fd) })
	return s
}

// cowMemory is a linear memory whose first bytes are a private mapping of
// a snapshot: pages are shared with the snapshot until written.
type cowMemory struct {
	buf       []byte
	committed int
}

func (s *snapshot) allocate(max uint64) (*cowMemory, error) {
	b, err := unix.Mmap(-1, 0, int(max), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	if _, err := unix.MmapPtr(s.fd, 0, unsafe.Pointer(&b[0]), uintptr(s.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED); err != nil {
		_ = unix.Munmap(b)
		return nil, err
	}
	return &cowMemory{buf: b, committed: int(s.size)}, nil
}

func (m *cowMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	if n := int(size); n > m.committed {
		if unix.Mprotect(m.buf[m.committed:n], unix.PROT_READ|unix.PROT_WRITE) != nil {
			return nil
		}
		m.committed = n
	}
	return m.buf[:size:size]
}

func (m *cowMemory) Free() {
	if m.buf != nil {
		_ = unix.Munmap(m.buf)
		m.buf = nil
	}
}

// start instantiates a clone of the template: its memory and globals.
func (s *snapshot) start(ctx context.Context, r *Runtime) (api.Module, *cowMemory, error) {
	var mem *cowMemory
	var merr error
	ictx := experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
		if mem, merr = s.allocate(max); merr != nil {
			return &sliceMemory{}
		}
		return mem
	}))
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader)
	mod, err := r.rt.InstantiateModule(ictx, s.clone, cfg)
	if err == nil && merr != nil {
		err = merr
	}
	if err != nil {
		return nil, nil, err
	}
	if d := uint32(s.size/pageSize) - mod.Memory().Size()/pageSize; d > 0 {
		if _, ok := mod.Memory().Grow(d); !ok {
			return nil, nil, fmt.Errorf("grow to the snapshot's size failed")
		}
	}
	for i, v := range s.globals {
		g, ok := mod.ExportedGlobal("snapshot.global." + strconv.Itoa(i)).(api.MutableGlobal)
		if !ok {
			continue // immutable: already the template's value
		}
		g.Set(v)
	}
	return mod, mem, nil
}

// BenchmarkSnapshot measures the snapshot prototype against the host's
// path (mmap+image, fresh mappings: a wake's cost when no freed mapping
// is at hand): "start" is one start and first event (cpu-ns as in
// BenchmarkStart), "resident" 200 resident guests (rss-bytes and
// pss-bytes per guest; the snapshot's shared pages count in full in
// the resident set of every guest that maps them, in the proportional set
// once).
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	req, st := get("", "read"), memStorage{}
	host := startPath{name: "host", alloc: true, merge: true, image: true}
	m := host.compile(b, Config{Prestart: -1})
	wasm := mergeDataSegments(guest(b, counterGuest))
	s := newSnapshot(b, m.r, wasm)
	type startFn func() (api.Module, experimental.LinearMemory)
	paths := []struct {
		name  string
		start startFn
	}{
		{"host", func() (api.Module, experimental.LinearMemory) {
			mod, mem, err := m.instantiate(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return mod, mem
		}},
		{"snapshot", func() (api.Module, experimental.LinearMemory) {
			mod, mem, err := s.start(ctx, m.r)
			if err != nil {
				b.Fatal(err)
			}
			return mod, mem
		}},
	}
	event := func(mod api.Module) {
		g := guestOn(m, mod)
		if resp, err := g.Handle(ctx, req, st); err != nil || resp.Status != 200 {
			b.Fatalf("first event: %v, %v", resp, err)
		}
	}
	for _, p := range paths {
		b.Run("start/"+p.name, func(b *testing.B) {
			runtime.GC()
			cpu0 := cpuTime(b)
			for b.Loop() {
				mod, mem := p.start()
				event(mod)
				closeModule(ctx, mod, mem)
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
	for _, p := range paths {
		b.Run("resident/"+p.name, func(b *testing.B) {
			const n = 200
			var rssPer, pssPer float64
			for b.Loop() {
				debug.FreeOSMemory()
				rss0, pss0 := rss(b), pss(b)
				type startedGuest struct {
					mod api.Module
					mem experimental.LinearMemory
				}
				gs := make([]startedGuest, n)
				for i := range gs {
					gs[i].mod, gs[i].mem = p.start()
					event(gs[i].mod)
				}
				debug.FreeOSMemory()
				rssPer, pssPer = float64(rss(b)-rss0)/n, float64(pss(b)-pss0)/n
				for _, g := range gs {
					closeModule(ctx, g.mod, g.mem)
				}
			}
			b.ReportMetric(rssPer, "rss-bytes")
			b.ReportMetric(pssPer, "pss-bytes")
		})
	}
}

// TestSnapshotSharesSeeds shows why the host does not start guests
// from a snapshot: the Go runtime seeds its random generator (and map
// hash seeds) in _initialize, so every guest started from one
// snapshot draws the same "random" numbers, where guests that ran
// their own _initialize do not.
func TestSnapshotSharesSeeds(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, Config{Prestart: -1})
	wasm := mergeDataSegments(guest(t, probeGuest))
	m := mustCompile(t, r, "probe", wasm)
	s := newSnapshot(t, r, wasm)
	draw := func(mod api.Module, mem experimental.LinearMemory) string {
		defer closeModule(ctx, mod, mem)
		g := guestOn(m, mod)
		return string(do(t, g, get("/rand", ""), memStorage{}).Body)
	}
	clone := func() string {
		mod, mem, err := s.start(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return draw(mod, mem)
	}
	fresh := func() string {
		mod, mem, err := m.instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return draw(mod, mem)
	}
	if a, b := clone(), clone(); a != b {
		t.Errorf("snapshot clones drew %s and %s: expected the same", a, b)
	}
	if a, b := fresh(), fresh(); a == b {
		t.Errorf("fresh guests both drew %s", a)
	}
}
