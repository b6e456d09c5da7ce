package sockets

import (
	"bytes"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	if now, err := unix.Getpeername(int(s.wc.fd)); err != nil || now.(*unix.SockaddrInet4).Port != peer.(*unix.SockaddrInet4).Port {
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

// TestRings: rings are made as broadcasts need them, at most max, reused;
// a ring's failure ends their use, logged once; turned off, none is made.
func TestRings(t *testing.T) {
	var logs syncBuffer
	r := newRings(false, slog.New(slog.NewTextHandler(&logs, nil)))
	r.max = 2
	a, b := r.get(), r.get()
	if a == nil || b == nil {
		t.Fatalf("rings %v, %v: io_uring is required on Linux (%v)", a, b, r.off)
	}
	if c := r.get(); c != nil {
		t.Fatal("a third ring past max")
	}
	r.put(a, nil)
	if c := r.get(); c != a {
		t.Fatal("a free ring was not reused")
	}
	r.put(a, nil)
	r.put(b, errors.New("ring failed"))
	if r.get() != nil {
		t.Fatal("a ring after a ring failed")
	}
	if r.made != 0 || len(r.free) != 0 {
		t.Fatalf("after the failure: %d made, %d free; want none", r.made, len(r.free))
	}
	if got := strings.Count(logs.String(), "ring failed"); got != 1 {
		t.Fatalf("the failure was logged %d times, want once:\n%s", got, logs.String())
	}

	off := newRings(true, slog.New(slog.NewTextHandler(&logs, nil)))
	if off.get() != nil {
		t.Fatal("a ring while turned off")
	}
	on := newRings(false, slog.New(slog.DiscardHandler))
	ring := on.get()
	on.put(ring, nil)
	on.close()
	if on.get() != nil || len(on.free) != 0 {
		t.Fatal("rings after close")
	}
}
