//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package dirstore

import "golang.org/x/sys/unix"

// fdatasync falls back to fsync where x/sys offers no fdatasync.
func fdatasync(fd int, p string) error {
	return wrap("fsync", p, retryEINTR(func() error { return unix.Fsync(fd) }))
}
