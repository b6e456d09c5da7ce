// Command room-wasm is the chat room of examples/chat as a wasm actor
// class (class "room-wasm" once built by `make examples`): the same page,
// the same protocol, its last 100 messages in storage and who is present
// in its sockets' attachments, so that it hibernates between messages
// while its people stay connected.
//
// Protocol (text messages). A JSON object (a message starting with "{"),
// as in package chat: {"type":"join","name":N} first, then
// {"type":"say","text":T}; to clients {"type":"history","messages":[...]}
// to a joiner, {"type":"said","message":M} to every member, and
// {"type":"presence","names":[...]} to every member when someone joins or
// leaves; a message is {"from":N,"text":T,"at":unix milliseconds}. Any
// other message is the peer benchmark's (bench/peer/workerd): a text
// message starting with "all:" is broadcast to every socket of the room
// (but a feed's), any other message, text or binary, is echoed back to its
// socket.
//
// A message "/version" has the room post which build of it runs (set at
// build time: -ldflags "-X main.version=2"; "1" otherwise): a deploy's new
// version shows there.
//
// A message "/remind 30s stretch" sets a reminder: an alarm of the room,
// which posts "stretch" from "reminder" when it is due, waking the room
// where its people are connected if it sleeps.
//
// A message "/ask http://host/path" has the room fetch it (ask.go) and
// post the first line of the answer from "web".
//
// A message "/follow ws://host/feed" has the room follow a feed (feed.go):
// it dials the feed, an outbound WebSocket (to a host the node's
// --egress-allow allows), and posts each of the feed's text messages from
// "feed", each waking the room if it sleeps; when the feed's socket
// closes, the room dials the URL its close names again. "/unfollow" stops.
//
// It decodes and encodes its few JSON shapes itself (json.go), to keep
// the module small and its start light. Its rooms share a few guests per
// node (guest.IsolationClass, the SDK's default); it keeps nothing in
// memory between events, so a room's object is only the SDK's.
//
// Build it with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o room-wasm.wasm ./examples/room-wasm
package main

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/examples/chat/page"
	"github.com/wasmkeep/wasmkeep/wasmhost/guest"
)

// historyKey holds the history: one JSON-encoded message a line, oldest
// first (an encoded message has no raw newline).
const historyKey = "history"

func init() {
	guest.Handle(serve)
	guest.HandleSocket(onSocket)
	guest.HandleAlarm(onAlarm)
}

// version is this build's, as /version says (-ldflags "-X main.version=N").
var version = "1"

// remind sets a reminder for a "/remind DURATION TEXT" message of from,
// and returns what the room posts for it then.
func remind(from, text string) (string, bool, error) {
	rest, ok := strings.CutPrefix(text, "/remind ")
	if !ok {
		return "", false, nil
	}
	in, what, _ := strings.Cut(strings.TrimSpace(rest), " ")
	d, err := time.ParseDuration(in)
	if err != nil || d <= 0 || strings.TrimSpace(what) == "" {
		return "reminders: /remind 30s stretch", true, nil
	}
	name := "remind-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := guest.Storage.Put("remind/"+name, []byte(from+": "+strings.TrimSpace(what))); err != nil {
		return "", true, err
	}
	if err := guest.SetAlarm(name, time.Now().Add(d)); err != nil {
		return "", true, err
	}
	return "reminder set for " + d.String() + " from now", true, nil
}

// onAlarm posts a reminder that came due to the room, or dials its feed
// again.
func onAlarm(a guest.Alarm) error {
	if a.Name == feedAlarm {
		return onFeedAlarm()
	}
	what, ok := guest.Storage.Get("remind/" + a.Name)
	if !ok {
		return nil
	}
	guest.Storage.Delete("remind/" + a.Name)
	return post("reminder", string(what))
}

// post keeps a message in the history and sends it to every member.
func post(from, text string) error {
	m := encodeMessage(from, text, time.Now().UnixMilli())
	if err := guest.Storage.Put(historyKey, appendHistory(m)); err != nil {
		return err
	}
	b := append([]byte(`{"type":"said","message":`), m...)
	toMembers(append(b, '}'))
	return nil
}

// serve serves the page, or accepts the page's WebSocket.
func serve(r *guest.Request) *guest.Response {
	if strings.EqualFold(r.HeaderValue("Upgrade"), "websocket") {
		return guest.Accept("member")
	}
	if r.Method != "GET" || r.Path != "" {
		return guest.Text(404, "not found\n")
	}
	return &guest.Response{
		Status: 200,
		Header: []guest.Field{{Name: "Content-Type", Value: "text/html; charset=utf-8"}},
		Body:   page.HTML,
	}
}

// onSocket runs the room.
func onSocket(ev *guest.SocketEvent) error {
	if ev.Socket.Dialed() {
		return onFeed(ev)
	}
	switch ev.Kind {
	case guest.SocketClose, guest.SocketError:
		// The socket is gone from the list already: tell who is left.
		broadcastPresence()
		return nil
	case guest.SocketMessage:
	default:
		return nil
	}
	if !ev.Text || len(ev.Data) == 0 || ev.Data[0] != '{' {
		if ev.Text && strings.HasPrefix(string(ev.Data), "all:") {
			guest.Sockets.Broadcast("member", true, ev.Data) // not to a feed
		} else {
			guest.Sockets.Send(ev.Socket, ev.Text, ev.Data)
		}
		return nil
	}
	in, ok := decodeObject(ev.Data)
	if !ok {
		guest.Sockets.Close(ev.Socket, 1003, "expected JSON text")
		return nil
	}
	switch in["type"] {
	case "join":
		name := page.Clean(in["name"], page.MaxName)
		if name == "" {
			guest.Sockets.Close(ev.Socket, 1008, "a name is required")
			return nil
		}
		if guest.Sockets.SetAttachment(ev.Socket, []byte(name)) != nil {
			return nil // the socket closed meanwhile
		}
		b := append([]byte(`{"type":"history","messages":[`), history()...)
		guest.Sockets.Send(ev.Socket, true, append(b, "]}"...))
		broadcastPresence()
	case "say":
		from, ok := guest.Sockets.Attachment(ev.Socket)
		if !ok {
			guest.Sockets.Close(ev.Socket, 1008, "join first")
			return nil
		}
		text := page.Clean(in["text"], page.MaxText)
		if text == "" {
			return nil
		}
		if note, ok, err := remind(string(from), text); ok || err != nil {
			if err != nil {
				return err
			}
			return post("reminder", note)
		}
		if text == "/version" {
			return post("room", "room-wasm version "+version)
		}
		if note, ok := ask(text); ok {
			return post(askFrom, note)
		}
		if note, ok, err := follow(text); ok || err != nil {
			if err != nil {
				return err
			}
			return post(feedFrom, note)
		}
		return post(string(from), text)
	}
	return nil
}

// history returns the stored messages as the elements of a JSON array.
func history() []byte {
	h, _ := guest.Storage.Get(historyKey)
	for i, c := range h {
		if c == '\n' {
			h[i] = ','
		}
	}
	return h
}

// appendHistory returns the stored history with m added, keeping the last
// page.HistoryLen messages.
func appendHistory(m []byte) []byte {
	h, _ := guest.Storage.Get(historyKey)
	if len(h) > 0 {
		h = append(h, '\n')
	}
	h = append(h, m...)
	if n := strings.Count(string(h), "\n") + 1; n > page.HistoryLen {
		for range n - page.HistoryLen {
			h = h[strings.IndexByte(string(h), '\n')+1:]
		}
	}
	return h
}

func encodeMessage(from, text string, at int64) []byte {
	b := append([]byte(`{"from":`), quote(from)...)
	b = append(b, `,"text":`...)
	b = append(b, quote(text)...)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, at, 10)
	return append(b, '}')
}

// toMembers sends b to every socket that joined (has a name): sockets of
// the plain protocol never get chat frames.
func toMembers(b []byte) {
	for _, s := range guest.Sockets.List("") {
		if len(s.Attachment) > 0 {
			guest.Sockets.Send(s.ID, true, b)
		}
	}
}

// broadcastPresence tells the members who is present: the names in the
// open sockets' attachments.
func broadcastPresence() {
	var names []string
	for _, s := range guest.Sockets.List("") {
		if len(s.Attachment) > 0 {
			names = append(names, string(s.Attachment))
		}
	}
	slices.Sort(names)
	b := []byte(`{"type":"presence"`)
	if len(names) > 0 { // as package chat, which omits an empty list
		b = append(b, `,"names":[`...)
		for i, n := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, quote(n)...)
		}
		b = append(b, ']')
	}
	toMembers(append(b, '}'))
}

// main is never called: a c-shared module runs only its initialisers.
func main() {}
