package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// echoGuest is a Go guest that answers each socket message with a prefix
// and the message.
const echoGuest = `package main

import (
	"strings"

	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

func init() {
	guest.Handle(func(r *guest.Request) *guest.Response {
		if strings.EqualFold(r.HeaderValue("Upgrade"), "websocket") {
			return guest.Accept()
		}
		return guest.Text(200, "PREFIX\n")
	})
	guest.HandleSocket(func(ev *guest.SocketEvent) error {
		if ev.Kind == guest.SocketMessage {
			guest.Sockets.Send(ev.Socket, true, append([]byte("PREFIX:"), ev.Data...))
		}
		return nil
	})
}

func main() {}
`

// TestDevLoop: 'wasmkeep dev' builds a guest of its watched folder and
// deploys it; a change of the guest's source is built and deployed again,
// and a socket opened before it stays open and gets the new behaviour.
func TestDevLoop(t *testing.T) {
	// The guest must be in the module to build: a folder of testdata,
	// removed at the end.
	require.NoError(t, os.MkdirAll("testdata", 0o755))
	watch, err := os.MkdirTemp("testdata", "dev-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(watch); os.Remove("testdata") }) // the folder too, if it is left empty
	src := filepath.Join(watch, "echo-wasm", "main.go")
	require.NoError(t, os.MkdirAll(filepath.Dir(src), 0o755))
	write := func(prefix string) {
		require.NoError(t, os.WriteFile(src, []byte(strings.ReplaceAll(echoGuest, "PREFIX", prefix)), 0o644))
	}
	write("v1")

	ctx, cancel := context.WithCancel(t.Context())
	codes := make(chan int, 1)
	addrs := make(chan string, 1)
	stderr := new(lockedBuffer)
	e := testEnv(new(bytes.Buffer), new(bytes.Buffer))
	e.out, e.err = new(lockedBuffer), stderr
	e.started = func(addr string) { addrs <- addr }
	bucket := "file://" + filepath.Join(t.TempDir(), "bucket")
	go func() {
		codes <- runEnv(ctx, []string{"dev", "--watch", watch, "--listen", "127.0.0.1:0", "--bucket", bucket,
			"--classes", "", "--cache-dir", "", "--node", "dev1"}, e)
	}()
	var addr string
	select {
	case addr = <-addrs:
	case code := <-codes:
		t.Fatalf("exit %d before serving: %s", code, stderr.String())
	}
	t.Cleanup(func() {
		cancel()
		if code := <-codes; code != exitOK {
			t.Errorf("dev exited %d: %s", code, stderr.String())
		}
	})

	var ws *websocket.Conn
	require.Eventually(t, func() bool {
		ws, _, err = websocket.DefaultDialer.Dial("ws://"+addr+"/actor/echo-wasm/x", nil)
		return err == nil
	}, 2*time.Minute, 100*time.Millisecond, "the guest is built and deployed: %s", stderr)
	defer ws.Close()
	ask := func() string {
		require.NoError(t, ws.WriteMessage(websocket.TextMessage, []byte("hi")))
		require.NoError(t, ws.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, b, err := ws.ReadMessage()
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "v1:hi", ask())
	write("v2")
	require.Eventually(t, func() bool { return ask() == "v2:hi" }, 2*time.Minute, 200*time.Millisecond,
		"the change is built and deployed, and the socket opened before gets it: %s", stderr)
}
