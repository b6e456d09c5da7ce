package sqlitestore

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// Claims: a process that uses the directory may claim a name beside the
// store (a file under dir/claims, flocked), and hold it until it releases
// it or ends. flock locks are released by the kernel when the last open
// file description holding them is closed, which a process's end does,
// whatever way it ends: so a claim that another process held and that is
// free now proves that process has ended, or released it. A node claims
// its own id: a node started again after a crash finds its claim free and
// knows that its predecessor has ended, and with it every write it could
// still make (this store's writes are the process's own system calls:
// nothing of a process that has ended is still on its way). A process
// that is stopped (SIGSTOP) still holds its claim. The claims mean what
// the directory store's mean, in a directory laid out the same way.

// Claim takes the claim on name, without waiting: free is false while
// another open file description holds it (another process, or another
// claim of this one). The claim is held until release is called or the
// process ends.
func (s *Store) Claim(name string) (release func() error, free bool, err error) {
	dir := filepath.Join(s.dir, claimsName)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, false, fmt.Errorf("sqlitestore: claim %q: %w", name, err)
	}
	p := filepath.Join(dir, hex.EncodeToString([]byte(name)))
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, false, fmt.Errorf("sqlitestore: claim %q: %w", name, err)
	}
	got, err := tryLock(f)
	if err != nil || !got {
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("sqlitestore: claim %q: %w", name, err)
		}
		return nil, false, nil
	}
	return f.Close, true, nil
}
