//go:build !unix

package budget

// FileLimit is the number of files a process may open where no file limit
// can be read: the descriptor budget divides this.
func FileLimit() (int, error) { return 16384, nil }
