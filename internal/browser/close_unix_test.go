//go:build unix

package browser

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestCloseLeavesNothing(t *testing.T) {
	path := Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	b, err := Launch(ctx, Options{Path: path, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.NewPage(ctx, "about:blank")
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	pid := b.PID()

	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("chromium pid %d after Close: kill(pid, 0) = %v, want ESRCH", pid, err)
	}
	// Orphaned helpers may linger as zombies until init reaps them; none
	// may still run.
	if live := groupLive(pid); len(live) != 0 {
		t.Errorf("chromium process group %d after Close: processes %v still run", pid, live)
	}
	if _, err := os.Stat(b.dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile dir %s after Close: stat = %v, want not exist", b.dataDir, err)
	}
	if _, err := p.Eval(ctx, `1`); !errors.Is(err, ErrClosed) {
		t.Errorf("eval after Close: err = %v, want ErrClosed", err)
	}

	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, fn := range []string{"(*conn).readLoop", "(*Browser).readStderr"} {
		if strings.Contains(stacks, fn) {
			t.Errorf("goroutine %s still running after Close:\n%s", fn, stacks)
		}
	}
}

func TestLaunchNotChromium(t *testing.T) {
	// "true" exits at once without printing a DevTools URL.
	path, err := exec.LookPath("true")
	if err != nil {
		t.Skipf("no true on PATH: %v", err)
	}
	b, err := Launch(t.Context(), Options{Path: path, Logf: t.Logf})
	if err == nil {
		b.Close()
		t.Fatalf("Launch(%s) succeeded", path)
	}
	if !strings.Contains(err.Error(), "exited before printing its DevTools URL") {
		t.Errorf("err = %v, want it to say the program exited before printing its DevTools URL", err)
	}
}
