// Command tenant is a test guest for wasmhost's class isolation: many
// actors of the class share each of its guests, and it tries, from one
// actor's events, to reach what is another's. What it remembers of other
// actors (their storage keys, their socket ids) it keeps in package
// variables, which the actors of one shared guest share; the host must
// refuse every use of them.
package main

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"

	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

const maxLeftNames = 256

// object is an actor's Value: its events on this guest.
type object struct{ events int }

var (
	// guestID names this guest, drawn at its start.
	guestID = strconv.FormatUint(rand.Uint64(), 36)
	// events counts the events this guest served, of any actor.
	events int
	// leaves counts the actors it was told left, and leftNames names those
	// since the last /leaves.
	leaves    int
	leftNames []string
	// keys are the storage keys any actor of this guest wrote.
	keys []string
	// socketsOf is the socket ids of each actor of this guest, by name.
	socketsOf = map[string][]guest.SocketID{}
	// leaveStorage makes the next leave try storage, which the host refuses.
	leaveStorage bool
	sink         []byte
)

func init() {
	guest.SetIsolation(guest.IsolationClass)
	guest.Handle(serve)
	guest.HandleSocket(onSocket)
	guest.HandleLeave(func(a *guest.Actor) {
		leaves++
		if len(leftNames) == maxLeftNames {
			leftNames = append(leftNames[:0], leftNames[1:]...)
		}
		leftNames = append(leftNames, a.Name)
		if leaveStorage {
			guest.Storage.Get("x")
		}
	})
}

// self returns the current actor's object, counting the event.
func self() (*guest.Actor, *object) {
	events++
	a := guest.Current()
	o, _ := a.Value.(*object)
	if o == nil {
		o = &object{}
		a.Value = o
	}
	o.events++
	return a, o
}

func serve(r *guest.Request) *guest.Response {
	a, o := self()
	q := func(k string) string { v, _ := r.Query(k); return v }
	if strings.EqualFold(r.HeaderValue("Upgrade"), "websocket") {
		return guest.Accept("t")
	}
	switch r.Path {
	case "/id":
		// Who the event is for, as the guest learns it, and where it runs.
		return guest.Text(200, a.Class+"/"+a.Name+" events="+strconv.Itoa(o.events)+" guest="+guestID+
			" guest-events="+strconv.Itoa(events)+" actors="+strconv.Itoa(guest.Actors()))
	case "/put":
		k := q("k")
		if err := guest.Storage.Put(k, []byte(q("v"))); err != nil {
			return guest.Text(500, err.Error())
		}
		keys = append(keys, k)
		return guest.Text(200, "put")
	case "/get":
		v, ok := guest.Storage.Get(q("k"))
		if !ok {
			return guest.Text(404, "missing")
		}
		return guest.Text(200, string(v))
	case "/steal":
		// Every key written on this guest, or named: read them, list the
		// whole storage, then overwrite and delete them.
		try := append([]string(nil), keys...)
		if k := q("keys"); k != "" {
			try = append(try, strings.Split(k, ",")...)
		}
		var out []string
		for _, k := range try {
			if v, ok := guest.Storage.Get(k); ok {
				out = append(out, "got "+k+"="+string(v))
			}
		}
		entries, _ := guest.Storage.List(guest.ListOptions{})
		for _, e := range entries {
			out = append(out, "listed "+e.Key+"="+string(e.Value))
		}
		for _, k := range try {
			guest.Storage.Put(k, []byte("overwritten by "+a.Name))
			guest.Storage.Delete(k + "/other")
		}
		return guest.Text(200, strings.Join(out, "\n"))
	case "/leaves":
		return guest.Text(200, "leaves="+strconv.Itoa(leaves)+" actors="+strconv.Itoa(guest.Actors())+" left="+strings.Join(leftNames, ","))
	case "/gc":
		// The bytes the heap holds once collected, and the objects held.
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return guest.Text(200, "live="+strconv.FormatUint(ms.HeapAlloc, 10)+" actors="+strconv.Itoa(guest.Actors()))
	case "/leave-storage":
		leaveStorage = true
		return guest.Text(200, "armed")
	case "/panic":
		panic("tenant " + a.Name + " fails")
	case "/loop":
		for {
			events++
		}
	case "/grow":
		for {
			sink = append(sink, make([]byte, 1<<20)...)
		}
	case "/call":
		resp, err := guest.Call(q("class"), q("name"), &guest.Request{Method: "GET", Path: q("path")})
		if err != nil {
			return guest.Text(200, "error: "+err.Error())
		}
		return guest.Text(200, strconv.Itoa(resp.Status)+" "+string(resp.Body))
	}
	return guest.Text(404, "no such path")
}

// onSocket serves commands, "verb args", answering on the socket:
//
//	id               the socket's id (remembered under the actor's name)
//	att DATA         set the socket's attachment; answers "att=" and what it holds
//	getatt           answers "att=" and the socket's attachment
//	steal VICTIM     try every socket function on VICTIM's remembered sockets
//	echo DATA        DATA
func onSocket(ev *guest.SocketEvent) error {
	a, _ := self()
	if ev.Kind != guest.SocketMessage {
		return nil
	}
	reply := func(s string) { guest.Sockets.Send(ev.Socket, true, []byte(s)) }
	verb, args, _ := strings.Cut(string(ev.Data), " ")
	switch verb {
	case "id":
		socketsOf[a.Name] = append(socketsOf[a.Name], ev.Socket)
		reply(strconv.FormatUint(uint64(ev.Socket), 10))
	case "getatt":
		got, _ := guest.Sockets.Attachment(ev.Socket)
		reply("att=" + string(got))
	case "att":
		if err := guest.Sockets.SetAttachment(ev.Socket, []byte(args)); err != nil {
			reply("att refused")
			return nil
		}
		got, _ := guest.Sockets.Attachment(ev.Socket)
		reply("att=" + string(got))
	case "steal":
		// The victim's ids from shared memory, or given.
		ids := socketsOf[args]
		if n, err := strconv.ParseUint(args, 10, 64); err == nil {
			ids = append(ids, guest.SocketID(n))
		}
		var out []string
		for _, id := range ids {
			guest.Sockets.Send(id, true, []byte("stolen send from "+a.Name))
			if err := guest.Sockets.SetAttachment(id, []byte("stolen")); err == nil {
				out = append(out, "set attachment")
			}
			if att, ok := guest.Sockets.Attachment(id); ok {
				out = append(out, "read attachment "+string(att))
			}
			if _, ok := guest.Sockets.LastAutoResponse(id); ok {
				out = append(out, "auto-response time")
			}
			guest.Sockets.Close(id, 4000, "stolen close")
		}
		guest.Sockets.Broadcast("t", true, []byte("broadcast from "+a.Name))
		for _, s := range guest.Sockets.List("") {
			out = append(out, "listed "+strconv.FormatUint(uint64(s.ID), 10))
		}
		reply("stole " + strconv.Itoa(len(ids)) + ": " + strings.Join(out, "; "))
	case "echo":
		reply(args)
	}
	return nil
}

func main() {}
