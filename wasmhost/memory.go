package wasmhost

import (
	"context"

	"github.com/tetratelabs/wazero/experimental"
)

// Linear memory of guests.
//
// By default wazero backs a linear memory with a Go slice, and grows it
// by appending: every memory.grow of a guest copies its whole memory
// (most of what a Go guest's _initialize costs), the slice is zeroed and
// so wholly resident, and the old copies are garbage for the collector.
// On Linux the host instead gives each guest its own mapping
// (mmapAllocator): the guest's maximum memory (Config.MemoryLimit) is
// reserved as address space only, grows in place, and takes physical
// memory only for the pages the guest touches.
//
// The memory a guest starts with, its data segments, is the same for every
// guest of a module: the host writes it once into a memory file (an image)
// and maps it copy-on-write at the start of each guest's memory, and
// compiles the module without its data section. Pages the guest only reads
// (a Go guest's type data, strings, tables) stay shared between all the
// guests of the module; the guest's _initialize still runs in each guest,
// so that each has its own random seeds.
//
// A closed guest's mapping is kept, zeroed, for a next guest (a few per
// runtime): on a virtual machine a page fault on fresh memory costs more
// than the rest of a guest's start, and the kept mapping's pages are
// already resident. A kept mapping that no guest takes within
// Config.TrimInterval is unmapped (Runtime.trim), so that an idle node does
// not hold the memory of guests long gone.
//
// A fresh mapping is populated, in one call per run of pages rather than
// a page fault per page, with the pages that guests of its module
// touch while they start: the host learns them from the module's first
// guest started on a fresh mapping (warmth), since a module's
// _initialize touches the same pages every time.
//
// Each guest costs MemoryLimit of address space (256 MiB by default; a
// 64-bit process has over 100 TiB) and three memory mappings
// (vm.max_map_count is 65530 by default).

// allocator makes the linear memories of a Runtime's guests.
type allocator interface {
	// allocate returns a memory of at most max bytes that starts with img
	// (nil: zeros); the pages of warm are populated as they become usable,
	// unless the memory is a kept mapping of img (its pages resident).
	allocate(cap, max uint64, img *image, warm warmth) experimental.LinearMemory
	// trim is a step of the trim clock (Runtime.trim): it unmaps the kept
	// mappings that no guest took during the last idle steps.
	trim(step, idle uint64)
	// Close releases what the allocator keeps, once the runtime is closed.
	Close()
}

// warmth is the pages of linear memory a guest is expected to touch
// while it starts, as byte ranges sorted by offset and not overlapping.
type warmth []warmRun

// warmRun is a run of whole pages [off, end) of linear memory; write: the
// pages are written (populated writable, with private copies of an
// image's pages), else only read (an image's pages, mapped shared).
type warmRun struct {
	off, end int
	write    bool
}

// dataWarmth is the warmth of a module before its guests' is learned:
// without an image, instantiation writes the data segments, below end.
func dataWarmth(img *image, end uint64) warmth {
	if img != nil || end == 0 {
		return nil
	}
	return warmth{{off: 0, end: int(min(end, 1<<32)), write: true}}
}

// learnWarmth returns the pages that mem's guest has touched so far, if mem
// is a fresh mapping (one whose pages only that guest touched), else nil.
func learnWarmth(mem experimental.LinearMemory) warmth {
	if l, ok := mem.(interface{ touched() warmth }); ok {
		return l.touched()
	}
	return nil
}

// dropOnFree has mem's mapping, if it has one, unmapped when it is freed
// rather than kept for reuse.
func dropOnFree(mem experimental.LinearMemory) {
	if d, ok := mem.(interface{ dropOnFree() }); ok {
		d.dropOnFree()
	}
}

// sliceMemory is a linear memory in a Go slice, grown by appending: what
// wazero does without an allocator. It is the fallback when a mapping
// cannot be made; img, if set, is copied in at the first allocation.
type sliceMemory struct {
	buf []byte
	img *image
}

// Reallocate implements experimental.LinearMemory.
func (m *sliceMemory) Reallocate(size uint64) []byte {
	if n := uint64(len(m.buf)); size > n {
		m.buf = append(m.buf, make([]byte, size-n)...)
	}
	if m.img != nil {
		// Should the image be unreadable (closed), the memory holds zeros
		// where the data should be, and the guest fails its start: a
		// nil here would make wazero panic.
		_ = m.img.readInto(m.buf)
		m.img = nil
	}
	return m.buf[:size]
}

// Free implements experimental.LinearMemory.
func (m *sliceMemory) Free() { m.buf = nil }

// withMemory returns ctx for instantiating a module with alloc (nil: as
// wazero does by default; img and warm as for allocator.allocate), and a
// function that returns the linear memory the instantiation allocated
// (nil if none), for the caller to free it once the guest is closed: wazero
// frees it when closing the module, except when instantiation failed or a
// timeout closed the module while no call was running to notice it.
func withMemory(ctx context.Context, alloc allocator, img *image, warm warmth) (context.Context, func() experimental.LinearMemory) {
	if alloc == nil {
		return ctx, func() experimental.LinearMemory { return nil }
	}
	var mem experimental.LinearMemory
	ctx = experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(cap, max uint64) experimental.LinearMemory {
		mem = alloc.allocate(cap, max, img, warm)
		return mem
	}))
	return ctx, func() experimental.LinearMemory { return mem }
}
