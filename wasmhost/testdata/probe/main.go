// Command probe is a test guest for wasmhost: each path exercises one of
// the host's limits or guarantees.
package main

import (
	"strconv"

	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

// events counts the events this instance served, so that tests can tell a
// kept instance from a fresh one.
var events int

var sink []byte

func init() { guest.Handle(serve) }

func serve(r *guest.Request) *guest.Response {
	events++
	switch r.Path {
	case "/events":
	case "/loop":
		for {
			events++
		}
	case "/recover":
		func() {
			defer func() { _ = recover() }()
			panic("recovered")
		}()
	case "/panic":
		panic("not recovered")
	case "/grow":
		// Allocate 1 MiB at a time until the host's memory limit stops us.
		for {
			sink = append(sink, make([]byte, 1<<20)...)
		}
	case "/spin":
		n, _ := r.Query("n")
		iters, _ := strconv.Atoi(n)
		x := uint64(1)
		for i := 0; i < iters; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		return guest.Text(200, strconv.FormatUint(x, 10))
	case "/echo":
		resp := &guest.Response{Status: 201, Body: r.Body}
		resp.Header = append(resp.Header, guest.Field{Name: "X-Method", Value: r.Method})
		resp.Header = append(resp.Header, guest.Field{Name: "X-Query", Value: r.RawQuery})
		resp.Header = append(resp.Header, guest.Field{Name: "X-Token", Value: r.HeaderValue("x-token")})
		return resp
	case "/limit":
		if err := guest.Storage.Put("", []byte("x")); err != guest.ErrLimit {
			return guest.Text(500, "empty key accepted")
		}
		return guest.Text(200, "refused")
	case "/nil":
		return nil
	case "/log":
		guest.Log(guest.LevelInfo, "hello from the guest")
	}
	return guest.Text(200, strconv.Itoa(events))
}

func main() {}
