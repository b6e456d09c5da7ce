//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package flock

import (
	"errors"
	"os"
)

// errUnsupported: without flock there is no way to exclude other
// processes, and a store that cannot must not open at all.
var errUnsupported = errors.New("flock: not supported on this platform")

func TryLock(*os.File) (bool, error) { return false, errUnsupported }
func WaitLock(*os.File) error        { return errUnsupported }
func Unlock(*os.File) error          { return errUnsupported }
