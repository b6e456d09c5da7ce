package memstore_test

import (
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/buckettest"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// TestContract holds the store, faults off, to the strictest contract, so it
// declares no traits.
func TestContract(t *testing.T) {
	buckettest.Run(t, func(t *testing.T) ownership.Bucket {
		return heldStore{memstore.New(memstore.Faults{})}
	}, buckettest.Traits{})
}

// heldStore offers the Store's HoldWrites to the contract suite, and
// passes its GetRange on, so the suite checks the Store's own range reads.
type heldStore struct{ *memstore.Store }

var _ ownership.RangeReader = heldStore{}

func (h heldStore) HoldWrites(*testing.T) (release func()) { return h.Store.HoldWrites() }
