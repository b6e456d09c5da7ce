// Command front is a test guest that serves as a node's front: /hello
// answers by itself, /count calls the counter actor "counter/c" and
// answers its count, /room/NAME hands the request to the chat room NAME
// (Wasmkeep-Route), /put tries the storage a front does not have, and
// /secret reads a secret.
package main

import (
	"strings"

	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

func init() { guest.Handle(serve) }

func serve(r *guest.Request) *guest.Response {
	switch {
	case r.Path == "/hello":
		return guest.Text(200, "hello from the front\n")
	case r.Path == "/count":
		resp, err := guest.Call("counter", "c", &guest.Request{Method: "GET"})
		if err != nil {
			return guest.Text(502, "call: "+err.Error()+"\n")
		}
		return guest.Text(200, "count "+strings.TrimSpace(string(resp.Body))+"\n")
	case strings.HasPrefix(r.Path, "/room/"):
		return &guest.Response{Status: 200, Header: []guest.Field{{Name: "Wasmkeep-Route", Value: "chat/" + strings.TrimPrefix(r.Path, "/room/")}}}
	case r.Path == "/put":
		if err := guest.Storage.Put("k", []byte("v")); err != nil {
			return guest.Text(200, "no storage: "+err.Error()+"\n")
		}
		return guest.Text(500, "a front stored something\n")
	}
	return guest.Text(404, "front: not found\n")
}

func main() {}
