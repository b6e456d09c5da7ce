package wasmhost

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
)

// TestWasmFront: a wasm module as the node's front answers by itself,
// calls an actor, hands a request (the chat page, and its WebSocket) to a
// room with its route header, and has no storage.
func TestWasmFront(t *testing.T) {
	r := newRuntime(t, Config{})
	mod := mustCompile(t, r, "front", guest(t, "./testdata/front"))
	n := nodetest.Start(t, nodetest.Options{Classes: map[string]actors.Class{"chat": chat.Room{}},
		Configure: func(c *node.Config) { c.HTTP.Front = Front(mod) }})
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(n.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for path, want := range map[string]string{
		"/hello":   "hello from the front\n",
		"/put":     "no storage: ",
		"/nowhere": "front: not found\n",
	} {
		if _, body := get(path); !strings.HasPrefix(body, want) {
			t.Errorf("%s: %q, want %q", path, body, want)
		}
	}
	get("/actor/counter/c")
	if code, body := get("/count"); code != 200 || body != "count 2\n" {
		t.Errorf("/count: %d %q, want the counter called (2)", code, body)
	}
	if code, body := get("/room/den"); code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("/room/den: %d %q, want the chat page routed to the room", code, body)
	}
	// The page's WebSocket, through the front's route too.
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(n.URL, "http")+"/room/den", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]string{"type": "join", "name": "ada"}); err != nil {
		t.Fatal(err)
	}
	var f nodetest.Frame
	if err := ws.ReadJSON(&f); err != nil || f.Type != "history" {
		t.Fatalf("joined through the front: %+v %v, want the room's history", f, err)
	}
}
