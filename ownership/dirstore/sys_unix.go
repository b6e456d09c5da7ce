//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package dirstore

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The store works on raw file descriptors: a Get is an fstat and a pread,
// and going through os.File would add the runtime poller's bookkeeping to
// both. Descriptors are closed only under the Store's mutex (see store.go),
// so none is used after it is closed or its number reused.

func retryEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func pathErr(op, p string, err error) error { return &os.PathError{Op: op, Path: p, Err: err} }

func openFD(p string, flags int, perm uint32) (int, error) {
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Open(p, flags|unix.O_CLOEXEC, perm)
		return err
	})
	if err != nil {
		return -1, pathErr("open", p, err)
	}
	return fd, nil
}

func openRW(p string) (int, error)    { return openFD(p, unix.O_RDWR, 0) }
func createNew(p string) (int, error) { return openFD(p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o666) }
func closeFD(fd int) error            { return unix.Close(fd) }
func dupFD(fd int, p string) (int, error) {
	nfd, err := unix.Dup(fd)
	return nfd, wrap("dup", p, err)
}
func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

func fsync(fd int, p string) error {
	return wrap("fsync", p, retryEINTR(func() error { return unix.Fsync(fd) }))
}

// sysPwrite is the pwrite system call. It is a variable only so that tests
// can make it misbehave; nothing else sets it.
var sysPwrite = unix.Pwrite

func wrap(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return pathErr(op, p, err)
}

// fileState is what an fstat tells a Store about a segment: how long it is,
// and whether it is still linked (a compaction unlinks the segment it
// replaces).
type fileState struct {
	size   int64
	linked bool
	ino    uint64
}

func fstat(fd int, p string) (fileState, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileState{}, pathErr("fstat", p, err)
	}
	return fileState{size: st.Size, linked: st.Nlink > 0, ino: uint64(st.Ino)}, nil
}

// inode returns the inode number of the file p, which names the version of
// a file replaced by rename.
func inode(p string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return 0, pathErr("stat", p, err)
	}
	return uint64(st.Ino), nil
}

// pread reads len(buf) bytes at off, or fewer if the file ends first, and
// returns how many it read.
func pread(fd int, p string, buf []byte, off int64) (int, error) {
	done := 0
	for done < len(buf) {
		var n int
		err := retryEINTR(func() (err error) {
			n, err = unix.Pread(fd, buf[done:], off+int64(done))
			return err
		})
		if err != nil {
			return done, pathErr("pread", p, err)
		}
		if n == 0 {
			break
		}
		done += n
	}
	return done, nil
}

// preadFull reads len(buf) bytes at off. It reports errShortFile (wrapped)
// if the file ends first.
func preadFull(fd int, p string, buf []byte, off int64) error {
	n, err := pread(fd, p, buf, off)
	if err == nil && n < len(buf) {
		err = pathErr("pread", p, errShortFile)
	}
	return err
}

// pwriteFull writes buf at off. A pwrite that writes nothing and reports
// no error (which POSIX allows only for an empty buffer) fails with
// io.ErrShortWrite rather than being retried forever.
func pwriteFull(fd int, p string, buf []byte, off int64) error {
	for len(buf) > 0 {
		var n int
		err := retryEINTR(func() (err error) {
			n, err = sysPwrite(fd, buf, off)
			return err
		})
		if err != nil {
			return pathErr("pwrite", p, err)
		}
		if n <= 0 {
			return pathErr("pwrite", p, io.ErrShortWrite)
		}
		buf, off = buf[n:], off+int64(n)
	}
	return nil
}

func ftruncate(fd int, p string, size int64) error {
	return wrap("ftruncate", p, retryEINTR(func() error { return unix.Ftruncate(fd, size) }))
}

// syncDir flushes the directory dir, making the creation, removal or
// renaming of its entries durable.
func syncDir(dir string) error {
	fd, err := openFD(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	err = dirsync(fd, dir)
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = pathErr("close", dir, cerr)
	}
	return err
}

// flock locks are held by an open file description, not by a process: two
// Stores in one process, each with its own open lock file, exclude each
// other just as two processes do; goroutines of one Store share its
// description, which is why the Store adds a semaphore of its own.
//
// Invariant: the directory is on a local file system (see doc.go).
