package actorhost_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
)

// undoer takes WebSockets. On "rollback" and "fail" it writes, sends to
// the socket, broadcasts and closes the socket, then rolls back or fails;
// on "who" it broadcasts its actor's name; on "read" it sends back what it
// stored. GET answers what it stored.
type undoer struct{}

func (undoer) Handle(_ context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if req.IsUpgrade() {
		return actors.AcceptSocket(), nil
	}
	v, _ := st.Get("n")
	return actors.Text(http.StatusOK, string(v)), nil
}

func (undoer) HandleSocket(ctx context.Context, ev *actors.SocketEvent, st actors.Storage) error {
	if ev.Kind != actors.SocketMessage {
		return nil
	}
	ws := actors.SocketsOf(ctx)
	switch msg := string(ev.Data); msg {
	case "rollback", "fail":
		if err := st.Put("n", []byte(msg)); err != nil {
			return err
		}
		ws.Send(ev.Socket, true, []byte("sent by "+msg))
		ws.Broadcast("", true, []byte("broadcast by "+msg))
		ws.Close(ev.Socket, 4000, "closed by "+msg)
		if msg == "fail" {
			return errors.New("failed on purpose")
		}
		return actors.Rollback(nil)
	case "who":
		ws.Broadcast("", true, []byte(actors.ActorOf(ctx).String()))
	case "read":
		v, _ := st.Get("n")
		ws.Send(ev.Socket, true, []byte("n="+string(v)))
	}
	return nil
}

// A socket event that rolls back (or fails) has no output: its sends,
// broadcasts and closes are not carried out and its writes are discarded.
// ActorOf names the actor in a socket event too.
func TestSocketEventRollbackHasNoOutput(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"undoer": undoer{}}})
	a, b := n.Dial(t, "undoer", "room"), n.Dial(t, "undoer", "room")
	for _, msg := range []string{"rollback", "fail", "who", "read"} {
		require.NoError(t, a.WriteMessage(websocket.TextMessage, []byte(msg)))
	}
	// A socket's output keeps the order of its events: had a rolled-back
	// event's output gone out, it would come first (or a would be closed).
	next := func(c *websocket.Conn) string {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(nodetest.Wait))
		_, got, err := c.ReadMessage()
		require.NoError(t, err)
		return string(got)
	}
	require.Equal(t, "undoer/room", next(a))
	require.Equal(t, "n=", next(a), "what the rolled-back and failed events stored")
	require.Equal(t, "undoer/room", next(b))

	res, err := http.Get(n.URL + "/actor/undoer/room")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Empty(t, string(body), "the bucket has what a discarded socket event wrote")
}
