//go:build linux

package s3test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a test process that starts a
// server and then dies by a panic, never reaching any cleanup.
const helperEnv = "WASMKEEP_S3TEST_HELPER"

func runHelper() int {
	srv, _, err := StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("root=%s\npid=%d\n", filepath.Dir(srv.DataDir), srv.proc.cmd.Process.Pid)
	panic("helper dies with its server running")
}

// TestServerDiesWithTestProcess: a test binary that panics takes its server
// with it. The test becomes a child subreaper, so the orphaned server is
// re-parented to it and it can wait for the server's death as an event.
func TestServerDiesWithTestProcess(t *testing.T) {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	t.Cleanup(func() { syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "root="); ok {
			// The helper never reaches its cleanup; do it for it.
			t.Cleanup(func() { os.RemoveAll(v) })
		}
		if v, ok := strings.CutPrefix(sc.Text(), "pid="); ok {
			pid, _ = strconv.Atoi(v)
			break
		}
	}
	if pid == 0 {
		cmd.Wait()
		t.Fatalf("helper did not report a server:\n%s", stderr.Bytes())
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(stderr.String(), "panic: helper dies") {
		t.Fatalf("helper did not die by its panic (%v):\n%s", err, stderr.Bytes())
	}

	// The server is now our child; wait for it, bounded, and kill it
	// ourselves if Pdeathsig failed to.
	died := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
		died <- ws
	}()
	select {
	case ws := <-died:
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("server ended with %v, want killed by SIGKILL", ws)
		}
	case <-time.After(30 * time.Second):
		syscall.Kill(pid, syscall.SIGKILL)
		<-died
		t.Fatalf("server %d outlived its test process", pid)
	}
}
