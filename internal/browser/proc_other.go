//go:build !unix

package browser

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// killProcessGroup kills only the main process where process groups are not
// available.
func killProcessGroup(p *os.Process) error { return p.Kill() }

func groupLive(int) []int { return nil }
