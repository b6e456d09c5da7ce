//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package sqlitestore

import (
	"os"
)

// syncDir flushes the directory dir, making the creation of its entries
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
