package secrets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"filippo.io/age"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// Vault is a node's opened secrets, read from the bucket again at each
// Refresh (a list of secrets/v/, and a read of each secret whose version
// changed): what classes and fronts read (Secret).
type Vault struct {
	b   ownership.Bucket
	ids []age.Identity

	mu     sync.RWMutex
	values map[string][]byte
	etags  map[string]ownership.ETag
	failed []string
}

// NewVault is a vault that opens the secrets of b with ids (none: it
// opens nothing, and any secret is one it cannot open).
func NewVault(b ownership.Bucket, ids []age.Identity) *Vault {
	return &Vault{b: b, ids: ids, values: map[string][]byte{}, etags: map[string]ownership.ETag{}}
}

// Secret returns a copy of the secret name, if the vault opened it.
func (v *Vault) Secret(name string) ([]byte, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	val, ok := v.values[name]
	return slices.Clone(val), ok
}

// Counts says how many secrets the vault holds open, and how many it
// could not open at its last refresh.
func (v *Vault) Counts() (open, unopened int) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.values), len(v.failed)
}

// Refresh reads the secrets that changed since the last refresh and opens
// them. It returns the names of those it cannot open (sealed to no
// identity it has), which it holds no value of. An error is the bucket's:
// the vault is then as it was.
func (v *Vault) Refresh(ctx context.Context) (unopened []string, err error) {
	list, err := List(ctx, v.b)
	if err != nil {
		return nil, err
	}
	if len(list) > MaxSecrets {
		list = list[:MaxSecrets]
	}
	v.mu.RLock()
	etags := v.etags
	failedBefore := v.failed
	v.mu.RUnlock()
	values := map[string][]byte{}
	newTags := map[string]ownership.ETag{}
	var failed []string
	for _, e := range list {
		if tag, ok := etags[e.Name]; ok && tag == e.ETag && !slices.Contains(failedBefore, e.Name) {
			if val, ok := v.Secret(e.Name); ok {
				values[e.Name], newTags[e.Name] = val, tag
				continue
			}
		}
		o, err := v.b.Get(ctx, valuePrefix+e.Name)
		if errors.Is(err, ownership.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read secret %q: %w", e.Name, err)
		}
		val, _, err := open(o.Body, v.ids)
		if err != nil {
			failed = append(failed, e.Name)
			newTags[e.Name] = o.ETag
			continue
		}
		values[e.Name], newTags[e.Name] = val, o.ETag
	}
	v.mu.Lock()
	v.values, v.etags, v.failed = values, newTags, failed
	v.mu.Unlock()
	return failed, nil
}
