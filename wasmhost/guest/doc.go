// Package guest is the Go SDK for wasmkeep actor classes written in Go and
// compiled to WebAssembly:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o class.wasm ./yourclass
//
// The class is a main package that registers its handler from an init
// function (a c-shared module runs its package initialisers when the host
// starts a guest, and never runs main):
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
// (wasmhost/ABI.md, version 2); a class never declares its own. Every
// module built with it exports wasmkeep_on_request, wasmkeep_on_socket,
// wasmkeep_on_leave and wasmkeep_isolation, and imports only the host
// functions it uses. It uses neither fmt nor encoding/json,
// to keep modules small.
//
// # Actors and isolation
//
// Every event names its actor: Current returns its Actor (class, name, and
// a Value of the class's own), which the package makes at the actor's
// first event on the guest and drops when the host says the actor left
// memory (HandleLeave sees it first). By default (IsolationClass) a few
// guests per node serve all the class's resident actors, each many of
// them, at the cost of a small object per actor: package variables are
// then shared by those actors, so what is one actor's goes in its
// Actor.Value (or its storage), never in a package variable. A class that
// wants a guest of its own per resident actor (1.3 to 1.7 MB each) opts in
// from an init function:
//
//	func init() {
//		guest.SetIsolation(guest.IsolationActor)
//		guest.Handle(serve)
//	}
//
// The node may override either (wasmkeep serve --wasm-isolation). Storage, SQL, Sockets and Call always act for the
// event's actor alone: the host binds them to the event.
//
// # Guarantees
//
// A guest runs one event at a time, so handlers need no locks, and
// package variables and Actor values live at most as long as the guest:
// use them as a cache, never as the actor's state, since the host may
// replace the guest at any time (hibernation, an error, a limit).
// Storage is the actor's durable state: the writes of one event commit
// together after the handler returns, and are discarded if the event
// fails. Storage.List reads a window of entries in key order, seeing the
// event's own writes; Storage.Batch applies several writes all or nothing
// (Storage.PutMany, several puts); Storage.GetMany reads many keys in one
// host call (per 128 keys); Storage.DeleteAll removes every key, committed
// with the event's other writes or not at all.
//
// SQL is the actor's SQL database (SQLite, its pages in the actor's
// storage): Exec runs statements and Query returns rows, with ? parameters
// of the Go types that match SQL's (nil, integers, floats, strings,
// []byte). SQL writes commit with the event's Storage writes, or not at
// all; the event is the transaction.
//
//	guest.SQL.Exec("CREATE TABLE IF NOT EXISTS seen(who TEXT, at INTEGER)")
//	guest.SQL.Exec("INSERT INTO seen VALUES (?, ?)", who, now)
//	rows, err := guest.SQL.Query("SELECT who, at FROM seen ORDER BY at")
//
// A statement the database refuses fails with an *SQLError carrying
// SQLite's message; one past the actor's bound with one that is ErrLimit
// too (errors.Is), for a 413.
//
// An actor keeps named alarms (SetAlarm, GetAlarm, DeleteAlarm,
// ListAlarms); when one is due the node runs the handler registered with
// HandleAlarm as an event of the actor, waking it if it sleeps, wherever
// it is held. Setting and deleting alarms are writes of the event; the
// alarm ends with its event unless the event set it again, and a handler
// that returns an error has it delivered again later (Alarm.Retry).
//
//	guest.HandleAlarm(func(a guest.Alarm) error {
//		guest.Sockets.Broadcast("room", true, []byte("tick"))
//		return guest.SetAlarm(a.Name, a.At.Add(time.Minute)) // every minute
//	})
//
// Fetch sends an HTTP request to a service outside the cluster, where the
// node's --egress-allow lets it go, and returns the whole answer. Like
// Call, it is a commit point: the event's writes so far are durable before
// the request leaves.
//
// A handler rolls its event back with Rollback: the client gets the
// response it chose, and its writes and socket output are discarded.
//
//	if sold < n {
//		return guest.Rollback(guest.Text(409, "sold out\n"))
//	}
//
// A panic that the handler does not recover ends the guest; its event
// fails with 500 and the next event runs on a fresh guest (in
// IsolationClass, with the Actors of every actor it served: their next
// events make them again). A panic the handler recovers leaves the
// guest usable.
//
// # WebSockets
//
// A request handler accepts a WebSocket upgrade by returning
// Accept(tags...); the socket then belongs to the node, and what arrives on
// it goes to the handler registered with HandleSocket, on whatever guest
// serves the actor then:
//
//	func init() {
//		guest.Handle(func(r *guest.Request) *guest.Response {
//			return guest.Accept("member")
//		})
//		guest.HandleSocket(func(ev *guest.SocketEvent) error {
//			if ev.Kind == guest.SocketMessage {
//				guest.Sockets.Send(ev.Socket, ev.Text, ev.Data) // echo
//			}
//			return nil
//		})
//	}
//
// In any event, Sockets sends, broadcasts by tag and closes (queued, going
// out after the event's writes are durable, and not at all if it fails),
// lists the actor's sockets, and keeps a small attachment per socket that
// outlives hibernation (SetAttachment, at once). See examples/room-wasm.
//
// DialSocket opens an outbound WebSocket to a service outside the cluster,
// where the node's --egress-allow lets it go; like Fetch it is a commit
// point. The socket belongs to the node as an accepted one does, and its
// events come to the HandleSocket handler (SocketID.Dialed tells them
// apart). Its close comes exactly once, with the URL and tags it was
// dialed with, at the actor's next wake wherever it is if the socket
// closed while the actor was away (code 1006), so that the actor can dial
// again:
//
//	id, err := guest.DialSocket("wss://feed.example.com/news", nil, "feed")
//	...
//	if ev.Socket.Dialed() && ev.Kind != guest.SocketMessage {
//		guest.DialSocket(ev.URL, nil, ev.Tags...) // follow it again
//	}
//
// # Calls
//
// Call sends a request to another actor and waits for its response:
//
//	resp, err := guest.Call("counter", "visits", &guest.Request{Method: "GET"})
//
// The event's writes so far are committed before the request leaves; the
// callee runs it as an event of its own, on this node or the one holding
// it. A call back into an actor of the same call chain fails at once with
// ErrCallCycle, since that actor waits for this very call.
//
// Storage, SQL, Log, Sockets, Accept, Call, Rollback and the Request
// methods may be called only from the goroutine that runs a handler, while
// it runs.
//
// Outside a wasm guest (GOOS other than wasip1) the package compiles, so
// that go vet and go build of a whole module pass, and its unit tests run,
// but calling Storage, SQL, Sockets, Call, Rollback or Log panics.
package guest
