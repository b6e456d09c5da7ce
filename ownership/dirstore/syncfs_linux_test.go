package dirstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncDirsSyncfs makes a batch durable with one syncfs(2) of the file
// system holding the directories, instead of an fsync per directory. It
// flushes every dirty file on that file system, other programs' too, and
// reports sync_fs errors only since Linux 5.17; BenchmarkConditionalPutParallel
// measures it against syncDirsParallel.
var syncDirsSyncfs = func(dirs []string) error {
	fd, err := openFD(dirs[0], unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return &os.PathError{Op: "syncfs", Path: dirs[0], Err: err}
	}
	return nil
}
