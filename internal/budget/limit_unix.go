//go:build unix

package budget

import (
	"fmt"
	"syscall"
)

// FileLimit is the process's file limit (RLIMIT_NOFILE, soft). The Go
// runtime raises the soft limit to the hard one at start, so this is what
// the process may open.
func FileLimit() (int, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("read the file limit: %w", err)
	}
	if rl.Cur > 1<<30 {
		return 1 << 30, nil
	}
	return int(rl.Cur), nil
}
