//go:build !linux

package dirstore

// pathMax is the longest path, terminating NUL included, that system calls
// accept: 1,024 bytes on macOS and the BSDs; assumed elsewhere too.
const pathMax = 1024
