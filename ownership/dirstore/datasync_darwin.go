package dirstore

import (
	"errors"

	"golang.org/x/sys/unix"
)

// On darwin, fsync hands the data to the drive but does not make the drive
// write it out of its cache, so a power loss can still undo a write that
// fsync reported durable; fcntl F_FULLFSYNC does. Segments and directories
// are both flushed with it.

// fdatasync makes a file's data durable with F_FULLFSYNC.
func fdatasync(fd int, p string) error { return fullFsync(fd, p) }

// dirsync flushes an open directory with F_FULLFSYNC.
func dirsync(fd int, p string) error { return fullFsync(fd, p) }

// fullFsync issues F_FULLFSYNC, and falls back to fsync on file systems
// that do not support it (ENOTSUP, or EINVAL from some that reject the
// request outright).
func fullFsync(fd int, p string) error {
	err := retryEINTR(func() error {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_FULLFSYNC, 0)
		return err
	})
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EINVAL) {
		return fsync(fd, p)
	}
	return wrap("fcntl F_FULLFSYNC", p, err)
}
