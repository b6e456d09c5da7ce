package actorhost_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
)

// kvAnswer is one HTTP answer of the kv class.
type kvAnswer struct {
	status int
	header http.Header
	body   string
}

// kvDo sends method path (under /actor/kv/) with body to node n.
func kvDo(t *testing.T, n *nodetest.Node, method, path string, body []byte) kvAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, n.URL+"/actor/kv/"+path, bytes.NewReader(body))
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return kvAnswer{res.StatusCode, res.Header, string(b)}
}

// expect checks an answer's status and body.
func (a kvAnswer) expect(t *testing.T, status int, body string) {
	t.Helper()
	assert.Equal(t, status, a.status, "body %q", a.body)
	assert.Equal(t, body, a.body)
}

// The kv class stores, returns, lists and deletes keys over HTTP, each
// route with its status and content type.
func TestKVRoutes(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	list := kvDo(t, n, "GET", "s/", nil)
	list.expect(t, http.StatusOK, "")
	assert.Equal(t, "text/plain; charset=utf-8", list.header.Get("Content-Type"))

	kvDo(t, n, "PUT", "s/greeting", []byte("hello")).expect(t, http.StatusCreated, "")
	kvDo(t, n, "PUT", "s/greeting", []byte("hello again")).expect(t, http.StatusNoContent, "")
	got := kvDo(t, n, "GET", "s/greeting", nil)
	got.expect(t, http.StatusOK, "hello again")
	assert.Equal(t, "application/octet-stream", got.header.Get("Content-Type"))

	kvDo(t, n, "PUT", "s/a/b", []byte("nested")).expect(t, http.StatusCreated, "")
	kvDo(t, n, "PUT", "s/empty", nil).expect(t, http.StatusCreated, "")
	kvDo(t, n, "GET", "s/a/b", nil).expect(t, http.StatusOK, "nested")
	kvDo(t, n, "GET", "s/empty", nil).expect(t, http.StatusOK, "")
	kvDo(t, n, "GET", "s/", nil).expect(t, http.StatusOK, "a/b\nempty\ngreeting\n")
	kvDo(t, n, "GET", "s", nil).expect(t, http.StatusOK, "a/b\nempty\ngreeting\n")
	kvDo(t, n, "GET", "s/?prefix=a/", nil).expect(t, http.StatusOK, "a/b\n")
	kvDo(t, n, "GET", "other/", nil).expect(t, http.StatusOK, "") // another actor, another store

	missing := kvDo(t, n, "GET", "s/missing", nil)
	missing.expect(t, http.StatusNotFound, "kv: s holds no key \"missing\"\n")
	assert.Equal(t, "text/plain; charset=utf-8", missing.header.Get("Content-Type"))

	kvDo(t, n, "DELETE", "s/greeting", nil).expect(t, http.StatusNoContent, "")
	kvDo(t, n, "GET", "s/greeting", nil).expect(t, http.StatusNotFound, "kv: s holds no key \"greeting\"\n")
	kvDo(t, n, "DELETE", "s/greeting", nil).expect(t, http.StatusNotFound, "kv: s holds no key \"greeting\"\n")
	kvDo(t, n, "GET", "s/", nil).expect(t, http.StatusOK, "a/b\nempty\n")

	kvDo(t, n, "DELETE", "s/", nil).expect(t, http.StatusNoContent, "")
	kvDo(t, n, "GET", "s/", nil).expect(t, http.StatusOK, "")
	kvDo(t, n, "GET", "s/a/b", nil).expect(t, http.StatusNotFound, "kv: s holds no key \"a/b\"\n")
}

// Methods a route does not take get 405 naming those it does; a key with
// a newline gets 400.
func TestKVRefusals(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	for _, tc := range []struct{ method, path, allow string }{
		{"POST", "s/k", "GET, PUT, DELETE"},
		{"POST", "s/", "GET, DELETE"},
		{"PUT", "s/", "GET, DELETE"},
		{"PUT", "s", "GET, DELETE"},
	} {
		a := kvDo(t, n, tc.method, tc.path, []byte("x"))
		a.expect(t, http.StatusMethodNotAllowed, "kv: only "+tc.allow+" here\n")
		assert.Equal(t, tc.allow, a.header.Get("Allow"), "%s %s", tc.method, tc.path)
	}
	kvDo(t, n, "PUT", "s/a%0Ab", []byte("x")).expect(t, http.StatusBadRequest, "kv: a key may not hold a newline\n")
	kvDo(t, n, "GET", "s/", nil).expect(t, http.StatusOK, "")
}

// A PUT past a storage limit gets 413 with the limit's message, and
// nothing of it is stored; one at the limit is stored.
func TestKVLimits(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Configure: func(c *node.Config) { c.Actors.MaxState = 1 << 20 }})
	a := kvDo(t, n, "PUT", "s/big", make([]byte, actors.MaxValueLen+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status)
	assert.Equal(t, "storage limit: value of 131073 bytes under key \"big\", over 131072\n", a.body)
	a = kvDo(t, n, "PUT", "s/"+strings.Repeat("k", actors.MaxKeyLen+1), []byte("v"))
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status)
	assert.Equal(t, "storage limit: key of 2049 bytes, over 2048\n", a.body)
	kvDo(t, n, "GET", "s/", nil).expect(t, http.StatusOK, "")

	kvDo(t, n, "PUT", "s/big", make([]byte, actors.MaxValueLen)).expect(t, http.StatusCreated, "")
	assert.Len(t, kvDo(t, n, "GET", "s/big", nil).body, actors.MaxValueLen)
	kvDo(t, n, "PUT", "s/"+strings.Repeat("k", actors.MaxKeyLen), []byte("v")).expect(t, http.StatusCreated, "")

	// The state bound (1 MiB here): the eighth value of 128 KiB does not fit.
	for _, k := range []string{"c", "d", "e", "f", "g", "h"} {
		kvDo(t, n, "PUT", "s/"+k, make([]byte, actors.MaxValueLen)).expect(t, http.StatusCreated, "")
	}
	a = kvDo(t, n, "PUT", "s/i", make([]byte, actors.MaxValueLen))
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status)
	assert.Contains(t, a.body, "storage limit: state would be ")
	assert.Contains(t, a.body, "over 1048576\n")
	kvDo(t, n, "GET", "s/i", nil).expect(t, http.StatusNotFound, "kv: s holds no key \"i\"\n")
	// DELETE / makes room at once.
	kvDo(t, n, "DELETE", "s/", nil).expect(t, http.StatusNoContent, "")
	kvDo(t, n, "PUT", "s/i", make([]byte, actors.MaxValueLen)).expect(t, http.StatusCreated, "")
}

// ?dry-run answers as the write would and rolls the event back: nothing
// is stored or deleted.
func TestKVDryRun(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	kvDo(t, n, "PUT", "s/k", []byte("v")).expect(t, http.StatusCreated, "")

	kvDo(t, n, "PUT", "s/new?dry-run", []byte("x")).expect(t, http.StatusCreated, "")
	kvDo(t, n, "PUT", "s/k?dry-run", []byte("x")).expect(t, http.StatusNoContent, "")
	kvDo(t, n, "DELETE", "s/k?dry-run", nil).expect(t, http.StatusNoContent, "")
	kvDo(t, n, "DELETE", "s/?dry-run", nil).expect(t, http.StatusNoContent, "")
	kvDo(t, n, "DELETE", "s/gone?dry-run", nil).expect(t, http.StatusNotFound, "kv: s holds no key \"gone\"\n")
	a := kvDo(t, n, "PUT", "s/big?dry-run", make([]byte, actors.MaxValueLen+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status, "a dry run meets the limits")

	kvDo(t, n, "GET", "s/", nil).expect(t, http.StatusOK, "k\n")
	kvDo(t, n, "GET", "s/k", nil).expect(t, http.StatusOK, "v")
}

// What a kv actor stores is in the bucket: another node on it, after the
// first one stopped, serves the same keys.
func TestKVPersists(t *testing.T) {
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.Options{Dir: dir})
	kvDo(t, n, "PUT", "s/k", []byte("kept")).expect(t, http.StatusCreated, "")
	kvDo(t, n, "PUT", "s/gone", []byte("x")).expect(t, http.StatusCreated, "")
	kvDo(t, n, "DELETE", "s/gone", nil).expect(t, http.StatusNoContent, "")
	require.NoError(t, n.Stop(context.Background()))

	n2 := nodetest.Start(t, nodetest.Options{Dir: dir, Node: "n2", Instance: "i2"})
	kvDo(t, n2, "GET", "s/", nil).expect(t, http.StatusOK, "k\n")
	kvDo(t, n2, "GET", "s/k", nil).expect(t, http.StatusOK, "kept")
}
