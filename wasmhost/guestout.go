package wasmhost

import (
	"bytes"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxGuestOut bounds what the host keeps of a guest's stdout and stderr
// between two looks: the first half of it and the last half, since a
// panic's message opens what a guest writes before it dies (a Go guest's
// "panic: ..." or "fatal error: out of memory", then its stack) and the
// last lines are where it stopped.
const maxGuestOut = 4 << 10

// guestOut is what one guest writes to stdout and stderr (println, a Go
// guest's panic message and stack, a C guest's fprintf), of which it keeps
// the first and the last maxGuestOut/2 bytes until the host takes them:
// after each event (logged, with the actor's class and name) and when the
// guest fails (logged with the failure). A guest writes from the goroutine
// that runs its event; the host takes from the same one, or after it.
type guestOut struct {
	any     atomic.Bool // something was written since the last take: the usual event, which writes nothing, takes no lock
	mu      sync.Mutex
	head    []byte // the first bytes, up to maxGuestOut/2
	tail    []byte // the last bytes after head, up to maxGuestOut/2
	dropped int    // bytes between head and tail, not kept
}

func (o *guestOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.any.Store(true)
	n := len(p)
	const half = maxGuestOut / 2
	if room := half - len(o.head); room > 0 {
		k := min(room, len(p))
		o.head = append(o.head, p[:k]...)
		p = p[k:]
	}
	if len(p) >= half {
		o.dropped += len(o.tail) + len(p) - half
		o.tail = append(o.tail[:0], p[len(p)-half:]...)
		return n, nil
	}
	if over := len(o.tail) + len(p) - half; over > 0 {
		o.dropped += over
		o.tail = append(o.tail[:0], o.tail[over:]...)
	}
	o.tail = append(o.tail, p...)
	return n, nil
}

// take returns what was written since the last take ("" if nothing), the
// bytes dropped from its middle marked, and forgets it.
func (o *guestOut) take() string {
	if o == nil || !o.any.Load() {
		return ""
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.any.Store(false)
	var b bytes.Buffer
	b.Write(o.head)
	if o.dropped > 0 {
		b.WriteString("\n[" + strconv.Itoa(o.dropped) + " bytes not kept]\n")
	}
	b.Write(o.tail)
	o.head, o.tail, o.dropped = o.head[:0], o.tail[:0], 0
	return string(bytes.TrimRight(b.Bytes(), "\n"))
}

// outLimit spaces the log lines of one module's guests' output: at most
// outBurst a second, the rest counted and said with the next line.
type outLimit struct {
	sec     atomic.Int64 // the second of the lines counted in n
	n       atomic.Int64
	skipped atomic.Int64
}

const outBurst = 10

// allow says whether a line may be logged now, and how many were skipped
// before it.
func (l *outLimit) allow(now time.Time) (bool, int64) {
	sec := now.Unix()
	if l.sec.Swap(sec) != sec {
		l.n.Store(0)
	}
	if l.n.Add(1) > outBurst {
		l.skipped.Add(1)
		return false, 0
	}
	return true, l.skipped.Swap(0)
}

// logOut logs what the guest wrote during an event of ref, if anything,
// at most outBurst lines a second per module.
func (m *Module) logOut(out *guestOut, ref *actorRef) {
	text := out.take()
	if text == "" {
		return
	}
	ok, skipped := m.outLimit.allow(time.Now())
	if !ok {
		return
	}
	attrs := []any{slog.String("output", text)}
	if skipped > 0 {
		attrs = append(attrs, slog.Int64("lines_skipped", skipped))
	}
	ref.logger().Info("guest output", attrs...)
}
