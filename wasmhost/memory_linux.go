package wasmhost

import (
	"encoding/binary"
	"slices"
	"sync"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// keepMappings is how many freed mappings an allocator keeps for reuse.
// The mappings kept hold their touched pages (about 1 MB for a Go guest)
// until a guest takes them or the trim clock unmaps them.
const keepMappings = 8

// keepCommitted is the most committed memory of a mapping kept for
// reuse: a mapping that grew past it is unmapped, not to keep a large
// guest's memory resident for the next one.
const keepCommitted = 16 << 20

// image is the memory a guest of a module starts with, in a memory
// file, mapped copy-on-write into each guest's memory (memory.go).
type image struct {
	mu   sync.Mutex
	fd   int // -1 once closed
	size int // bytes, a whole number of system pages
}

// newImage writes segs into a memory file of size bytes or more.
func newImage(segs []segment, size uint64) (*image, error) {
	page := uint64(unix.Getpagesize())
	size = (size + page - 1) / page * page
	fd, err := unix.MemfdCreate("wasm-image", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	img := &image{fd: fd, size: int(size)}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		img.Close()
		return nil, err
	}
	for _, s := range segs {
		if _, err := unix.Pwrite(fd, s.init, int64(s.off)); err != nil {
			img.Close()
			return nil, err
		}
	}
	return img, nil
}

// Close closes the memory file; memories that map it keep it.
func (img *image) Close() {
	img.mu.Lock()
	defer img.mu.Unlock()
	if img.fd >= 0 {
		_ = unix.Close(img.fd)
		img.fd = -1
	}
}

// mapInto maps img copy-on-write over the start of buf.
func (img *image) mapInto(buf []byte) bool {
	img.mu.Lock()
	defer img.mu.Unlock()
	if img.fd < 0 || img.size > len(buf) {
		return false
	}
	_, err := unix.MmapPtr(img.fd, 0, unsafe.Pointer(&buf[0]), uintptr(img.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	return err == nil
}

// readInto copies img into the start of buf, which must be writable.
func (img *image) readInto(buf []byte) bool {
	return img.readAt(buf[:min(img.size, len(buf))], 0)
}

// readAt copies the bytes of img at off into buf.
func (img *image) readAt(buf []byte, off int) bool {
	img.mu.Lock()
	defer img.mu.Unlock()
	if img.fd < 0 {
		return false
	}
	n, err := unix.Pread(img.fd, buf, int64(off))
	return err == nil && n == len(buf)
}

// mmapAllocator backs each guest's linear memory with its own
// anonymous mapping instead of a Go slice (see memory.go), and keeps a
// few freed mappings, zeroed, for the next guests, until they have
// gone unused for a few steps of the trim clock.
type mmapAllocator struct {
	mu     sync.Mutex
	keep   int        // how many freed mappings to keep
	free   []*mapping // zeroed, for reuse; oldest first
	step   uint64     // of the trim clock, at the last trim
	closed bool       // no more reuse: Free unmaps
}

func newAllocator() allocator { return &mmapAllocator{keep: keepMappings} }

// setKeep sets how many freed mappings a keeps (for tests and benchmarks).
func (a *mmapAllocator) setKeep(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keep = n
}

// allocate implements allocator: it takes a kept mapping of max bytes, or
// reserves max bytes of address space, inaccessible and not committed,
// and maps img at its start; the memory's Reallocate makes the rest
// usable as it grows, and populates the pages of warm, a run at a time
// rather than a page fault each, unless the mapping is one kept with img
// (whose pages are resident already). If the reservation fails, the
// memory is a Go slice, as without the allocator.
func (a *mmapAllocator) allocate(_, max uint64, img *image, warm warmth) experimental.LinearMemory {
	var m *mapping
	a.mu.Lock()
	found := -1 // a kept mapping of max bytes, with img if there is one
	for i, k := range a.free {
		if uint64(len(k.buf)) == max && (found < 0 || k.img == img) {
			found = i
		}
	}
	if found >= 0 {
		m = a.free[found]
		a.free = append(a.free[:found], a.free[found+1:]...)
	}
	a.mu.Unlock()
	fresh := m == nil
	if fresh {
		if max == 0 || max > 4<<30 {
			return &sliceMemory{img: img}
		}
		b, err := unix.Mmap(-1, 0, int(max), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			return &sliceMemory{img: img}
		}
		m = &mapping{buf: b}
	} else if img != nil && m.img == img {
		warm = nil
	}
	if !m.load(img) {
		_ = unix.Munmap(m.buf)
		return &sliceMemory{img: img}
	}
	return &mmapMemory{a: a, m: m, warm: warm, fresh: fresh}
}

// release takes back a freed mapping: it keeps it zeroed for reuse, or
// unmaps it.
func (a *mmapAllocator) release(m *mapping) {
	a.mu.Lock()
	keep := !a.closed && len(a.free) < a.keep && m.committed <= keepCommitted
	a.mu.Unlock()
	if keep && m.zero() {
		a.mu.Lock()
		if keep = !a.closed && len(a.free) < a.keep; keep {
			m.keptAt = a.step
			a.free = append(a.free, m)
		}
		a.mu.Unlock()
	}
	if !keep {
		_ = unix.Munmap(m.buf)
	}
}

// trim implements allocator: at step of the trim clock, it unmaps the
// mappings kept for idle whole steps (kept before step-idle) and not
// taken since. Mappings are taken newest first, so that on a busy node
// the old ones are the unneeded.
func (a *mmapAllocator) trim(step, idle uint64) {
	var drop []*mapping
	a.mu.Lock()
	a.step = step
	n := 0
	for n < len(a.free) && a.free[n].keptAt+idle < step {
		n++
	}
	if n > 0 {
		drop = slices.Clone(a.free[:n])
		a.free = slices.Delete(a.free, 0, n)
	}
	a.mu.Unlock()
	for _, m := range drop {
		_ = unix.Munmap(m.buf)
	}
}

// Close unmaps the kept mappings; mappings freed after it are unmapped.
func (a *mmapAllocator) Close() {
	a.mu.Lock()
	free := a.free
	a.free, a.closed = nil, true
	a.mu.Unlock()
	for _, m := range free {
		_ = unix.Munmap(m.buf)
	}
}

// mapping is a reservation of address space whose first committed bytes
// are readable and writable, the first imaged of them a private mapping
// of img; a page takes physical memory only once touched.
type mapping struct {
	buf       []byte // the whole reservation
	committed int    // bytes of buf made readable and writable
	img       *image // mapped at the start of buf, if not nil
	imaged    int    // bytes of buf mapped from img
	keptAt    uint64 // step of the trim clock when last kept for reuse
}

// load makes the mapping start with img (if not nil): mapped, or copied
// in if it cannot be mapped. A kept mapping of img has it already.
func (m *mapping) load(img *image) bool {
	if m.img != nil && m.img == img {
		return true
	}
	if m.imaged > 0 && !m.unmapImage() {
		return false
	}
	if img == nil {
		return true
	}
	if img.size > len(m.buf) {
		return false
	}
	if img.mapInto(m.buf) {
		m.committed, m.img, m.imaged = max(m.committed, img.size), img, img.size
		return true
	}
	if img.size > m.committed {
		if unix.Mprotect(m.buf[m.committed:img.size], unix.PROT_READ|unix.PROT_WRITE) != nil {
			return false
		}
		m.committed = img.size
	}
	return img.readInto(m.buf)
}

// unmapImage replaces the image's mapping with fresh anonymous memory.
func (m *mapping) unmapImage() bool {
	if _, err := unix.MmapPtr(-1, 0, unsafe.Pointer(&m.buf[0]), uintptr(m.imaged), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED); err != nil {
		return false
	}
	m.img, m.imaged = nil, 0
	return true
}

// Page flags in /proc/self/pagemap.
const (
	pagePresent   = 1 << 63
	pageSwapped   = 1 << 62
	pageFile      = 1 << 61 // mapping a file (the image), not a private copy
	pageExclusive = 1 << 56 // mapped once: not the shared zero page
)

// pageFlags returns the /proc/self/pagemap entries of the first n pages
// of buf.
func pageFlags(buf []byte, n int) ([]byte, bool) {
	page := unix.Getpagesize()
	fd, err := unix.Open("/proc/self/pagemap", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	flags := make([]byte, 8*n)
	k, err := unix.Pread(fd, flags, int64(uintptr(unsafe.Pointer(&buf[0]))/uintptr(page)*8))
	_ = unix.Close(fd)
	return flags, err == nil && k == len(flags)
}

// restoreImage makes the image's part of the mapping read as the image
// again without faulting its pages in again: it copies the image into
// the pages the guest wrote (private copies, told apart by
// /proc/self/pagemap), and leaves the others mapping the image.
func (m *mapping) restoreImage() bool {
	page := unix.Getpagesize()
	n := m.imaged / page
	flags, ok := pageFlags(m.buf, n)
	if !ok {
		return false
	}
	private := func(i int) bool {
		f := binary.LittleEndian.Uint64(flags[8*i:])
		return f&pageSwapped != 0 || f&(pagePresent|pageFile) == pagePresent
	}
	for i := 0; i < n; i++ {
		if !private(i) {
			continue
		}
		j := i + 1
		for j < n && private(j) {
			j++
		}
		if !m.img.readAt(m.buf[i*page:j*page], i*page) {
			return false
		}
		i = j
	}
	return true
}

// zero makes the mapping read as zeros, but for its image, without
// faulting its pages in again: it restores the image, clears the
// resident pages of the rest and drops the others (which are not
// mapped, or swapped out). It reports false if it could not.
func (m *mapping) zero() bool {
	if m.imaged > 0 && !m.restoreImage() && !m.unmapImage() {
		return false
	}
	if m.committed <= m.imaged {
		return true
	}
	page := unix.Getpagesize()
	rest := m.buf[m.imaged:m.committed]
	vec := make([]byte, (len(rest)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return false
	}
	for i := 0; i < len(vec); {
		j := i + 1
		for j < len(vec) && vec[j]&1 == vec[i]&1 {
			j++
		}
		run := rest[i*page : min(j*page, len(rest))]
		if vec[i]&1 != 0 {
			clear(run)
		} else if unix.Madvise(run, unix.MADV_DONTNEED) != nil {
			return false
		}
		i = j
	}
	return true
}

// touched implements learnWarmth: the pages of a fresh mapping that its
// guest wrote (private: anonymous pages mapped once, copies of the
// image's) or only read (the image's, or the zero page), from
// /proc/self/pagemap.
func (m *mapping) touched() warmth {
	page := unix.Getpagesize()
	n := m.committed / page
	if n == 0 {
		return nil
	}
	flags, ok := pageFlags(m.buf, n)
	if !ok {
		return nil
	}
	const untouched, read, written = 0, 1, 2
	kind := func(i int) int {
		f := binary.LittleEndian.Uint64(flags[8*i:])
		switch {
		case f&pageSwapped != 0:
			return written
		case f&pagePresent == 0:
			return untouched
		case i*page < m.imaged && f&pageFile == 0, i*page >= m.imaged && f&pageExclusive != 0:
			return written
		default:
			return read
		}
	}
	w := warmth{}
	for i := 0; i < n; {
		k := kind(i)
		j := i + 1
		for j < n && kind(j) == k {
			j++
		}
		if k != untouched {
			w = append(w, warmRun{off: i * page, end: j * page, write: k == written})
		}
		i = j
	}
	return w
}

// mmapMemory is one guest's linear memory in a mapping. It grows in
// place, without copying; Free hands the mapping back to the allocator.
type mmapMemory struct {
	a      *mmapAllocator
	mu     sync.Mutex // Free may come from Runtime.Close and Guest.Close at once
	m      *mapping   // nil once freed
	warm   warmth     // pages to populate as they are committed
	warmed int        // bytes of the mapping warm has been applied to
	fresh  bool       // m was reserved for this memory: only its guest touched it
	drop   bool       // Free unmaps m rather than handing it back
}

// Reallocate implements experimental.LinearMemory: it returns the first
// size bytes, or nil if they are past the reservation or cannot be made
// writable (the guest's memory.grow then fails).
func (mm *mmapMemory) Reallocate(size uint64) []byte {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	m := mm.m
	if m == nil || size > uint64(len(m.buf)) {
		return nil
	}
	if n := int(size); n > m.committed {
		if err := unix.Mprotect(m.buf[m.committed:n], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return nil
		}
		m.committed = n
	}
	if mm.warmed < m.committed && len(mm.warm) > 0 {
		mm.populate()
	}
	return m.buf[:size:size]
}

// populate faults in the pages of mm.warm that were committed since the
// last call, a run at a time: one system call instead of a page fault
// per page. It is best effort (Linux 5.14 and later); a page it misses
// is faulted in when touched.
func (mm *mmapMemory) populate() {
	m := mm.m
	page := unix.Getpagesize()
	for _, r := range mm.warm {
		lo, hi := max(r.off, mm.warmed)/page*page, min(r.end, m.committed)
		if hi <= lo {
			if r.off >= m.committed {
				break
			}
			continue
		}
		advice := unix.MADV_POPULATE_READ
		if r.write {
			advice = unix.MADV_POPULATE_WRITE
		}
		_ = unix.Madvise(m.buf[lo:hi], advice)
	}
	mm.warmed = m.committed
}

// touched implements learnWarmth.
func (mm *mmapMemory) touched() warmth {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if mm.m == nil || !mm.fresh {
		return nil
	}
	return mm.m.touched()
}

// dropOnFree implements dropOnFree.
func (mm *mmapMemory) dropOnFree() {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	mm.drop = true
}

// Free implements experimental.LinearMemory. It may be called more than
// once; the memory must not be used after it.
func (mm *mmapMemory) Free() {
	mm.mu.Lock()
	m, drop := mm.m, mm.drop
	mm.m = nil
	mm.mu.Unlock()
	switch {
	case m == nil:
	case drop:
		_ = unix.Munmap(m.buf)
	default:
		mm.a.release(m)
	}
}
