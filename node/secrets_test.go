package node_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/internal/secrets"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// peek answers the secret its query names.
var peek = actors.ClassFunc(func(ctx context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
	v, err := actors.Secret(ctx, req.Query.Get("name"))
	if errors.Is(err, actors.ErrNoSecret) {
		return actors.Text(http.StatusNotFound, err.Error()), nil
	}
	if err != nil {
		return nil, err
	}
	return actors.Text(http.StatusOK, string(v)), nil
})

// lockedBuffer is a log both a node and the test use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSecrets: a node opens the application's secrets with its identity
// and its classes read them (a change within a poll); a node whose
// identity is not among their recipients drains, with a drain request that
// says why, and serves again once a rotation adds its recipient. No value
// ever reaches a log.
func TestSecrets(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	b, err := dirstore.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	idA, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	idB, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	require.NoError(t, secrets.SetRecipients(ctx, b, []string{idA.Recipient().String()}, nil))
	require.NoError(t, secrets.Set(ctx, b, "api-key", []byte("value-one")))

	logs := &lockedBuffer{}
	start := func(id string, ident *age.X25519Identity) *nodetest.Node {
		return nodetest.Start(t, nodetest.Options{Dir: dir, Node: id, Instance: id + "-i",
			Classes: map[string]actors.Class{"peek": peek}, Configure: func(c *node.Config) {
				shortLeases(c)
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				c.Secrets = secrets.NewVault(c.Bucket, []age.Identity{ident})
				c.SecretsPoll = 50 * time.Millisecond
			}})
	}
	n1 := start("n1", idA)
	require.Eventually(t, func() bool { _, body := get(t, n1.URL+"/actor/peek/x?name=api-key"); return body == "value-one" },
		nodetest.Wait, 10*time.Millisecond)
	code, body := get(t, n1.URL+"/actor/peek/x?name=missing")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, `"missing"`)
	require.NoError(t, secrets.Set(ctx, b, "api-key", []byte("value-two")))
	require.Eventually(t, func() bool { _, body := get(t, n1.URL+"/actor/peek/x?name=api-key"); return body == "value-two" },
		nodetest.Wait, 10*time.Millisecond, "a new value within a poll")
	require.Equal(t, 1.0, metricValue(t, n1, "wasmkeep_secrets_open"))

	n2 := start("n2", idB)
	require.Eventually(t, func() bool { return n2.Status().Draining }, nodetest.Wait, 10*time.Millisecond, "n2 drains")
	st, err := cluster.ReadStatus(ctx, b, time.Now())
	require.NoError(t, err)
	var by string
	for _, n := range st.Nodes {
		if n.Node == "n2" {
			by = n.DrainBy
		}
	}
	require.Contains(t, by, "cannot open 1 of 1 (api-key)", "the drain request says why")
	require.Equal(t, 1.0, metricValue(t, n2, "wasmkeep_secrets_unopened"))
	require.False(t, n1.Status().Draining)

	// Rotation: B's recipient added (sealed again with A's identity).
	require.NoError(t, secrets.SetRecipients(ctx, b, []string{idA.Recipient().String(), idB.Recipient().String()}, []age.Identity{idA}))
	require.Eventually(t, func() bool { return !n2.Status().Draining }, nodetest.Wait, 10*time.Millisecond, "n2 serves again")
	require.Eventually(t, func() bool { _, body := get(t, n2.URL+"/actor/peek/y?name=api-key"); return body == "value-two" },
		nodetest.Wait, 10*time.Millisecond)
	_, body = get(t, n1.URL+"/actor/peek/x?name=api-key")
	require.Equal(t, "value-two", body, "n1 opens them still")

	for _, v := range []string{"value-one", "value-two", idA.String(), idB.String()} {
		require.False(t, strings.Contains(logs.String(), v), "a log holds %q", v)
	}
	require.Contains(t, logs.String(), "cannot open the application's secrets")
}
