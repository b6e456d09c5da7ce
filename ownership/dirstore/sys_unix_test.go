//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package dirstore

import (
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// TestPwriteWritesNothing: a pwrite that writes nothing without an error
// makes pwriteFull fail, rather than retry forever.
func TestPwriteWritesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	fd, err := createNew(p)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	saved := sysPwrite
	sysPwrite = func(int, []byte, int64) (int, error) { return 0, nil }
	done := make(chan error, 1)
	go func() { done <- pwriteFull(fd, p, []byte("x"), 0) }()
	select {
	case err := <-done:
		sysPwrite = saved
		if !errors.Is(err, io.ErrShortWrite) {
			t.Fatalf("pwriteFull: %v, want io.ErrShortWrite", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pwriteFull still retrying a pwrite that writes nothing")
	}
}
