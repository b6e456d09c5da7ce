package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/browser"
	"github.com/wasmkeep/wasmkeep/internal/deploys"
	"github.com/wasmkeep/wasmkeep/internal/nodetest"
	"github.com/wasmkeep/wasmkeep/node"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/wasmhost"
)

// roomBuild builds examples/room-wasm with its version set to v.
func roomBuild(t *testing.T, v string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "room-"+v+".wasm")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-buildmode=c-shared", "-ldflags", "-X main.version="+v, "-o", out, "../../examples/room-wasm")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build examples/room-wasm: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type runtimeCompiler struct{ rt *wasmhost.Runtime }

func (c runtimeCompiler) Compile(ctx context.Context, class string, wasm []byte) (actors.Class, error) {
	return c.rt.Compile(ctx, class, wasm)
}

func (c runtimeCompiler) Front(ctx context.Context, wasm []byte) (actors.Front, error) {
	mod, err := c.rt.Compile(ctx, "front", wasm)
	if err != nil {
		return nil, err
	}
	return wasmhost.Front(mod), nil
}

// TestDeployInBrowsers: two pages chat in a wasm room deployed through the
// bucket; the class is deployed again with a visible change (its /version
// answer), and both pages, still on the sockets they opened, see the new
// version answer and go on chatting: no page reconnected.
func TestDeployInBrowsers(t *testing.T) {
	path := browser.Require(t)
	v1, v2 := roomBuild(t, "1"), roomBuild(t, "2")
	dir := t.TempDir()
	b, err := dirstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	rt, err := wasmhost.NewRuntime(t.Context(), wasmhost.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	if _, err := deploys.Upload(t.Context(), b, "room", v1, deploys.Deploy{At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	n := nodetest.Start(t, nodetest.Options{Dir: dir, IdleTimeout: 300 * time.Millisecond, Configure: func(c *node.Config) {
		c.Deploys, c.DeployPoll = runtimeCompiler{rt}, 50*time.Millisecond
	}})

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	bctx, stop, err := browser.Launch(ctx, path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	open := func(name string) *chatPage { return openPage(t, bctx, n.URL+"/actor/room/lobby", name) }
	ada := open("ada")
	ada.waitFor("joining", "window.chat.joined")
	bob := open("bob")
	bob.waitFor("joining", "window.chat.joined")
	ada.presence("ada", "bob")
	ada.say("/version")
	ada.sees("room-wasm version 1")
	bob.sees("room-wasm version 1")

	if _, err := deploys.Upload(t.Context(), b, "room", v2, deploys.Deploy{At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Once the node serves the new version, the room hibernates (its
	// sockets stay with the node) and wakes in it at the next message;
	// asked less often than it hibernates.
	deadline := time.Now().Add(waitTimeout)
	for {
		bob.say("/version")
		time.Sleep(500 * time.Millisecond)
		if ok, _ := ada.eval(`window.chat.messages.some((m) => m.text === "room-wasm version 2")`); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the room never answered in version 2 within %v", waitTimeout)
		}
	}
	bob.sees("room-wasm version 2")
	bob.say("still here")
	ada.sees("still here")
	ada.presence("ada", "bob")
	for _, p := range []*chatPage{ada, bob} {
		p.waitFor("no close", "window.chat.closed === null")
	}
	if got := n.Sockets(); got != 2 {
		t.Fatalf("sockets open after the deploy: %d, want the same 2", got)
	}
}
