package browser

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// setParentDeathSignal has the kernel kill Chromium if the test process dies
// without calling Close, so an interrupted test leaves no browser behind.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// groupLive returns the processes of process group pgid that are still
// running. Zombies are not counted: Chromium's orphaned helpers are reaped
// by init, which here can take over a second after they have died.
func groupLive(pgid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var live []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // exited while we looked
		}
		// Format: pid (comm) state ppid pgrp ...; comm may hold spaces
		// and parentheses, so parse from the last ')'.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(data[i+1:])
		if len(f) < 3 {
			continue
		}
		state := f[0][0]
		if pg, err := strconv.Atoi(string(f[2])); err != nil || pg != pgid || state == 'Z' || state == 'X' {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		live = append(live, pid)
	}
	return live
}
