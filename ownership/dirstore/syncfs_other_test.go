//go:build !linux

package dirstore

// syncDirsSyncfs is Linux-only (see syncfs_linux_test.go).
var syncDirsSyncfs func(dirs []string) error
