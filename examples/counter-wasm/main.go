// Command counter-wasm is the example wasm actor class: a counter kept in
// the actor's storage. GET increments it and returns the new value as
// text; GET with ?read returns it without writing, GET with ?version the
// build's version; other methods get 405.
// It is the wasm twin of the Go-native actors.Counter. Its actors share a
// few guests per node (guest.IsolationClass, the SDK's default): a
// resident counter costs its object there, not a guest of its own.
//
// Build it with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o counter.wasm ./examples/counter-wasm
package main

import (
	"strconv"

	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

func init() {
	guest.Handle(serve)
}

// version is this build's (-ldflags "-X main.version=N"), answered to
// GET ?version: a deploy's new version shows there.
var version = "1"

func serve(r *guest.Request) *guest.Response {
	if _, ok := r.Query("version"); ok {
		return guest.Text(200, "counter-wasm version "+version+"\n")
	}
	if r.Method != "GET" {
		resp := guest.Text(405, "counter: only GET\n")
		resp.Header = append(resp.Header, guest.Field{Name: "Allow", Value: "GET"})
		return resp
	}
	n := 0
	if v, ok := guest.Storage.Get("count"); ok {
		var err error
		if n, err = strconv.Atoi(string(v)); err != nil {
			return guest.Text(500, "counter: stored count is not a number\n")
		}
	}
	if _, read := r.Query("read"); !read {
		n++
		if err := guest.Storage.Put("count", []byte(strconv.Itoa(n))); err != nil {
			return guest.Text(500, "counter: "+err.Error()+"\n")
		}
	}
	return guest.Text(200, strconv.Itoa(n)+"\n")
}

// main is never called: a c-shared module runs only its initialisers.
func main() {}
