//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package dirstore

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// flock locks are held by an open file description, not by a process: two
// Stores in one process, each with its own open lock file, exclude each
// other just as two processes do. That is what lets tests race Stores in
// one process, and what makes the in-process mutex necessary (goroutines
// of one Store share its description, so flock alone would let them all
// in).
//
// Invariant: a lock is only ever taken on a local file system; flock over
// NFS degrades to per-process locks on some systems (see doc.go).

// tryLock takes an exclusive lock on f without waiting. It reports false
// when another open file description holds the lock.
func tryLock(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, unix.EINTR):
			continue
		}
		return false, &os.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
}

// waitLock takes an exclusive lock on f, waiting as long as it takes. The
// Go runtime's preemption signals interrupt the wait with EINTR; that is
// not an error.
func waitLock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINTR) {
			return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
	}
}

func unlock(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
		return &os.PathError{Op: "flock unlock", Path: f.Name(), Err: err}
	}
	return nil
}
