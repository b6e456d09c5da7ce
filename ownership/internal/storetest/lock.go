package storetest

import (
	"os"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership/internal/flock"
)

// HoldLock takes the flock on the lock file at path through a file
// description of its own, as another process would, so that a store's
// writes wait until release.
func HoldLock(t *testing.T, path string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := flock.WaitLock(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := flock.Unlock(f); err != nil {
			t.Error(err)
		}
		f.Close()
	}
}
