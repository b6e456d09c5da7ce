//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package s3test

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on path, waiting for any other
// holder (another test binary, or `flock` in scripts/versitygw.sh). The lock
// dies with the process, so a crashed build never wedges the cache.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
