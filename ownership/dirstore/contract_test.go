package dirstore

import (
	"path/filepath"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/buckettest"
	"github.com/wasmkeep/wasmkeep/ownership/internal/storetest"
)

// TestContract holds the log store to the strictest contract: a new ETag
// for every write, refusal of an if-match delete of a missing key, and any
// valid key beside any other, so it declares no traits.
func TestContract(t *testing.T) {
	buckettest.Run(t, func(t *testing.T) ownership.Bucket {
		return &heldStore{openTemp(t)}
	}, buckettest.Traits{})
}

// TestContractCompacting runs the contract with a store that compacts as
// soon as a segment holds more dead bytes than live ones, so that the
// suite's writes run across many segment switches.
func TestContractCompacting(t *testing.T) {
	buckettest.Run(t, func(t *testing.T) ownership.Bucket {
		s := openTemp(t)
		s.compactMin = 1
		return &heldStore{s}
	}, buckettest.Traits{})
}

func openTemp(t testing.TB) *Store {
	t.Helper()
	return openDir(t, t.TempDir())
}

func openDir(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && err != ErrClosed {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// heldStore lets the contract suite hold writes in flight: it takes the
// store's lock through a file description of its own, as another process
// would, so writes wait for it. It passes GetRange on, so the suite checks
// the Store's own range reads.
type heldStore struct{ *Store }

var _ ownership.RangeReader = (*heldStore)(nil)

func (h *heldStore) HoldWrites(t *testing.T) (release func()) {
	t.Helper()
	return storetest.HoldLock(t, filepath.Join(h.Dir(), lockName))
}
