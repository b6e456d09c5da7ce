package peer

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/internal/testlog"
)

func TestPeerFailuresLoggedOncePerState(t *testing.T) {
	logs := &testlog.Log{}
	p := newPeerLog(slog.New(logs))
	for range 384 {
		p.failed("n2", "127.0.0.1:1", "forward", errors.New("connection refused"))
	}
	p.failed("n3", "127.0.0.1:2", "call", errors.New("timeout"))
	require.Equal(t, 1, logs.Count("WARN", "forward to a peer failed", "peer=n2", "connection refused"))
	require.Equal(t, 1, logs.Count("WARN", "call to a peer failed", "peer=n3"))
	p.answered("n2")
	p.answered("n2") // no failures since: nothing more
	require.Equal(t, 1, logs.Count("INFO", "a peer answers again", "peer=n2", "failed=384"))
	p.failed("n2", "127.0.0.1:1", "forward", errors.New("reset"))
	require.Equal(t, 1, logs.Count("WARN", "peer=n2", "reset"), "a new failure after an answer is logged again")
	require.Zero(t, logs.Count("node="), "a line names the peer as node")
}
