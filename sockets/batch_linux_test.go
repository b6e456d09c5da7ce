package sockets

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/wasmkeep/wasmkeep/internal/uring"
)

// TestCloseWaitsForDirectWrite: closing a connection waits while a direct
// write holds its descriptor, so that the number cannot be reused by
// another connection under the write; once closed, no direct write
// starts.
func TestCloseWaitsForDirectWrite(t *testing.T) {
	waits := make(chan struct{}, 1)
	closeWaits = func() {
		select {
		case waits <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { closeWaits = nil }) // after the env's, which waits for every socket's goroutines
	e := newEnv(t, Config{})
	_, id := e.dial(room)
	s, err := e.o.lookup(room, id)
	require.NoError(t, err)
	peer, err := unix.Getpeername(int(s.wc.fd))
	require.NoError(t, err)
	require.True(t, s.wc.claim(), "an idle connection cannot be claimed")
	closed := make(chan error, 1)
	go func() { closed <- s.wc.Close() }()
	select {
	case <-waits:
	case <-time.After(wait):
		t.Fatal("Close never waited for the direct write")
	}
	// Close waits for closeMu, which the claim holds until wrote.
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a direct write held the descriptor", err)
	default:
	}
	now, err := unix.Getpeername(int(s.wc.fd))
	require.NoError(t, err, "the descriptor under the claim is no longer the connection's")
	require.Equal(t, fmt.Sprint(peer), fmt.Sprint(now), "the descriptor under the claim is no longer the connection's")
	_, err = s.wc.wrote(nil, 0)
	require.ErrorIs(t, err, errNoDirect)
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("Close did not return once the claim ended")
	}
	require.False(t, s.wc.claim(), "a closed connection was claimed")
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
