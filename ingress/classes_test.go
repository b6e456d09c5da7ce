package ingress_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
)

// badCloser takes WebSockets; on "bad-code" it closes its socket with a
// code no close frame may carry, on "bad-text" it sends text that is not
// UTF-8 and then "ok".
type badCloser struct{}

func (badCloser) Handle(_ context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
	if req.IsUpgrade() {
		return actors.AcceptSocket(), nil
	}
	return actors.Text(http.StatusNotFound, "not found"), nil
}

func (badCloser) HandleSocket(ctx context.Context, ev *actors.SocketEvent, _ actors.Storage) error {
	if ev.Kind != actors.SocketMessage {
		return nil
	}
	s := actors.SocketsOf(ctx)
	switch string(ev.Data) {
	case "bad-code":
		s.Close(ev.Socket, 1005, "")
	case "bad-text":
		s.Send(ev.Socket, true, []byte("\xff\xfe"))
		s.Send(ev.Socket, true, []byte("ok"))
	}
	return nil
}

// A Go class's close with a code that cannot be sent closes its socket
// with 1011, as a wasm guest's does; text it sends that is not UTF-8 is not
// sent.
func TestGoClassBadCloseAndText(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"closer": badCloser{}}})
	c := n.Dial(t, "closer", "a")
	require.NoError(t, c.WriteMessage(websocket.TextMessage, []byte("bad-text")))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, got, err := c.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, "ok", string(got), "the first message the socket got")
	require.NoError(t, c.WriteMessage(websocket.TextMessage, []byte("bad-code")))
	_, _, err = c.ReadMessage()
	require.True(t, websocket.IsCloseError(err, websocket.CloseInternalServerErr), "closed with %v, want 1011", err)
}

// forgetful writes, then answers nothing.
type forgetful struct{}

func (forgetful) Handle(_ context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if req.Query.Has("read") {
		v, _ := st.Get("k")
		return actors.Text(http.StatusOK, string(v)), nil
	}
	if err := st.Put("k", []byte("written")); err != nil {
		return nil, err
	}
	return nil, nil
}

// A Go class that returns no response and no error fails its event with
// 500, its writes discarded, as a wasm guest's nil response does.
func TestGoClassNilResponse(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"forgetful": forgetful{}}})
	res, err := http.Get(n.URL + "/actor/forgetful/a")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusInternalServerError, res.StatusCode)
	res, err = http.Get(n.URL + "/actor/forgetful/a?read")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Empty(t, string(body), "the failed event's write was kept")
}
