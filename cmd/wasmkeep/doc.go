// Command wasmkeep runs and inspects wasmkeep clusters. `wasmkeep --help`
// lists every command and flag. The command line itself is package cli;
// this program calls cli.Main with the example chat room (examples/chat)
// registered as the class chat, and is wiring only.
package main
