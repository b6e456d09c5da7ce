package main

import (
	"github.com/wasmkeep/wasmkeep/cli"
	"github.com/wasmkeep/wasmkeep/examples/chat"
	"github.com/wasmkeep/wasmkeep/examples/relay"
	"github.com/wasmkeep/wasmkeep/examples/reminders"
)

func main() {
	cli.Main(cli.WithClass("chat", chat.Room{}), cli.WithFront(chat.Front{}), cli.WithClass("reminders", reminders.Reminders{}), cli.WithClass("relay", relay.Relay{}))
}
