//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package dirstore

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// The store's hot paths open, read or write, and close a file in one go.
// Going through os.File costs five extra system calls per file on Linux
// (the runtime tries, and fails, to register a regular file with its
// poller), about doubling the cost of a Get; these helpers make the
// system calls directly.

func retryEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func openFD(p string, flags int, perm uint32) (int, error) {
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = unix.Open(p, flags|unix.O_CLOEXEC, perm)
		return err
	})
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// readFile reads the file p, or only its first max bytes if max >= 0,
// and returns what it read and the file's size.
func readFile(p string, max int) ([]byte, int64, error) {
	fd, err := openFD(p, unix.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, &os.PathError{Op: "fstat", Path: p, Err: err}
	}
	n := int(st.Size)
	if max >= 0 && max < n {
		n = max
	}
	buf := make([]byte, n)
	for off := 0; off < n; {
		var m int
		err := retryEINTR(func() (err error) {
			m, err = unix.Read(fd, buf[off:])
			return err
		})
		if err != nil {
			return nil, 0, &os.PathError{Op: "read", Path: p, Err: err}
		}
		if m == 0 {
			// Invariant: object files are never truncated in place, so
			// this is damage, which the caller's parsing reports.
			return buf[:off], st.Size, nil
		}
		off += m
	}
	return buf, st.Size, nil
}

// writeFileSync creates the file p, which must not exist, writes the
// chunks to it and fsyncs it.
func writeFileSync(p string, chunks ...[]byte) error {
	fd, err := openFD(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o666)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		for len(c) > 0 {
			var m int
			err := retryEINTR(func() (err error) {
				m, err = unix.Write(fd, c)
				return err
			})
			if err != nil {
				unix.Close(fd)
				return &os.PathError{Op: "write", Path: p, Err: err}
			}
			c = c[m:]
		}
	}
	// fdatasync persists the data and the metadata needed to read it back
	// (size, blocks), not the timestamps: all a temp file needs before its
	// rename, and one journal write less.
	if err := retryEINTR(func() error { return unix.Fdatasync(fd) }); err != nil {
		unix.Close(fd)
		return &os.PathError{Op: "fdatasync", Path: p, Err: err}
	}
	if err := unix.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: p, Err: err}
	}
	return nil
}

// syncDir fsyncs the directory dir, making the creation, removal or
// renaming of its entries durable.
func syncDir(dir string) error {
	fd, err := openFD(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	err = retryEINTR(func() error { return unix.Fsync(fd) })
	cerr := unix.Close(fd)
	if err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	if cerr != nil {
		return &os.PathError{Op: "close", Path: dir, Err: cerr}
	}
	return nil
}

// holdOpen opens the file p, if it exists, and returns a function that
// closes it (nil if p could not be opened). While it is open, a rename
// over p does not free p's inode: that work (a few hundred microseconds on
// ext4) moves from the rename, done under the store's lock, to the close.
func holdOpen(p string) (release func()) {
	fd, err := openFD(p, unix.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	return func() { unix.Close(fd) }
}
