// Command custom-node is a wasmkeep node of your own: it registers a
// Go-native class next to the built-in ones and runs the standard node with
// every standard flag (`go run ./examples/custom-node serve --help`).
//
//	go run ./examples/custom-node serve
//	curl 'localhost:8080/actor/greeter/lobby?who=ada'    # hello ada, visitor 1 here
package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/cli"
)

// greeter greets whoever the query names and counts its visitors in the
// actor's storage.
type greeter struct{}

func (greeter) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	n := 0
	if v, ok := st.Get("visitors"); ok {
		n, _ = strconv.Atoi(string(v))
	}
	n++
	if err := st.Put("visitors", []byte(strconv.Itoa(n))); err != nil {
		return nil, err
	}
	who := req.Query.Get("who")
	if who == "" {
		who = "stranger"
	}
	return actors.Text(200, fmt.Sprintf("hello %s, visitor %d here\n", who, n)), nil
}

func main() { cli.Main(cli.WithClass("greeter", greeter{})) }
