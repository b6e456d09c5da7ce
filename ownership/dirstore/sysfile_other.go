//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package dirstore

import (
	"io"
	"os"
)

// Portable versions of sysfile_unix.go, for platforms where Open fails
// anyway (no flock); they keep the package building.

func readFile(p string, max int) ([]byte, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	n := fi.Size()
	if max >= 0 && int64(max) < n {
		n = int64(max)
	}
	buf := make([]byte, n)
	m, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, 0, err
	}
	return buf[:m], fi.Size(), nil
}

func writeFileSync(p string, chunks ...[]byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		if _, err := f.Write(c); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

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

// holdOpen opens the file p, if it exists, and returns a function that
// closes it (nil if p could not be opened); see sysfile_unix.go.
func holdOpen(p string) (release func()) {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	return func() { f.Close() }
}
