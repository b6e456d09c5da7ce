package dirstore

import (
	"context"
	"fmt"

	"github.com/wasmkeep/wasmkeep/ownership/internal/flock"
)

// The store's flocks, as every embedded store takes them (package flock).
var (
	tryLock = flock.TryLock
	unlock  = flock.Unlock
)

// Claim takes the claim on name beside the store, without waiting: free
// is false while another open file description holds it (another process,
// or another claim of this one). The claim is held until release is called
// or the process ends, so a claim found free proves that the process that
// held it has ended (flock.Claim says what that buys).
func (s *Store) Claim(name string) (release func() error, free bool, err error) {
	release, free, err = flock.Claim(s.dir, name)
	if err != nil {
		err = fmt.Errorf("dirstore: %w", err)
	}
	return release, free, err
}

// lock takes the write lock: first the in-process semaphore, then the
// flock. It honours ctx while waiting for either.
func (s *Store) lock(ctx context.Context) (unlockFn func(), err error) {
	return flock.Lock{Sem: s.sem, File: s.lockFile, Closed: s.closed.Load, ErrClosed: ErrClosed}.Acquire(ctx)
}
