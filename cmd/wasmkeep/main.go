package main

import "github.com/wasmkeep/wasmkeep/cli"

func main() { cli.Main() }
