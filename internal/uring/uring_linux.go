package uring

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's interface (include/uapi/linux/io_uring.h).
const (
	opSend = 26 // IORING_OP_SEND, Linux 5.6

	enterGetEvents = 1 // IORING_ENTER_GETEVENTS

	offSQRing = 0          // IORING_OFF_SQ_RING (and the CQ ring: one mapping)
	offSQEs   = 0x10000000 // IORING_OFF_SQES

	featSingleMmap = 1 // IORING_FEAT_SINGLE_MMAP, Linux 5.4

	sendFlags = unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL
)

// sqe is struct io_uring_sqe, as a send uses it.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	msgFlags    uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	_           uint64
}

// cqe is struct io_uring_cqe.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

// Ring is one io_uring for batches of sends. It is not safe for
// concurrent use: keep one per goroutine that submits, or a pool.
type Ring struct {
	fd         int
	rings, sqm []byte // the mapped rings, the mapped submission entries

	sqHead, sqTail *uint32
	sqMask         uint32
	array          []uint32
	sqes           []sqe

	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []cqe

	err error  // set once the ring failed: it sends no more
	buf []byte // the buffer of the sends under way
}

// MaxEntries bounds the sends one submission holds; SendEach submits a
// longer list in parts.
const MaxEntries = 4096

// New sets up a ring for up to entries sends per submission (rounded up
// to a power of two, at most MaxEntries), and checks that a send on a full
// socket fails at once instead of waiting. The error says why a ring is
// not available here.
func New(entries int) (*Ring, error) {
	if entries < 1 || entries > MaxEntries {
		return nil, fmt.Errorf("io_uring: %d entries: want 1 to %d", entries, MaxEntries)
	}
	var p params
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	switch errno {
	case 0:
	case unix.ENOSYS, unix.EPERM, unix.EACCES, unix.EINVAL:
		return nil, refused(fmt.Errorf("io_uring_setup: %w", errno))
	default: // a limit of descriptors or memory, which may pass
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd)}
	if err := r.mapRings(&p); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.probe(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Ring) mapRings(p *params) error {
	if p.features&featSingleMmap == 0 {
		return refused(errors.New("io_uring: the kernel maps its rings apart (before Linux 5.4)"))
	}
	size := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	rings, err := unix.Mmap(r.fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("io_uring: map rings: %w", err)
	}
	r.rings = rings
	sqm, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("io_uring: map submission entries: %w", err)
	}
	r.sqm = sqm
	base := unsafe.Pointer(unsafe.SliceData(rings))
	r.sqHead = (*uint32)(unsafe.Add(base, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(base, p.sqOff.tail))
	r.sqMask = *(*uint32)(unsafe.Add(base, p.sqOff.ringMask))
	r.array = unsafe.Slice((*uint32)(unsafe.Add(base, p.sqOff.array)), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(unsafe.SliceData(sqm))), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Add(base, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(base, p.cqOff.tail))
	r.cqMask = *(*uint32)(unsafe.Add(base, p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*cqe)(unsafe.Add(base, p.cqOff.cqes)), p.cqEntries)
	return nil
}

// Close releases the ring. Nothing is in flight between calls.
func (r *Ring) Close() error {
	var errs []error
	for _, m := range [][]byte{r.sqm, r.rings} {
		if m != nil {
			errs = append(errs, unix.Munmap(m))
		}
	}
	r.sqm, r.rings, r.sqes, r.cqes, r.array = nil, nil, nil, nil, nil
	if r.fd >= 0 {
		errs = append(errs, unix.Close(r.fd))
		r.fd = -1
	}
	if r.err == nil {
		r.err = errors.New("io_uring: ring closed")
	}
	return errors.Join(errs...)
}

// SendEach sends b on every socket of fds, each with one send(2) of flags
// MSG_DONTWAIT|MSG_NOSIGNAL, all submitted with one system call per
// Entries sockets. res[i] is what fds[i]'s send returned: the bytes taken
// (fewer than len(b) when its send buffer filled), or a negated errno
// (-EAGAIN: nothing taken). res must be as long as fds.
//
// SendEach returns once every send has completed: the kernel then holds
// no reference to b or to any of the sockets, which the caller must keep
// open until then. An error means the ring failed (it sends no more):
// each res[i] is then a result, or -ECANCELED for a send that was not made.
func (r *Ring) SendEach(fds []int32, b []byte, res []int32) error {
	if len(res) != len(fds) {
		return fmt.Errorf("io_uring: %d results for %d sockets", len(res), len(fds))
	}
	for i := range res {
		res[i] = -int32(unix.ECANCELED)
	}
	if r.err != nil {
		return r.err
	}
	if len(fds) == 0 {
		return nil
	}
	if len(b) == 0 {
		clear(res) // nothing to take
		return nil
	}
	// Kept in r, b lives on the heap (escape analysis), where it does not
	// move: a buffer on the goroutine's stack could move under the sends
	// when the stack grows.
	r.buf = b
	defer func() { r.buf = nil }()
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	for start := 0; start < len(fds); start += len(r.sqes) {
		part := fds[start:min(len(fds), start+len(r.sqes))]
		tail := atomic.LoadUint32(r.sqTail)
		for i, fd := range part {
			idx := tail & r.sqMask
			r.sqes[idx] = sqe{opcode: opSend, fd: fd, addr: addr, len: uint32(len(b)), msgFlags: sendFlags, userData: uint64(start + i)}
			r.array[idx] = idx
			tail++
		}
		atomic.StoreUint32(r.sqTail, tail)
		if err := r.submit(len(part), res); err != nil {
			r.err = err
			break
		}
	}
	return r.err
}

// Entries is how many sends one submission holds.
func (r *Ring) Entries() int { return len(r.sqes) }

// retries bounds the io_uring_enter calls that make no progress (the
// kernel short of memory for requests) before the ring is given up.
const retries = 100

// submit submits the n entries last queued and reaps their completions.
func (r *Ring) submit(n int, res []int32) error {
	pending, done, stuck := n, 0, 0
	for done < n {
		got, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(pending), uintptr(n-done), enterGetEvents, 0, 0)
		switch errno {
		case 0:
			pending -= int(got)
		case unix.EINTR:
		case unix.EAGAIN, unix.EBUSY:
			if stuck++; stuck > retries {
				return r.abandon(n, done, pending, res, errno)
			}
		default:
			return r.abandon(n, done, pending, res, errno)
		}
		done += r.reap(res)
	}
	return nil
}

// abandon takes back the entries the kernel has not consumed and waits
// for the completions of those it has, so that nothing is left in flight.
func (r *Ring) abandon(n, done, pending int, res []int32, cause syscall.Errno) error {
	atomic.StoreUint32(r.sqTail, atomic.LoadUint32(r.sqHead))
	for want := n - pending; done < want; {
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 0, uintptr(want-done), enterGetEvents, 0, 0)
		if errno != 0 && errno != unix.EINTR {
			return fmt.Errorf("io_uring_enter: %w; then waiting for the sends made: %w", cause, errno)
		}
		done += r.reap(res)
	}
	return fmt.Errorf("io_uring_enter: %w", cause)
}

// reap records the completions posted and returns how many.
func (r *Ring) reap(res []int32) int {
	head, tail := atomic.LoadUint32(r.cqHead), atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := &r.cqes[head&r.cqMask]
		if c.userData < uint64(len(res)) {
			res[c.userData] = c.res
		}
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}

// probe checks, on a pair of connected sockets, that a send completes
// within the submitting call: taken when there is room, refused with
// EAGAIN when the send buffer is full. A kernel that made the second wait
// for room (a send armed to retry) would hold a caller's socket and buffer
// past SendEach's return.
func (r *Ring) probe() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("io_uring probe: socketpair: %w", err)
	}
	defer unix.Close(fds[0])
	defer func() {
		if fds[1] >= 0 {
			unix.Close(fds[1])
		}
	}()
	msg := []byte("probe")
	res := []int32{0}
	if err := r.SendEach([]int32{int32(fds[0])}, msg, res); err != nil {
		return fmt.Errorf("io_uring probe: %w", err)
	}
	if res[0] != int32(len(msg)) {
		return refused(fmt.Errorf("io_uring probe: a send took %d of %d bytes (%v)", res[0], len(msg), errnoOf(res[0])))
	}
	// Fill the send buffer.
	_ = unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
	chunk := make([]byte, 4096)
	for i := 0; ; i++ {
		if i == 4096 {
			return errors.New("io_uring probe: the socket's send buffer never filled")
		}
		if _, err := unix.Write(fds[0], chunk); err == unix.EAGAIN {
			break
		} else if err != nil {
			return fmt.Errorf("io_uring probe: fill: %w", err)
		}
	}
	// One send, submitted without waiting for its completion.
	idx := atomic.LoadUint32(r.sqTail) & r.sqMask
	r.sqes[idx] = sqe{opcode: opSend, fd: int32(fds[0]), addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(msg)))), len: uint32(len(msg)), msgFlags: sendFlags}
	r.array[idx] = idx
	atomic.AddUint32(r.sqTail, 1)
	for {
		got, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
		if errno == 0 && got == 1 {
			break
		}
		if errno != unix.EINTR {
			r.err = fmt.Errorf("io_uring probe: submit: %d submitted, %v", got, errnoOf(-int32(errno)))
			return r.err
		}
	}
	res[0] = 1
	if r.reap(res) == 1 {
		if res[0] != -int32(unix.EAGAIN) {
			return refused(fmt.Errorf("io_uring probe: a send on a full socket returned %d (%v), not EAGAIN", res[0], errnoOf(res[0])))
		}
		runtime.KeepAlive(msg)
		return nil
	}
	// The send waits for room. Closing the peer ends it; wait for that.
	unix.Close(fds[1])
	fds[1] = -1
	for done := 0; done == 0; done = r.reap(res) {
		if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 0, 1, enterGetEvents, 0, 0); errno != 0 && errno != unix.EINTR {
			r.err = fmt.Errorf("io_uring probe: %w", errno)
			return r.err
		}
	}
	runtime.KeepAlive(msg)
	return refused(errors.New("io_uring: a send with MSG_DONTWAIT waits for a full socket on this kernel"))
}

// refused marks err as lasting (errors.ErrUnsupported): io_uring does not
// work here. Other errors of New may pass (descriptors, memory).
func refused(err error) error {
	return fmt.Errorf("%w (%w)", err, errors.ErrUnsupported)
}

// errnoOf names a negated errno result.
func errnoOf(res int32) error {
	if res >= 0 {
		return nil
	}
	return syscall.Errno(-res)
}
