package main

import (
	"github.com/wasmkeep/wasmkeep/cli"
	"github.com/wasmkeep/wasmkeep/examples/chat"
)

func main() { cli.Main(cli.WithClass("chat", chat.Room{})) }
