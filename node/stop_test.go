package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/ownership/cluster"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
)

// TestCleanStopLeavesNoRecordHeld: a node stopped cleanly releases every
// record it held, whatever state its actors were in: resident counters,
// a room resident with a socket open, a room parked with its socket open,
// and a counter that hibernated (released already). `cluster status`
// then shows no record held by it, ended or not.
func TestCleanStopLeavesNoRecordHeld(t *testing.T) {
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.Options{Dir: dir, Classes: map[string]actors.Class{"chat": chat.Room{}}, IdleTimeout: 300 * time.Millisecond})
	count(t, n, "idle")
	n.AwaitIdle(t, "counter/idle")
	parked := n.Join(t, "chat", "parked", "ada")
	parked.AwaitPresence("ada")
	n.AwaitIdle(t, "chat/parked")
	require.Eventually(t, func() bool { return n.Status().Parked == 1 }, nodetest.Wait, 5*time.Millisecond, "the room parks")
	live := n.Join(t, "chat", "live", "bob")
	live.AwaitPresence("bob")
	for _, name := range []string{"a", "b", "c"} {
		count(t, n, name)
	}
	// The clients read on, as a browser does, so that each answers its
	// close and the stop does not wait out the close handshake's bound.
	codes := make(chan int, 2)
	for _, c := range []*nodetest.ChatClient{parked, live} {
		go func() {
			c.Conn.SetReadDeadline(time.Now().Add(nodetest.Wait))
			for {
				if _, _, err := c.Conn.ReadMessage(); err != nil {
					code := -1
					if ce := (*websocket.CloseError)(nil); errors.As(err, &ce) {
						code = ce.Code
					}
					codes <- code
					return
				}
			}
		}()
	}
	require.NoError(t, n.Stop(context.Background()))
	require.Equal(t, 1012, <-codes, "a socket closed with 1012 by the stop")
	require.Equal(t, 1012, <-codes, "a socket closed with 1012 by the stop")

	b, err := dirstore.Open(dir)
	require.NoError(t, err)
	defer b.Close()
	st, err := cluster.ReadStatus(t.Context(), b, time.Now())
	require.NoError(t, err)
	require.Len(t, st.Nodes, 1)
	nd := st.Nodes[0]
	require.NotNil(t, nd.Lease)
	require.Equal(t, "released", string(nd.Lease.State))
	require.Zero(t, nd.RecordsHeld, "records still held after a clean stop: %+v", nd)
	require.Equal(t, 6, nd.RecordsFree, "every record the node took is free: %+v", nd)
}
