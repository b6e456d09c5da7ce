package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/cli"
	"github.com/wasmkeep/wasmkeep/internal/browser"
)

// TestDevLoopInBrowser: 'wasmkeep dev' serves a copy of examples/room-wasm
// from a watched folder; a page chats in it; the copy's source is changed,
// and the page, on the socket it opened, sees the rebuilt room answer.
func TestDevLoopInBrowser(t *testing.T) {
	path := browser.Require(t)
	// The copy must be in the module to build: a folder of testdata,
	// removed at the end.
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	watch, err := os.MkdirTemp("testdata", "dev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(watch); os.Remove("testdata") })
	room := filepath.Join(watch, "room-wasm")
	if err := os.MkdirAll(room, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../examples/room-wasm/*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(room, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()

	bucket := t.TempDir() // made before the cleanup that stops dev: removed after it
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var log strings.Builder
	logw := &syncWriter{w: &log}
	go func() {
		done <- cli.Run(ctx, []string{"dev", "--watch", watch, "--listen", addr, "--bucket", "file://" + bucket,
			"--classes", "", "--cache-dir", "", "--node", "dev1", "--idle-timeout", "300ms"}, io.Discard, logw)
	}()
	t.Cleanup(func() {
		cancel()
		code := <-done
		if t.Failed() {
			logw.mu.Lock()
			t.Logf("dev's log:\n%s", log.String())
			logw.mu.Unlock()
		}
		if code != 0 {
			logw.mu.Lock()
			defer logw.mu.Unlock()
			t.Errorf("dev exited %d; its log:\n%s", code, log.String())
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res, err := http.Get("http://" + addr + "/actor/room-wasm/lobby")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("dev never served the room")
		}
		time.Sleep(100 * time.Millisecond)
	}

	bctx, stop, err := browser.Launch(ctx, path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ada := openPage(t, bctx, "http://"+addr+"/actor/room-wasm/lobby", "ada")
	ada.waitFor("joining", "window.chat.joined")
	ada.say("/version")
	ada.sees("room-wasm version 1")
	// An alarm set before the reload fires after it.
	ada.say("/remind 4s stretch")
	ada.sees("reminder set for 4s from now")

	main := filepath.Join(room, "main.go")
	src, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(src), `var version = "1"`, `var version = "reloaded"`, 1)
	if changed == string(src) {
		t.Fatal("room-wasm has no version to change")
	}
	if err := os.WriteFile(main, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		ada.say("/version")
		time.Sleep(500 * time.Millisecond)
		if ok, _ := ada.eval(`window.chat.messages.some((m) => m.text === "room-wasm version reloaded")`); ok {
			break
		}
		if time.Now().After(deadline) {
			logw.mu.Lock()
			t.Fatalf("the page never saw the reloaded room; dev's log:\n%s", log.String())
		}
	}
	ada.sees("ada: stretch")
	ada.waitFor("no close", "window.chat.closed === null")
}

// syncWriter is a writer several goroutines share (a node's log).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
