package secrets_test

import (
	"context"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/internal/secrets"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

func identity(t *testing.T) *age.X25519Identity {
	id, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	return id
}

// TestSealedInTheBucket: a secret is sealed to the recipients (nothing in
// the bucket holds its value), listed by name, opened by a recipient's
// identity only, and deleted.
func TestSealedInTheBucket(t *testing.T) {
	ctx := context.Background()
	b := memstore.New(memstore.Faults{})
	a, other := identity(t), identity(t)
	require.ErrorIs(t, secrets.Set(ctx, b, "api-key", []byte("s3cr3t-value")), secrets.ErrNoRecipients)
	require.NoError(t, secrets.SetRecipients(ctx, b, []string{a.Recipient().String()}, nil))
	require.NoError(t, secrets.Set(ctx, b, "api-key", []byte("s3cr3t-value")))
	require.ErrorIs(t, secrets.Set(ctx, b, "a/b", nil), secrets.ErrBadName)

	page, err := b.List(ctx, secrets.Prefix, "", 0)
	require.NoError(t, err)
	for _, e := range page.Entries {
		o, err := b.Get(ctx, e.Key)
		require.NoError(t, err)
		require.NotContains(t, string(o.Body), "s3cr3t", "%s holds the value in the clear", e.Key)
	}
	list, err := secrets.List(ctx, b)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "api-key", list[0].Name)

	v := secrets.NewVault(b, []age.Identity{a})
	unopened, err := v.Refresh(ctx)
	require.NoError(t, err)
	require.Empty(t, unopened)
	got, ok := v.Secret("api-key")
	require.True(t, ok)
	require.Equal(t, "s3cr3t-value", string(got))

	for _, ids := range [][]age.Identity{nil, {other}} {
		w := secrets.NewVault(b, ids)
		unopened, err = w.Refresh(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"api-key"}, unopened)
		_, ok = w.Secret("api-key")
		require.False(t, ok)
	}

	require.NoError(t, secrets.Delete(ctx, b, "api-key"))
	require.ErrorIs(t, secrets.Delete(ctx, b, "api-key"), secrets.ErrNotFound)
	unopened, err = v.Refresh(ctx)
	require.NoError(t, err)
	require.Empty(t, unopened)
	_, ok = v.Secret("api-key")
	require.False(t, ok, "a deleted secret is gone from the vault")
}

// TestRotation: a second recipient is added (every secret sealed again to
// both, with an identity that opens them), then the first removed: a vault
// of either identity opens every secret until the first is removed, and
// one of the first cannot after; nothing is re-sealed without an identity
// that opens it.
func TestRotation(t *testing.T) {
	ctx := context.Background()
	b := memstore.New(memstore.Faults{})
	oldID, newID := identity(t), identity(t)
	oldR, newR := oldID.Recipient().String(), newID.Recipient().String()
	require.NoError(t, secrets.SetRecipients(ctx, b, []string{oldR}, nil))
	for _, n := range []string{"a", "b", "c"} {
		require.NoError(t, secrets.Set(ctx, b, n, []byte("value of "+n)))
	}
	opens := func(id age.Identity) []string {
		v := secrets.NewVault(b, []age.Identity{id})
		unopened, err := v.Refresh(ctx)
		require.NoError(t, err)
		return unopened
	}
	require.ErrorIs(t, secrets.SetRecipients(ctx, b, []string{oldR, newR}, []age.Identity{newID}), secrets.ErrCannotOpen,
		"sealing again needs an identity that opens the secrets")
	rs, _, err := secrets.Recipients(ctx, b)
	require.NoError(t, err)
	require.Equal(t, []string{oldR}, rs, "a refused rotation writes nothing")

	require.NoError(t, secrets.SetRecipients(ctx, b, []string{oldR, newR}, []age.Identity{oldID}))
	require.Empty(t, opens(oldID), "old nodes still open every secret")
	require.Empty(t, opens(newID), "new nodes open every secret")
	require.NoError(t, secrets.SetRecipients(ctx, b, []string{newR}, []age.Identity{newID}))
	require.Empty(t, opens(newID))
	require.Equal(t, []string{"a", "b", "c"}, opens(oldID), "the old identity opens nothing once removed")
}

// TestIdentityErrorsHoldNoKey: a malformed identity is refused with an
// error that does not carry the text it was given.
func TestIdentityErrorsHoldNoKey(t *testing.T) {
	const bad = "AGE-SECRET-KEY-1NOTAKEYATALLBUTSOMETHINGSECRET"
	_, err := secrets.ReadIdentities("", bad)
	require.Error(t, err)
	require.False(t, strings.Contains(err.Error(), "SOMETHINGSECRET"), err.Error())
	ids, err := secrets.ReadIdentities("", "")
	require.NoError(t, err)
	require.Empty(t, ids)
}
