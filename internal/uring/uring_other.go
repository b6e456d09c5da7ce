//go:build !linux

package uring

import (
	"errors"
	"fmt"
	"runtime"
)

// Ring is Linux's; elsewhere New always fails.
type Ring struct{}

// MaxEntries bounds the sends one submission holds.
const MaxEntries = 4096

// New fails: io_uring is Linux's.
func New(int) (*Ring, error) {
	return nil, fmt.Errorf("io_uring on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// SendEach is never reached: New returns no Ring.
func (*Ring) SendEach([]int32, []byte, []int32) error { return errors.ErrUnsupported }

// Entries is never reached.
func (*Ring) Entries() int { return 0 }

// Close is never reached.
func (*Ring) Close() error { return nil }
