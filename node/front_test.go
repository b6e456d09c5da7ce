package node_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
)

// frontNode is a node with the chat's front, on dir.
func frontNode(t *testing.T, dir, id string) *nodetest.Node {
	return nodetest.Start(t, nodetest.Options{Dir: dir, Node: id, Instance: id + "-i", IdleTimeout: 50 * time.Millisecond,
		Classes: map[string]actors.Class{"chat": chat.Room{}},
		Configure: func(c *node.Config) {
			shortLeases(c)
			c.HTTP.Front = chat.Front{}
		}})
}

// joinThrough opens a chat socket through a front's path and joins.
func joinThrough(t *testing.T, n *nodetest.Node, path, name string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.DialContext(t.Context(), "ws"+strings.TrimPrefix(n.URL, "http")+path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.WriteJSON(map[string]string{"type": "join", "name": name}))
	awaitFrame(t, c, func(f nodetest.Frame) bool { return f.Type == "history" })
	return c
}

func awaitFrame(t *testing.T, c *websocket.Conn, ok func(nodetest.Frame) bool) nodetest.Frame {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(nodetest.Wait)))
	for {
		_, b, err := c.ReadMessage()
		require.NoError(t, err)
		var f nodetest.Frame
		require.NoError(t, json.Unmarshal(b, &f))
		if ok(f) {
			return f
		}
	}
}

// TestFront: the chat's front serves the lobby's page at / and a room's at
// /room/NAME, hands their WebSocket upgrades to the rooms, and its POST
// /room/NAME/say calls the room, whose people hear it; what it does not
// route is its own 404; the node's own paths stay the node's.
func TestFront(t *testing.T) {
	n := frontNode(t, t.TempDir(), "n1")
	for _, path := range []string{"/", "/room/den"} {
		code, body := get(t, n.URL+path)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		require.Contains(t, body, "<html", path)
	}
	code, body := get(t, n.URL+"/nowhere")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, "/room/NAME")
	code, body = get(t, n.URL+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", body)

	ws := joinThrough(t, n, "/room/den", "ada")
	require.Equal(t, "200 said", post(t, n.URL+"/room/den/say?from=ops&text=hello"))
	f := awaitFrame(t, ws, func(f nodetest.Frame) bool { return f.Type == "said" })
	require.Equal(t, "ops", f.Message.From)
	require.Equal(t, "hello", f.Message.Text)
	// The same room at its /actor/ address.
	_, body = get(t, n.URL+"/actor/chat/den")
	require.Contains(t, body, "<html")
	lobby := joinThrough(t, n, "/", "bob")
	require.NoError(t, lobby.WriteJSON(map[string]string{"type": "say", "text": "in the lobby"}))
	f = awaitFrame(t, lobby, func(f nodetest.Frame) bool { return f.Type == "said" })
	require.Equal(t, "in the lobby", f.Message.Text)
}

// TestFrontCallWakesAParkedRoomOnItsNode: a room whose people are
// connected to n1 through its front parks there; a call from n2's front
// wakes it on n1, where its people hear it, and n2 never holds it.
func TestFrontCallWakesAParkedRoomOnItsNode(t *testing.T) {
	dir := t.TempDir()
	n1, n2 := frontNode(t, dir, "n1"), frontNode(t, dir, "n2")
	ws := joinThrough(t, n1, "/room/hall", "ada")
	require.Eventually(t, func() bool { return n1.Status().Parked == 1 }, nodetest.Wait, 5*time.Millisecond, "the room parks on n1")
	resp, err := http.Post(n2.URL+"/room/hall/say?from=ops&text=wake", "", nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	f := awaitFrame(t, ws, func(f nodetest.Frame) bool { return f.Type == "said" })
	require.Equal(t, "wake", f.Message.Text)
	require.Zero(t, n2.Status().Live, "n2 never held the room")
	require.Zero(t, n2.Status().Parked)
}
