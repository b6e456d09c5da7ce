package sockets

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wasmkeep/wasmkeep/internal/uring"
)

// TestCloseWaitsForDirectWrite: closing a connection waits while a direct
// write holds its descriptor, so that the number cannot be reused by
// another connection under the write; once closed, no direct write
// starts.
func TestCloseWaitsForDirectWrite(t *testing.T) {
	e := newEnv(t, Config{})
	_, id := e.dial(room)
	s, err := e.o.lookup(room, id)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := unix.Getpeername(int(s.wc.fd))
	if err != nil {
		t.Fatal(err)
	}
	if !s.wc.claim() {
		t.Fatal("an idle connection cannot be claimed")
	}
	closed := make(chan error, 1)
	go func() { closed <- s.wc.Close() }()
	// Once Close waits for the claim, no other claim can start.
	deadline := time.Now().Add(wait)
	for s.wc.closeMu.TryRLock() {
		s.wc.closeMu.RUnlock()
		if time.Now().After(deadline) {
			t.Fatal("Close never waited")
		}
		runtime.Gosched()
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a direct write held the descriptor", err)
	default:
	}
	if now, err := unix.Getpeername(int(s.wc.fd)); err != nil || fmt.Sprint(now) != fmt.Sprint(peer) {
		t.Fatalf("the descriptor under the claim is no longer the connection's: %v, %v", now, err)
	}
	if _, err := s.wc.wrote(nil, 0); !errors.Is(err, errNoDirect) {
		t.Fatalf("wrote(nil, 0) = %v, want errNoDirect", err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("Close did not return once the claim ended")
	}
	if s.wc.claim() {
		t.Fatal("a closed connection was claimed")
	}
}

// syncBuffer is a log destination for tests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRings: rings are made as broadcasts need them, at most max, and
// reused; a ring that fails is closed and none is made for a while; a
// refusal of io_uring ends their use, logged once; turned off, none is
// made.
func TestRings(t *testing.T) {
	probe, err := uring.New(1)
	if errors.Is(err, errors.ErrUnsupported) && os.Getenv("WASMKEEP_REQUIRE_IO_URING") != "1" {
		t.Skipf("io_uring refused here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	probe.Close()
	var logs syncBuffer
	r := newRings(false, slog.New(slog.NewTextHandler(&logs, nil)))
	r.max = 2
	a, b := r.get(), r.get()
	if a == nil || b == nil {
		t.Fatalf("rings %v, %v (%v)", a, b, r.off)
	}
	if c := r.get(); c != nil {
		t.Fatal("a third ring past max")
	}
	r.put(a, nil)
	if c := r.get(); c != a {
		t.Fatal("a free ring was not reused")
	}
	r.put(a, nil)

	r.put(b, errors.New("ring broke"))
	if got := r.get(); got != a {
		t.Fatal("the ring left was not used after another failed")
	}
	if got := r.get(); got != nil {
		t.Fatal("a new ring right after one failed")
	}
	r.put(a, nil)
	if r.made != 1 || !strings.Contains(logs.String(), "ring broke") {
		t.Fatalf("after a failure: %d made, logs:\n%s", r.made, logs.String())
	}
	r.retryAt = time.Time{} // as if the wait had passed
	a, b = r.get(), r.get()
	if a == nil || b == nil || b == a {
		t.Fatal("no new ring once the wait passed")
	}
	r.put(a, nil)
	r.put(b, errors.New("ring broke")) // the same failure again: not logged again
	if got := strings.Count(logs.String(), "ring broke"); got != 1 {
		t.Fatalf("the same failure was logged %d times, want once:\n%s", got, logs.String())
	}

	r.put(r.get(), fmt.Errorf("refused: %w", errors.ErrUnsupported))
	if r.get() != nil || r.made != 0 || len(r.free) != 0 {
		t.Fatalf("after a refusal: %d made, %d free; want none and no ring", r.made, len(r.free))
	}
	if got := strings.Count(logs.String(), "refused"); got != 1 {
		t.Fatalf("the refusal was logged %d times, want once:\n%s", got, logs.String())
	}

	off := newRings(true, slog.New(slog.NewTextHandler(&logs, nil)))
	if off.get() != nil {
		t.Fatal("a ring while turned off")
	}
	on := newRings(false, slog.New(slog.DiscardHandler))
	first, second := on.get(), on.get()
	on.put(first, nil)
	on.close()
	on.put(second, nil) // given back after close: closed
	if on.get() != nil || len(on.free) != 0 || on.made != 0 {
		t.Fatalf("rings after close: %d made, %d free", on.made, len(on.free))
	}
}
