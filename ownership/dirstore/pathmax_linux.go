package dirstore

// pathMax is the longest path, terminating NUL included, that system calls
// accept.
const pathMax = 4096
