package uring

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestLayout(t *testing.T) {
	if got := unsafe.Sizeof(sqe{}); got != 64 {
		t.Errorf("sqe is %d bytes, the kernel's 64", got)
	}
	if got := unsafe.Sizeof(cqe{}); got != 16 {
		t.Errorf("cqe is %d bytes, the kernel's 16", got)
	}
	if got := unsafe.Sizeof(params{}); got != 120 {
		t.Errorf("params is %d bytes, the kernel's 120", got)
	}
}

// pairs makes n connected non-blocking socket pairs: the first of each
// is sent on, the second read.
func pairs(t *testing.T, n int) (send, recv []int) {
	t.Helper()
	for range n {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
		send, recv = append(send, fds[0]), append(recv, fds[1])
	}
	return send, recv
}

func fds32(fds []int) []int32 {
	out := make([]int32, len(fds))
	for i, fd := range fds {
		out[i] = int32(fd)
	}
	return out
}

// newRing makes a ring, or skips the test where io_uring is refused,
// unless WASMKEEP_REQUIRE_IO_URING=1 (CI sets it).
func newRing(t testing.TB, entries int) *Ring {
	t.Helper()
	r, err := New(entries)
	if errors.Is(err, errors.ErrUnsupported) && os.Getenv("WASMKEEP_REQUIRE_IO_URING") != "1" {
		t.Skipf("io_uring refused here: %v", err)
	}
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// readAll reads what fd holds now.
func readAll(t *testing.T, fd int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EAGAIN || n == 0 {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:n]...)
	}
}

// fill writes to fd until its send buffer is full.
func fill(t *testing.T, fd int) {
	t.Helper()
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1024)
	for i := 0; i < 10000; i++ {
		if _, err := unix.Write(fd, chunk); err == unix.EAGAIN {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("send buffer never filled")
}

// within runs f and fails the test if it has not returned in 10 s: a
// send that waits would hang the caller.
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("SendEach did not return: a send waited")
	}
}

func TestSendEachDeliversToEverySocket(t *testing.T) {
	r := newRing(t, 64)
	if r.Entries() != 64 {
		t.Fatalf("Entries() = %d, want 64", r.Entries())
	}
	send, recv := pairs(t, 150) // three submissions
	msg := []byte("\x81\x05hello")
	for round := range 3 {
		res := make([]int32, len(send))
		if err := r.SendEach(fds32(send), msg, res); err != nil {
			t.Fatal(err)
		}
		for i, n := range res {
			if n != int32(len(msg)) {
				t.Fatalf("round %d socket %d: result %d, want %d", round, i, n, len(msg))
			}
		}
	}
	want := bytes.Repeat(msg, 3)
	for i, fd := range recv {
		if got := readAll(t, fd); !bytes.Equal(got, want) {
			t.Fatalf("socket %d got %q, want %q", i, got, want)
		}
	}
}

func TestSendEachDoesNotWaitForAFullSocket(t *testing.T) {
	r := newRing(t, 8)
	send, recv := pairs(t, 3)
	fill(t, send[1])
	res := make([]int32, 3)
	msg := []byte("after")
	within(t, func() {
		if err := r.SendEach(fds32(send), msg, res); err != nil {
			t.Error(err)
		}
	})
	if res[0] != 5 || res[2] != 5 {
		t.Errorf("the sockets with room took %d and %d bytes, want 5 each", res[0], res[2])
	}
	if res[1] != -int32(unix.EAGAIN) {
		t.Errorf("the full socket's result is %d, want -EAGAIN", res[1])
	}
	if got := readAll(t, recv[2]); string(got) != "after" {
		t.Errorf("socket 2 got %q", got)
	}
}

func TestSendEachTakesWhatFits(t *testing.T) {
	r := newRing(t, 8)
	send, recv := pairs(t, 1)
	fill(t, send[0])
	readAll(t, recv[0]) // room again, for less than the message below
	if err := unix.SetsockoptInt(send[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16)
	res := []int32{0}
	within(t, func() {
		if err := r.SendEach(fds32(send), msg, res); err != nil {
			t.Error(err)
		}
	})
	if res[0] <= 0 || res[0] >= int32(len(msg)) {
		t.Fatalf("result %d, want a part of %d bytes", res[0], len(msg))
	}
	var got []byte
	for len(got) < int(res[0]) {
		b := readAll(t, recv[0])
		if len(b) == 0 {
			break
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, msg[:res[0]]) {
		t.Fatalf("read %d bytes that are not the first %d of the message", len(got), res[0])
	}
}

func TestSendEachReportsEachSocketsError(t *testing.T) {
	r := newRing(t, 8)
	send, recv := pairs(t, 3)
	unix.Close(recv[0]) // its peer is gone
	fds := fds32(send)
	fds = append(fds, -1) // not a descriptor
	res := make([]int32, len(fds))
	if err := r.SendEach(fds, []byte("x"), res); err != nil {
		t.Fatal(err)
	}
	if res[0] != -int32(unix.EPIPE) {
		t.Errorf("socket without peer: %d, want -EPIPE", res[0])
	}
	if res[3] != -int32(unix.EBADF) {
		t.Errorf("fd -1: %d, want -EBADF", res[3])
	}
	if res[1] != 1 || res[2] != 1 {
		t.Errorf("the good sockets: %d and %d, want 1", res[1], res[2])
	}
	for _, fd := range recv[1:] {
		if got := readAll(t, fd); string(got) != "x" {
			t.Errorf("got %q", got)
		}
	}
}

func TestSendEachEdges(t *testing.T) {
	r := newRing(t, 4)
	send, _ := pairs(t, 2)
	if err := r.SendEach(fds32(send), []byte("x"), make([]int32, 1)); err == nil {
		t.Error("results shorter than sockets: no error")
	}
	res := []int32{7, 7}
	if err := r.SendEach(fds32(send), nil, res); err != nil || res[0] != 0 || res[1] != 0 {
		t.Errorf("empty message: %v, %v; want no error, 0 each", err, res)
	}
	if err := r.SendEach(nil, []byte("x"), nil); err != nil {
		t.Errorf("no sockets: %v", err)
	}
	r.Close()
	if err := r.SendEach(fds32(send), []byte("x"), res); err == nil {
		t.Error("closed ring: no error")
	}
	if res[0] != -int32(unix.ECANCELED) || res[1] != -int32(unix.ECANCELED) {
		t.Errorf("closed ring: results %v, want -ECANCELED each", res)
	}
	if _, err := New(0); err == nil {
		t.Error("New(0): no error")
	}
	if _, err := New(MaxEntries + 1); err == nil {
		t.Error("New(MaxEntries+1): no error")
	}
}

func BenchmarkSendEach(b *testing.B) {
	const sockets = 100
	r := newRing(b, 128)
	var send, recv []int
	for range sockets {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		send, recv = append(send, fds[0]), append(recv, fds[1])
	}
	msg := []byte("\x81\x10broadcast 16 byt")
	res := make([]int32, sockets)
	fds := fds32(send)
	buf := make([]byte, 4096)
	drain := func() {
		for _, fd := range recv {
			for {
				if n, _ := unix.Read(fd, buf); n <= 0 {
					break
				}
			}
		}
	}
	b.Run("uring", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := r.SendEach(fds, msg, res); err != nil {
				b.Fatal(err)
			}
			if i%16 == 15 {
				drain()
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*sockets), "ns/send")
	})
	drain()
	b.Run("write", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			for _, fd := range send {
				if _, err := unix.Write(fd, msg); err != nil {
					b.Fatal(err)
				}
			}
			if i%16 == 15 {
				drain()
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*sockets), "ns/send")
	})
}
