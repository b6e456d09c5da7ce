//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package dirstore

import (
	"errors"
	"os"
)

// Without flock there is no way to exclude other processes, and a store
// that cannot do that must not open at all.
var errNoLocking = errors.New("file locking is not supported on this platform")

func tryLock(*os.File) (bool, error) { return false, errNoLocking }

func waitLock(*os.File) error { return errNoLocking }

func unlock(*os.File) error { return errNoLocking }
