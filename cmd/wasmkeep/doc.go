// Command wasmkeep runs and inspects wasmkeep clusters. `wasmkeep --help`
// lists every command and flag. The command line itself is package cli;
// this program only calls cli.Main.
package main
