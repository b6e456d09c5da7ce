// Package cli is the wasmkeep command line, with its flags, help and exit
// codes: `wasmkeep serve`; `bucket check`; `cluster status`, `drain`,
// `undrain`, `move` and `fence`; `actors list`, `get`, `sql`, `export` and
// `import`, which look inside actors through the bucket with no node
// running; `version`.
//
// It is a package, not only a command, so that a program of your own can
// register Go-native classes and run the standard node with every standard
// flag (see examples/custom-node):
//
//	func main() { cli.Main(cli.WithClass("greeter", greeter{})) }
//
// Structure: cli.go holds the command tree and what every command shares:
// flag parsing with the standard flag package, help, exit codes. Each group
// of commands has its own file (serve.go, bucket.go, cluster.go,
// actors.go) and follows one shape: flags fill a config, the config's
// Validate rejects what cannot work before anything is touched, then a run
// function does the work; logic beyond wiring lives in a package
// (bucketcheck.Run, ownership/cluster, node.Start, actorstore.ReadActor). Adding a command is adding one entry to the tree in
// commands() and one such file.
//
// Exit codes: 0 success; 1 the command ran and failed or found a problem
// (an unsound bucket); 2 the command line was wrong.
//
// Run keeps no global state, so tests call it in-process, one call per
// goroutine.
package cli
