package dirstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/buckettest"
)

// TestContract holds the directory store to the strictest contract: a new
// ETag for every write, refusal of an if-match delete of a missing key, and
// any valid key beside any other (its key encoding lets "a" and "a/b" share
// the tree), so it declares no traits.
func TestContract(t *testing.T) {
	buckettest.Run(t, func(t *testing.T) ownership.Bucket {
		return &heldStore{openTemp(t)}
	}, buckettest.Traits{})
}

func openTemp(t testing.TB) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// heldStore lets the contract suite hold writes in flight: it takes the
// store's lock through a file description of its own, as another process
// would, so writes wait for it.
type heldStore struct{ *Store }

func (h *heldStore) HoldWrites(t *testing.T) (release func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(h.Dir(), lockName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitLock(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := unlock(f); err != nil {
			t.Error(err)
		}
		f.Close()
	}
}
