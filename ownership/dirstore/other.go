//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package dirstore

import (
	"errors"
	"os"
)

// Without flock there is no way to exclude other processes, and a store
// that cannot do that must not open at all: every call below fails, and
// so does Open.
var errUnsupported = errors.New("dirstore: not supported on this platform (no flock, pread or fdatasync)")

type fileState struct {
	size   int64
	linked bool
	ino    uint64
}

func openFD(string, int, uint32) (int, error)       { return -1, errUnsupported }
func openRW(string) (int, error)                    { return -1, errUnsupported }
func createNew(string) (int, error)                 { return -1, errUnsupported }
func closeFD(int) error                             { return errUnsupported }
func isNotExist(err error) bool                     { return errors.Is(err, os.ErrNotExist) }
func dupFD(int, string) (int, error)                { return 0, errUnsupported }
func fdatasync(int, string) error                   { return errUnsupported }
func fstat(int, string) (fileState, error)          { return fileState{}, errUnsupported }
func inode(string) (uint64, error)                  { return 0, errUnsupported }
func preadFull(int, string, []byte, int64) error    { return errUnsupported }
func pread(int, string, []byte, int64) (int, error) { return 0, errUnsupported }
func pwriteFull(int, string, []byte, int64) error   { return errUnsupported }
func ftruncate(int, string, int64) error            { return errUnsupported }
func syncDir(string) error                          { return errUnsupported }
func pathErr(op, p string, err error) error         { return &os.PathError{Op: op, Path: p, Err: err} }
