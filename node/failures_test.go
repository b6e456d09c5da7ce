package node_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/internal/testlog"
	"github.com/wasmkeep/wasmkeep/node"
)

// TestFailedEventsCountedAndNamed: a handler that returns an error or
// panics fails its event: counted by class in
// wasmkeep_actor_event_failures_total (no supervisor sees it: the actor
// recovers it), and answered 500 with an id that the log line of the
// failure carries, so a client's report finds it; a panic's line says
// where it happened, on one line.
func TestFailedEventsCountedAndNamed(t *testing.T) {
	logs := &testlog.Log{}
	boom := actors.ClassFunc(func(_ context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
		if req.Path == "/panic" {
			panic("the board fell over")
		}
		return nil, errors.New("the board is full")
	})
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"board": boom},
		Configure: func(c *node.Config) { c.Logger = slog.New(logs) }})
	for i, path := range []string{"/actor/board/b", "/actor/board/b/panic"} {
		res, err := http.Get(n.URL + path)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusInternalServerError, res.StatusCode, path)
		id := res.Header.Get(actorhost.ErrorIDHeader)
		require.NotEmpty(t, id, path)
		assert.True(t, logs.Has("actor event failed", "error_id="+id), "no log line with error_id=%s:\n%s", id, logs)
		assert.Equal(t, `wasmkeep_actor_event_failures_total{class="board"} `+[]string{"1", "2"}[i],
			series(t, n, `wasmkeep_actor_event_failures_total{class="board"}`), path)
	}
	assert.True(t, strings.Contains(logs.String(), "the board fell over"), "the panic's value is logged")
	// Where it panicked, on one line: the class's own frame first.
	at := logs.Matching("actor panicked", "panic=the board fell over")
	require.Len(t, at, 1, "%s", logs)
	assert.Regexp(t, `at=\S*node_test\.TestFailedEventsCountedAndNamed\.func1 failures_test\.go:\d+`, at[0])
}
