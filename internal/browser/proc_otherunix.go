//go:build unix && !linux

package browser

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}

// groupLive reports the process group as live while any member, zombies
// included, is left; without /proc there is no cheap way to tell them apart.
func groupLive(pgid int) []int {
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return nil
	}
	return []int{pgid}
}
