// Package flock is the file locking the embedded stores share (the
// directory store and the SQLite store): the write lock of a store, which
// excludes its own goroutines by a semaphore and other processes, and
// other Stores of this one, by an flock; and claims, names a process holds
// beside a store for as long as it runs.
//
// flock locks are held by an open file description, not by a process:
// two Stores in one process, each with its own open lock file, exclude
// each other just as two processes do; goroutines of one Store share its
// description, which is why a Lock adds a semaphore of its own. The
// directory must be on a local file system.
package flock

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// Lock is a store's write lock: a one-slot semaphore for its goroutines,
// then an flock on File for everything else. Sem and File are the
// store's; Closed says that it is closed (Acquire then fails with
// ErrClosed).
type Lock struct {
	Sem       chan struct{}
	File      *os.File
	Closed    func() bool
	ErrClosed error
}

// Acquire takes the lock: first the semaphore, then the flock, honouring
// ctx while waiting for either. unlock lets both go.
func (l Lock) Acquire(ctx context.Context) (unlock func(), err error) {
	select {
	case l.Sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if l.Closed() {
		<-l.Sem
		return nil, l.ErrClosed
	}
	release := func() {
		// An unlock error leaves the flock with our own open file, where
		// the next lock takes it over; there is nothing better to do.
		_ = Unlock(l.File)
		<-l.Sem
	}
	ok, err := TryLock(l.File)
	if err != nil {
		<-l.Sem
		return nil, err
	}
	if ok {
		return release, nil
	}
	// Another Store holds the lock. flock cannot be interrupted, so wait
	// in a goroutine and stop waiting when ctx ends.
	done := make(chan error, 1)
	go func() { done <- WaitLock(l.File) }()
	select {
	case err := <-done:
		if err != nil {
			<-l.Sem
			return nil, err
		}
		return release, nil
	case <-ctx.Done():
		// The waiting flock keeps the semaphore until it returns, so no
		// other goroutine of this Store touches the lock file meanwhile.
		go func() {
			if err := <-done; err == nil {
				_ = Unlock(l.File)
			}
			<-l.Sem
		}()
		return nil, ctx.Err()
	}
}

// Claims: a process that uses a store's directory may claim a name beside
// the store (a file under dir/claims, flocked), and hold it until it
// releases it or ends. flock locks are released by the kernel when the
// last open file description holding them is closed, which a process's
// end does, whatever way it ends: so a claim that another process held and
// that is free now proves that process has ended, or released it. A node
// claims its own id: a node started again after a crash finds its claim
// free and knows that its predecessor has ended, and with it every write
// it could still make (the embedded stores' writes are the process's own
// system calls: nothing of a process that has ended is still on its way).
// A process that is stopped (SIGSTOP) still holds its claim.

// Claim takes the claim on name beside the store in dir, without waiting:
// free is false while another open file description holds it (another
// process, or another claim of this one). The claim is held until release
// is called or the process ends.
func Claim(dir, name string) (release func() error, free bool, err error) {
	claims := filepath.Join(dir, "claims")
	if err := os.MkdirAll(claims, 0o777); err != nil {
		return nil, false, fmt.Errorf("claim %q: %w", name, err)
	}
	f, err := os.OpenFile(filepath.Join(claims, hex.EncodeToString([]byte(name))), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, false, fmt.Errorf("claim %q: %w", name, err)
	}
	got, err := TryLock(f)
	if err != nil || !got {
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("claim %q: %w", name, err)
		}
		return nil, false, nil
	}
	return f.Close, true, nil
}
