package deploys_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/internal/deploys"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// TestRecord: deploys at once each land in the class's history (the
// record is written If-Match), the module is kept by its hash, a rollback
// goes to the version before the current or to one named by a prefix, and
// a module changed in the bucket is found damaged.
func TestRecord(t *testing.T) {
	ctx := context.Background()
	b := memstore.New(memstore.Faults{})
	_, _, err := deploys.Read(ctx, b, "c")
	require.ErrorIs(t, err, deploys.ErrNoClass)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := deploys.Upload(ctx, b, "c", []byte{byte(i)}, deploys.Deploy{At: time.Now()})
			require.NoError(t, err)
		})
	}
	wg.Wait()
	r, _, err := deploys.Read(ctx, b, "c")
	require.NoError(t, err)
	require.Len(t, r.History, 8, "no deploy lost another's")
	cur := r.Current().Version
	m, err := deploys.ReadModule(ctx, b, "c", cur)
	require.NoError(t, err)
	require.Equal(t, cur, deploys.Version(m))

	before := r.History[6].Version
	d, err := deploys.Rollback(ctx, b, "c", "", deploys.Deploy{At: time.Now()})
	require.NoError(t, err)
	require.Equal(t, before, d.Version)
	first := r.History[0].Version
	d, err = deploys.Rollback(ctx, b, "c", first[:8], deploys.Deploy{At: time.Now()})
	require.NoError(t, err)
	require.Equal(t, first, d.Version)
	_, err = deploys.Rollback(ctx, b, "c", "ffffffffffff", deploys.Deploy{At: time.Now()})
	require.ErrorIs(t, err, deploys.ErrNoVersion)

	_, err = b.Put(ctx, deploys.ModuleKey("c", first), []byte("changed"), ownership.Always())
	require.NoError(t, err)
	_, err = deploys.ReadModule(ctx, b, "c", first)
	require.ErrorIs(t, err, ownership.ErrDamaged)
}
