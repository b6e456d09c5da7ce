//go:build unix

package sockets

import "syscall"

// directWrites: sockets are written directly (direct.go) on this system.
const directWrites = true

// writeFD makes one write(2) of b on a non-blocking descriptor: the bytes
// taken, or -1 if none (a full send buffer, or an error the queue's
// writer meets again).
func writeFD(fd int32, b []byte) int {
	n, err := syscall.Write(int(fd), b)
	if err != nil {
		return -1
	}
	return n
}
