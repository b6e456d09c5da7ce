//go:build unix

package browser

import (
	"os"
	"syscall"
)

// sysProcAttr puts Chromium in a process group of its own, so that Close can
// kill its helper processes (zygote, renderers, GPU, network) along with it.
func sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(attr)
	return attr
}

// killProcessGroup sends SIGKILL to the process group p leads.
func killProcessGroup(p *os.Process) error {
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil // already gone
	}
	return err
}
