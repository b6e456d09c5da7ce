// Package guest is the Go SDK for wasmkeep actor classes written in Go and
// compiled to WebAssembly:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o class.wasm ./yourclass
//
// The class is a main package that registers its handler from an init
// function (a c-shared module runs its package initialisers when the host
// starts an instance, and never runs main):
//
//	func init() {
//		guest.Handle(func(r *guest.Request) *guest.Response {
//			n, _ := guest.Storage.Get("count")
//			...
//			return guest.Text(200, "ok\n")
//		})
//	}
//
//	func main() {}
//
// The package owns every export and import of the guest ABI
// (wasmhost/ABI.md); a class never declares its own. It uses neither fmt
// nor encoding/json, to keep modules small.
//
// # Guarantees
//
// An instance serves one actor, one event at a time, so handlers need no
// locks, and package variables live as long as the instance: use them as a
// cache, never as the actor's state, since the host may replace the
// instance at any time (hibernation, an error, a limit). Storage is the
// actor's durable state: the writes of one event commit together after the
// handler returns, and are discarded if the event fails. Storage.List reads
// a window of entries in key order, seeing the event's own writes;
// Storage.Batch applies several writes all or nothing.
//
// A panic that the handler does not recover ends the instance; its event
// fails with 500 and the next event runs on a fresh instance. A panic the
// handler recovers leaves the instance usable.
//
// Storage, Log and the Request methods may be called only from the
// goroutine that runs the handler, while it runs.
//
// Outside a wasm guest (GOOS other than wasip1) the package compiles, so
// that go vet and go build of a whole module pass, but calling Storage or
// Log panics.
package guest
