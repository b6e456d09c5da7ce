//go:build dragonfly || freebsd || netbsd || openbsd

package dirstore

// fdatasync falls back to fsync where x/sys offers no fdatasync.
func fdatasync(fd int, p string) error { return fsync(fd, p) }

// dirsync flushes an open directory.
func dirsync(fd int, p string) error { return fsync(fd, p) }
