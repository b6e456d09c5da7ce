package node

import "github.com/wasmkeep/wasmkeep/supervisors"

// WithFaults makes every actor of the node's tree call f before each of its
// messages (f's panic is that actor's failure), and the socket owner call
// it with RoleSockets before it hands the node a socket's message (f's
// panic is a failure of that actor's socket owner), for the tests of each
// role's failure.
func WithFaults(cfg *Config, f func(role supervisors.Role, msg any)) { cfg.faults = f }
