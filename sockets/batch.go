package sockets

import (
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/uring"
)

// Broadcasts in one system call. A broadcast's frame is the same bytes
// for every socket (a server's frames are not masked), so Broadcast
// builds it once and writes it directly (direct.go) to every socket that
// has nothing queued: through an io_uring, one submission for up to
// ringEntries sockets, where one write(2) per socket made the kernel's
// entries and exits most of the node's CPU in a broadcast. Each socket
// takes what its send buffer has room for, as with write(2); the rest
// goes the usual way. Where io_uring is not available (package uring says
// why, and the Owner logs it once), or Config.NoIOUring, each socket is
// written with its own write(2).

// ringEntries is how many sends one submission holds.
const ringEntries = 256

// ringRetry is how long after a ring failed, or could not be made, for a
// reason that may pass (a descriptor or memory limit), no new one is made.
const ringRetry = time.Minute

// rings keeps the io_uring rings of an Owner: one per broadcast under
// way, made when first needed, at most max. A broadcast that finds none
// free writes each socket itself.
type rings struct {
	log *slog.Logger
	max int

	mu      sync.Mutex
	free    []*uring.Ring
	made    int
	off     error     // why no ring is used any more: io_uring refused here, or shut down
	retryAt time.Time // no new ring before then
	failed  string    // the last passing failure logged
}

func newRings(disabled bool, log *slog.Logger) *rings {
	r := &rings{log: log, max: max(2, runtime.GOMAXPROCS(0))}
	if disabled {
		r.off = errors.New("io_uring turned off")
	}
	return r
}

// get returns a ring for one broadcast, or nil.
func (r *rings) get() *uring.Ring {
	r.mu.Lock()
	if r.off != nil {
		r.mu.Unlock()
		return nil
	}
	if n := len(r.free); n > 0 {
		ring := r.free[n-1]
		r.free = r.free[:n-1]
		r.mu.Unlock()
		return ring
	}
	if r.made == r.max || time.Now().Before(r.retryAt) {
		r.mu.Unlock()
		return nil
	}
	r.made++
	r.mu.Unlock()
	ring, err := uring.New(ringEntries)
	if err != nil {
		r.put(nil, err)
		return nil
	}
	return ring
}

// put returns a ring after its broadcast; err is its failure (or
// uring.New's, with no ring). A refusal of io_uring ends the use of rings;
// another failure waits ringRetry before a new ring is made.
func (r *rings) put(ring *uring.Ring, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && r.off == nil {
		r.free = append(r.free, ring)
		return
	}
	if ring != nil {
		ring.Close()
	}
	r.made-- // closed, or never made
	switch {
	case err == nil: // shut down meanwhile
	case errors.Is(err, errors.ErrUnsupported):
		if r.off == nil {
			r.off = err
			r.log.Info("broadcasts write each socket with its own write(2)", slog.String("reason", err.Error()))
			r.closeFreeLocked()
		}
	case err.Error() == r.failed:
		r.retryAt = time.Now().Add(ringRetry) // logged already
	default:
		r.retryAt = time.Now().Add(ringRetry)
		r.failed = err.Error()
		r.log.Warn("io_uring ring failed; broadcasts beyond the rings left write each socket with its own write(2) for a while",
			slog.String("error", err.Error()), slog.Int("rings", r.made), slog.Duration("retry_in", ringRetry))
	}
}

// drop closes a ring that a broadcast held when it failed: what the ring
// was doing is not known.
func (r *rings) drop(ring *uring.Ring) {
	ring.Close()
	r.mu.Lock()
	r.made--
	r.mu.Unlock()
}

// close ends the use of rings (Shutdown).
func (r *rings) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.off == nil {
		r.off = errors.New("socket owner shut down")
	}
	r.closeFreeLocked()
}

func (r *rings) closeFreeLocked() {
	for _, ring := range r.free {
		ring.Close()
		r.made--
	}
	r.free = nil
}

// batch is a broadcast's scratch space, reused.
type batch struct {
	direct    []*socket // claimed for a direct write, connections too
	unclaimed []*socket // claimed, but not their connections: queued
	queue     []*socket // sent the usual way after the direct writes
	fds       []int32
	res       []int32
	rest      []int
	errs      []error
	// ring: the broadcast's, until given back. ended: the claims of
	// direct's connections ended (wireConn.wrote), in order; settled: the
	// claims of direct's, then unclaimed's, sockets ended (directDone).
	// What a broadcast that fails midway still holds (abandon).
	ring           *uring.Ring
	ended, settled int
}

var batches = sync.Pool{New: func() any { return new(batch) }}

func (b *batch) reset() {
	clear(b.direct)
	clear(b.unclaimed)
	clear(b.queue)
	clear(b.errs)
	b.direct, b.unclaimed, b.queue = b.direct[:0], b.unclaimed[:0], b.queue[:0]
	b.fds, b.res, b.rest, b.errs = b.fds[:0], b.res[:0], b.rest[:0], b.errs[:0]
	b.ring, b.ended, b.settled = nil, 0, 0
}

// abandon ends what a broadcast that failed midway still holds: its ring
// (closed), and the claims it has not ended, writing nothing, so that the
// closes of the failure do not wait for them. What a socket had queued
// meanwhile gets a writer.
func (o *Owner) abandon(b *batch) {
	if b.ring != nil {
		o.rings.drop(b.ring)
		b.ring = nil
	}
	for _, s := range b.direct[b.ended:] {
		_, _ = s.wc.wrote(nil, 0)
	}
	b.ended = len(b.direct)
	for i := b.settled; i < len(b.direct)+len(b.unclaimed); i++ {
		var s *socket
		if i < len(b.direct) {
			s = b.direct[i]
		} else {
			s = b.unclaimed[i-len(b.direct)]
		}
		s.mu.Lock()
		s.writing = false
		if len(s.queue) > 0 {
			s.startWriterLocked()
		}
		s.mu.Unlock()
	}
	b.settled = len(b.direct) + len(b.unclaimed)
}

// writeDirect writes one data frame of data to every socket of b.direct,
// each claimed for a direct write (socket.claimDirect, then
// wireConn.claim), through b.ring if there is one (and gives it back),
// and ends each claim: what a socket's send buffer did not take is
// written later, or queued. It returns how many sockets were sent the
// message or have it queued.
func (o *Owner) writeDirect(b *batch, kind frameKind, data []byte) int {
	ring := b.ring
	if len(b.direct) == 0 {
		if ring != nil {
			b.ring = nil
			o.rings.put(ring, nil)
		}
		return 0
	}
	buf := directBuffers.Get().(*[]byte)
	defer directBuffers.Put(buf)
	f := appendFrame((*buf)[:0], kind, data)
	*buf = f[:0]
	for _, s := range b.direct {
		b.fds = append(b.fds, s.wc.fd)
		b.res = append(b.res, 0)
		b.rest = append(b.rest, 0)
		b.errs = append(b.errs, nil)
	}
	if ring != nil {
		err := ring.SendEach(b.fds, f, b.res)
		b.ring = nil
		o.rings.put(ring, err)
		o.m.uringWrites.Add(float64(len(b.fds)))
	} else {
		for i, fd := range b.fds {
			b.res[i] = int32(writeFD(fd, f))
		}
		o.m.eachWrites.Add(float64(len(b.fds)))
	}
	// Every claim ends before any socket's queueing, which may call the
	// Sink (a full queue closes its socket).
	for i, s := range b.direct {
		b.rest[i], b.errs[i] = s.wc.wrote(f, int(b.res[i]))
		b.ended++
	}
	sent := 0
	for i, s := range b.direct {
		if s.directDone(kind, data, b.rest[i], b.errs[i]) == nil {
			sent++
		}
		b.settled++
	}
	return sent
}
