package main

import (
	"errors"
	"strconv"
	"strings"

	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

// Socket events: a text message is a command, "verb args", that exercises
// one socket function and sends its outcome back to the socket (a dialed
// socket's too: its service sends the commands). A close or error event is
// recorded in storage under "closed/<id>", with a dialed socket's URL and
// tags.

func init() { guest.HandleSocket(onSocket) }

func onSocket(ev *guest.SocketEvent) error {
	events++
	id := strconv.FormatUint(uint64(ev.Socket), 10)
	switch ev.Kind {
	case guest.SocketClose:
		clean := "unclean"
		if ev.Clean {
			clean = "clean"
		}
		return guest.Storage.Put("closed/"+id, []byte(strconv.Itoa(ev.Code)+" "+ev.Reason+" "+clean+dialed(ev)))
	case guest.SocketError:
		return guest.Storage.Put("closed/"+id, []byte(strconv.Itoa(ev.Code)+" error "+ev.Err+dialed(ev)))
	}
	if !ev.Text {
		guest.Sockets.Send(ev.Socket, false, append([]byte("bin:"), ev.Data...))
		return nil
	}
	reply := func(s string) { guest.Sockets.Send(ev.Socket, true, []byte(s)) }
	verb, args := cut(string(ev.Data), ' ')
	switch verb {
	case "echo":
		reply(args)
	case "bcast":
		tag, data := cut(args, ' ')
		guest.Sockets.Broadcast(tag, true, []byte(data))
	case "close":
		code, reason := cut(args, ' ')
		n, _ := strconv.Atoi(code)
		guest.Sockets.Close(ev.Socket, n, reason)
	case "list":
		var parts []string
		for _, s := range guest.Sockets.List(args) {
			part := strconv.FormatUint(uint64(s.ID), 10) + ":" + strings.Join(s.Tags, ",") + ":" + string(s.Attachment)
			if s.URL != "" {
				part += ":" + s.URL
			}
			parts = append(parts, part)
		}
		reply(strings.Join(parts, ";"))
	case "att-set":
		if err := guest.Sockets.SetAttachment(ev.Socket, []byte(args)); err != nil {
			reply("refused")
		} else {
			reply("ok")
		}
	case "att-big":
		if err := guest.Sockets.SetAttachment(ev.Socket, make([]byte, guest.MaxAttachment+1)); err != nil {
			reply("refused")
		} else {
			reply("ok")
		}
	case "att-get":
		n, _ := strconv.ParseUint(args, 10, 64)
		if att, ok := guest.Sockets.Attachment(guest.SocketID(n)); ok {
			reply("att:" + string(att))
		} else {
			reply("none")
		}
	case "auto":
		req, resp := cut(args, ' ')
		if err := guest.Sockets.SetAutoResponse(req, resp); err != nil {
			reply("refused")
		} else {
			reply("ok")
		}
	case "last-auto":
		n, _ := strconv.ParseUint(args, 10, 64)
		if at, ok := guest.Sockets.LastAutoResponse(guest.SocketID(n)); ok {
			reply("at:" + strconv.FormatInt(at, 10))
		} else {
			reply("gone")
		}
	case "accept":
		reply(strconv.Itoa(int(guest.Accept("x").Status)))
	case "raw-send":
		// Flags the host does not know.
		reply(strconv.Itoa(int(rawSend(uint64(ev.Socket), 1<<5, []byte("x")))))
	case "raw-close":
		code, reason := cut(args, ' ')
		n, _ := strconv.Atoi(code)
		reply(strconv.Itoa(int(rawClose(uint64(ev.Socket), int32(n), reason))))
	case "oob":
		rawSendOutOfRange(uint64(ev.Socket))
	case "put":
		k, v := cut(args, ' ')
		if err := guest.Storage.Put(k, []byte(v)); err != nil {
			return err
		}
		reply("put")
	case "rollback":
		// Put, reply, broadcast and close, then roll it all back.
		k, v := cut(args, ' ')
		guest.Storage.Put(k, []byte(v))
		reply("rolling back")
		guest.Sockets.Broadcast("", true, []byte("rolled back broadcast"))
		guest.Sockets.Close(ev.Socket, 1000, "rolled back close")
		guest.Rollback(nil)
	case "fail":
		guest.Storage.Put("failed", []byte("yes"))
		reply("failing")
		return errors.New("asked to fail")
	case "events":
		reply(strconv.Itoa(events))
	default:
		reply("unknown " + verb)
	}
	return nil
}

// dialed describes the dialed socket an event's URL and tags name: " url
// tags", or "" for an accepted socket's event.
func dialed(ev *guest.SocketEvent) string {
	if !ev.Socket.Dialed() {
		return ""
	}
	return " " + ev.URL + " " + strings.Join(ev.Tags, ",")
}
