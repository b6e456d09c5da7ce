package wasmhost

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMappingKept checks that a freed mapping is kept, zeroed, and
// reused, and unmapped once the runtime is closed.
func TestMappingKept(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, Config{TrimInterval: -1})
	a := r.alloc.(*mmapAllocator)
	m := mustCompile(t, r, "mem", wasmModule(memorySection(2)))
	mod, mem, err := m.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod.Memory().WriteByte(5, 1)
	mapped := mem.(*mmapMemory).m
	closeModule(ctx, mod, mem)
	if len(a.free) != 1 || a.free[0] != mapped {
		t.Fatalf("freed mapping not kept: %d kept", len(a.free))
	}
	mod, mem, err = m.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mem.(*mmapMemory).m != mapped || len(a.free) != 0 {
		t.Fatal("kept mapping not reused")
	}
	if b, _ := mod.Memory().ReadByte(5); b != 0 {
		t.Fatal("reused mapping not zeroed")
	}
	closeModule(ctx, mod, mem)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(a.free) != 0 || !a.closed {
		t.Fatal("kept mappings not released by Close")
	}
}

// TestImage checks that a module's data segments go into an image mapped
// into each guest, and that a mapping reused by another module holds
// nothing of the first one's image or writes.
func TestImage(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, Config{TrimInterval: -1})
	a := mustCompile(t, r, "a", wasmModule(memorySection(2), dataSection(segment{70000, []byte("data")})))
	if a.img == nil {
		t.Fatal("no image")
	}
	mod, mem, err := a.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := mem.(*mmapMemory).m.imaged; got != a.img.size {
		t.Fatalf("%d bytes mapped from the image, want %d", got, a.img.size)
	}
	if b, _ := mod.Memory().Read(70000, 4); string(b) != "data" {
		t.Fatalf("memory holds %q, want the data", b)
	}
	mod.Memory().Write(0, []byte("written"))
	mod.Memory().Write(70000, []byte("DATA"))
	closeModule(ctx, mod, mem)
	alloc := r.alloc.(*mmapAllocator)
	if len(alloc.free) != 1 || alloc.free[0].img != a.img {
		t.Fatal("mapping not kept with its image restored")
	}
	// The kept mapping, image restored, serves the next guest of a.
	mod, mem, err = a.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b0, _ := mod.Memory().Read(0, 7); string(b0) != "\x00\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("reused mapping holds %q at 0", b0)
	}
	if b, _ := mod.Memory().Read(70000, 4); string(b) != "data" {
		t.Fatalf("reused mapping holds %q, want the data", b)
	}
	mod.Memory().Write(0, []byte("written"))
	closeModule(ctx, mod, mem)

	// No data: no image, and the reused mapping reads as zeros.
	b := mustCompile(t, r, "b", wasmModule(memorySection(2)))
	mod, mem, err = b.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeModule(ctx, mod, mem)
	if mem.(*mmapMemory).m.imaged != 0 {
		t.Fatal("image mapped for a module without data")
	}
	got, _ := mod.Memory().Read(0, mod.Memory().Size())
	for i, c := range got {
		if c != 0 {
			t.Fatalf("byte %d of a reused mapping is %#x", i, c)
		}
	}

	// Data past the initial memory: no image, and instantiation fails as
	// without the host's rewriting, which Compile, starting a guest
	// of the module, reports.
	if _, err := r.Compile(ctx, "c", wasmModule(memorySection(1), dataSection(segment{70000, []byte("data")}))); err == nil ||
		!strings.Contains(err.Error(), "out of bounds") {
		t.Fatalf("compiled a module whose data is out of bounds: %v", err)
	}
}

// resident counts the resident pages of buf (mincore); ok is false if
// part of buf is not mapped.
func resident(t *testing.T, buf []byte) (pages int, ok bool) {
	t.Helper()
	page := unix.Getpagesize()
	vec := make([]byte, (len(buf)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(unsafe.Pointer(&vec[0])))
	if errno == unix.ENOMEM {
		return 0, false
	}
	if errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		pages += int(v & 1)
	}
	return pages, true
}

// TestTrimMappings checks that a kept mapping is unmapped by the trim
// step that finds it kept for a whole TrimInterval (trimSteps steps),
// and not before; that taking it starts its time over; and that older
// mappings go first.
func TestTrimMappings(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, Config{Prestart: -1, TrimInterval: -1}) // trim steps by hand
	a := r.alloc.(*mmapAllocator)
	m := mustCompile(t, r, "mem", wasmModule(memorySection(4)))
	// use starts a guest, writes into two pages of its memory and
	// closes it; it returns the mapping, kept for reuse.
	use := func() *mapping {
		t.Helper()
		mod, mem, err := m.instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mod.Memory().WriteByte(5, 1)
		mod.Memory().WriteByte(3*pageSize, 1)
		mapped := mem.(*mmapMemory).m
		closeModule(ctx, mod, mem)
		return mapped
	}
	steps := func(n int) {
		for range n {
			r.trim()
		}
	}
	kept := func(ms ...*mapping) {
		t.Helper()
		if !slices.Equal(a.free, ms) {
			t.Fatalf("step %d: %d mappings kept, want %d", r.step.Load(), len(a.free), len(ms))
		}
		for _, k := range ms {
			if n, ok := resident(t, k.buf); !ok || n == 0 {
				t.Fatalf("step %d: kept mapping: %d pages resident, mapped %v", r.step.Load(), n, ok)
			}
		}
	}
	unmapped := func(k *mapping) {
		t.Helper()
		if n, ok := resident(t, k.buf); ok {
			t.Fatalf("step %d: trimmed mapping still mapped, %d pages resident", r.step.Load(), n)
		}
	}

	first := use() // kept at step 0
	steps(trimSteps)
	kept(first)
	if use() != first { // taken and kept again at step trimSteps
		t.Fatal("kept mapping not reused")
	}
	steps(trimSteps)
	kept(first)

	// A second guest running while the first is started takes a
	// second mapping: both are kept, the second trimSteps/2 steps later.
	mod, mem, err := m.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second := use()
	if second == first {
		t.Fatal("one mapping for two guests")
	}
	steps(trimSteps / 2)
	closeModule(ctx, mod, mem)
	kept(second, first)
	steps(trimSteps/2 + 1)
	kept(first)
	unmapped(second)
	steps(trimSteps / 2)
	kept()
	unmapped(first)
}

// TestTrimLoop checks that the runtime trims by itself, a TrimInterval
// after a mapping was last used (in a synctest bubble, whose clock
// advances when every goroutine waits), and that Close stops it.
func TestTrimLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const interval = 4 * time.Second
		r, err := NewRuntime(ctx, Config{Prestart: -1, TrimInterval: interval, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		a := r.alloc.(*mmapAllocator)
		m := mustCompile(t, r, "mem", wasmModule(memorySection(2)))
		mod, mem, err := m.instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		closeModule(ctx, mod, mem)
		count := func() int {
			a.mu.Lock()
			defer a.mu.Unlock()
			return len(a.free)
		}
		// Freed at time 0, before the first step: the steps up to the one
		// at the interval keep it, the next one unmaps it.
		time.Sleep(interval + time.Millisecond)
		synctest.Wait()
		if n := count(); n != 1 {
			t.Fatalf("%d mappings kept after one interval, want 1", n)
		}
		time.Sleep(interval / trimSteps)
		synctest.Wait()
		if n := count(); n != 0 {
			t.Fatalf("%d mappings kept after 1.25 intervals, want 0", n)
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWarmth checks that a module learns the pages its first guest
// (the one Compile starts) touched on a fresh mapping, that a fresh
// mapping gets them populated before the guest runs, and no others (no
// resident memory is added), and that a kept mapping of the module is not
// given them again.
func TestWarmth(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, Config{Prestart: -1, TrimInterval: -1})
	a := r.alloc.(*mmapAllocator)
	m := mustCompile(t, r, "counter", guest(t, counterGuest))
	if m.img == nil {
		t.Fatal("want an image")
	}
	wp := m.warmth.Load()
	if wp == nil {
		t.Fatal("no warmth learned from the fresh mapping of Compile's guest")
	}
	mod, mem, err := m.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := *wp
	var written, read int
	for i, run := range w {
		if run.end <= run.off || (i > 0 && run.off < w[i-1].end) {
			t.Fatalf("run %d of %v: empty or out of order", i, w)
		}
		if run.write {
			written += run.end - run.off
		} else {
			read += run.end - run.off
		}
	}
	if written == 0 || read == 0 {
		t.Fatalf("warmth %v: %d bytes written, %d read; want both", w, written, read)
	}
	// The mappings of the guests below are fresh, and unmapped when
	// freed.
	a.setKeep(0)
	closeModule(ctx, mod, mem)

	// A fresh mapping populated with w holds exactly w's pages before
	// the guest runs.
	size := uint64(w[len(w)-1].end+pageSize-1) / pageSize * pageSize
	lm := a.allocate(0, uint64(r.cfg.MemoryLimit), m.img, w)
	fresh := lm.(*mmapMemory)
	if !fresh.fresh {
		t.Fatal("mapping for a second guest not fresh")
	}
	buf := lm.Reallocate(size)
	page := unix.Getpagesize()
	vec := make([]byte, len(buf)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	inWarmth := make([]bool, len(vec))
	for _, run := range w {
		for p := run.off / page; p < run.end/page; p++ {
			inWarmth[p] = true
		}
	}
	for p, v := range vec {
		// An image page outside w may be resident in the page cache
		// without being touched by this mapping; anonymous ones not.
		if inWarmth[p] && v&1 == 0 || !inWarmth[p] && v&1 != 0 && p*page >= fresh.m.imaged {
			t.Fatalf("page %d: resident %v, in warmth %v", p, v&1 != 0, inWarmth[p])
		}
	}
	if got := fresh.touched(); !slices.Equal(got, w) {
		t.Fatalf("populated pages %v, want %v", got, w)
	}
	lm.Free()

	// The module's next fresh guest touches the pages learned.
	mod, mem, err = m.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := mem.(*mmapMemory).touched(); !slices.Equal(got, w) {
		t.Errorf("a fresh guest touched %v, learned %v", got, w)
	}
	closeModule(ctx, mod, mem)

	// A kept mapping of the module's image is not populated again.
	a.setKeep(keepMappings)
	mod, mem, err = m.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	closeModule(ctx, mod, mem)
	lm = a.allocate(0, uint64(r.cfg.MemoryLimit), m.img, w)
	if kept := lm.(*mmapMemory); kept.fresh || kept.warm != nil {
		t.Fatal("kept mapping of the image taken as fresh")
	}
	lm.Free()
}

// TestTrimPool checks that a class's pool is emptied by the trim step
// that finds no start of the class for a whole TrimInterval (trimSteps
// steps), and not before; that its guests' memory is unmapped, not
// kept; and that the next start fills the pool again.
func TestTrimPool(t *testing.T) {
	r := newRuntime(t, Config{Prestart: 2, TrimInterval: -1}) // trim steps by hand
	a := r.alloc.(*mmapAllocator)
	m := mustCompile(t, r, "probe", guest(t, probeGuest))
	steps := func(n int) {
		for range n {
			r.trim()
		}
	}
	start := func() {
		t.Helper()
		g := m.NewGuest(nil)
		defer g.Close()
		body(t, g, "/events")
		waitPool(t, m)
	}
	start() // at step 0
	steps(trimSteps)
	start() // at step trimSteps
	steps(trimSteps)
	if n := len(m.pool.ready); n != 2 {
		t.Fatalf("pool holds %d after a start a TrimInterval ago, want 2", n)
	}
	var bufs [][]byte
	for _, s := range m.pool.ready {
		bufs = append(bufs, s.mem.(*mmapMemory).m.buf)
	}
	steps(1)
	if n := len(m.pool.ready); n != 0 {
		t.Fatalf("pool holds %d after no start for a TrimInterval, want 0", n)
	}
	for _, b := range bufs {
		if n, ok := resident(t, b); ok {
			t.Fatalf("trimmed pooled guest's mapping still mapped (%d pages resident; %d kept)", n, len(a.free))
		}
	}
	start()
	if n := len(m.pool.ready); n != 2 {
		t.Fatalf("pool holds %d after a start, want 2", n)
	}
}
