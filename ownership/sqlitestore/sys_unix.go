//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package sqlitestore

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// flock locks are held by an open file description, not by a process: two
// Stores in one process, each with its own open lock file, exclude each
// other just as two processes do; goroutines of one Store share its
// description, which is why the Store adds a semaphore of its own.

func retryEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func pathErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: op, Path: p, Err: err}
}

// tryLock takes an exclusive lock on f without waiting. It reports false
// when another open file description holds it.
func tryLock(f *os.File) (bool, error) {
	err := retryEINTR(func() error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	}
	return false, pathErr("flock", f.Name(), err)
}

// waitLock takes an exclusive lock on f, waiting as long as it takes.
func waitLock(f *os.File) error {
	return pathErr("flock", f.Name(), retryEINTR(func() error { return unix.Flock(int(f.Fd()), unix.LOCK_EX) }))
}

func unlock(f *os.File) error {
	return pathErr("flock unlock", f.Name(), unix.Flock(int(f.Fd()), unix.LOCK_UN))
}

// syncDir flushes the directory dir, making the creation of its entries
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
