package dirstore

import "golang.org/x/sys/unix"

// fdatasync persists a file's data and the metadata needed to read it
// back (its size), not its timestamps: one journal write less than fsync.
func fdatasync(fd int, p string) error {
	return wrap("fdatasync", p, retryEINTR(func() error { return unix.Fdatasync(fd) }))
}

// dirsync flushes an open directory.
func dirsync(fd int, p string) error { return fsync(fd, p) }
