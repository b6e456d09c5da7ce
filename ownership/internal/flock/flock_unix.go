//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package flock

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// TryLock takes an exclusive flock on f without waiting. It reports false
// when another open file description holds it.
func TryLock(f *os.File) (bool, error) {
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

// WaitLock takes an exclusive flock on f, waiting as long as it takes.
func WaitLock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		}
		return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
}

// Unlock lets f's flock go.
func Unlock(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
		return &os.PathError{Op: "flock unlock", Path: f.Name(), Err: err}
	}
	return nil
}
