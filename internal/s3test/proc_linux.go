//go:build linux

package s3test

import (
	"os/exec"
	"syscall"
)

// bindToParent asks the kernel to SIGKILL the server when the thread that
// started it dies. The caller starts the server from a goroutine locked to
// its OS thread for the server's whole life, so that thread dies only with
// the test process (or after the server has exited).
func bindToParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
