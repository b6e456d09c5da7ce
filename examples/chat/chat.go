// Package chat is a chat room as a Go-native actor class: every node serves
// it as class "chat". A browser opens /actor/chat/<room> for the page; the
// page opens a WebSocket to the same address. The room keeps its last 100
// messages in storage and who is present in its sockets' attachments, so it
// hibernates between messages while its people stay connected, and wakes
// where their sockets are.
//
// Protocol (JSON text messages). From a client: {"type":"join","name":N}
// first, then {"type":"say","text":T}. To clients: {"type":"history",
// "messages":[...]} to a joiner, {"type":"said","message":M} to every member,
// {"type":"presence","names":[...]} to every member when someone joins or
// leaves. A message is {"from":N,"text":T,"at":unix milliseconds}.
//
// A message that is not a JSON object is the plain protocol of the peer
// benchmark's room: it is echoed to its socket, or broadcast to every
// socket of the room when it starts with "all:".
package chat

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/examples/chat/page"
	"github.com/wasmkeep/wasmkeep/ownership"
)

// Limits of one room (shared with the wasm room, in package page).
const (
	HistoryLen = page.HistoryLen
	MaxName    = page.MaxName
	MaxText    = page.MaxText
)

// Room is the class.
type Room struct{}

// Message is one line of the room's history.
type Message struct {
	From string `json:"from"`
	Text string `json:"text"`
	At   int64  `json:"at"`
}

type inbound struct {
	Type string `json:"type"`
	Name string `json:"name"`
	Text string `json:"text"`
}

type outbound struct {
	Type     string    `json:"type"`
	Messages []Message `json:"messages,omitempty"`
	Message  *Message  `json:"message,omitempty"`
	Names    []string  `json:"names,omitempty"`
}

const historyKey = "history"

// Handle serves the page, accepts the page's WebSocket, or says what a
// POST /say?from=NAME&text=TEXT asks (an announcement from outside the
// room: its front calls it so).
func (Room) Handle(ctx context.Context, req *actors.Request, st actors.Storage) (*actors.Response, error) {
	if req.IsUpgrade() {
		return actors.AcceptSocket("member"), nil
	}
	if req.Method == http.MethodPost && req.Path == "/say" {
		from, text := page.Clean(req.Query.Get("from"), MaxName), page.Clean(req.Query.Get("text"), MaxText)
		if from == "" || text == "" {
			return actors.Text(http.StatusBadRequest, "from and text are required\n"), nil
		}
		if err := say(ctx, st, from, text); err != nil {
			return nil, err
		}
		return actors.Text(http.StatusOK, "said\n"), nil
	}
	if req.Method != http.MethodGet || req.Path != "" {
		return actors.Text(http.StatusNotFound, "not found\n"), nil
	}
	h := http.Header{}
	h.Set("Content-Type", "text/html; charset=utf-8")
	return &actors.Response{Status: http.StatusOK, Header: h, Body: page.HTML}, nil
}

// HandleSocket runs the room.
func (Room) HandleSocket(ctx context.Context, ev *actors.SocketEvent, st actors.Storage) error {
	ws := actors.SocketsOf(ctx)
	switch ev.Kind {
	case actors.SocketClose, actors.SocketError:
		// The socket is gone from the list already: tell who is left.
		toMembers(ws, outbound{Type: "presence", Names: names(ws)})
		return nil
	case actors.SocketMessage:
	default:
		return nil
	}
	if !ev.Text || len(ev.Data) == 0 || ev.Data[0] != '{' {
		// The plain protocol (the peer benchmark's room): echo, or
		// broadcast what starts with "all:".
		if ev.Text && strings.HasPrefix(string(ev.Data), "all:") {
			ws.Broadcast("", true, ev.Data)
		} else {
			ws.Send(ev.Socket, ev.Text, ev.Data)
		}
		return nil
	}
	var in inbound
	if json.Unmarshal(ev.Data, &in) != nil {
		ws.Close(ev.Socket, 1003, "bad JSON")
		return nil
	}
	switch in.Type {
	case "join":
		name := page.Clean(in.Name, MaxName)
		if name == "" {
			ws.Close(ev.Socket, 1008, "a name is required")
			return nil
		}
		if err := ws.SetAttachment(ev.Socket, []byte(name)); err != nil {
			return nil // the socket closed meanwhile
		}
		send(ws, ev.Socket, outbound{Type: "history", Messages: history(st)})
		toMembers(ws, outbound{Type: "presence", Names: names(ws)})
	case "say":
		from, err := ws.Attachment(ev.Socket)
		if err != nil || len(from) == 0 {
			ws.Close(ev.Socket, 1008, "join first")
			return nil
		}
		text := page.Clean(in.Text, MaxText)
		if text == "" {
			return nil
		}
		return say(ctx, st, string(from), text)
	}
	return nil
}

// say keeps a message in the history and sends it to every member.
func say(ctx context.Context, st actors.Storage, from, text string) error {
	m := Message{From: from, Text: text, At: time.Now().UnixMilli()}
	hist := append(history(st), m)
	if len(hist) > HistoryLen {
		hist = hist[len(hist)-HistoryLen:]
	}
	b, err := json.Marshal(hist)
	if err != nil {
		return err
	}
	if err := st.Put(historyKey, b); err != nil {
		return err
	}
	toMembers(actors.SocketsOf(ctx), outbound{Type: "said", Message: &m})
	return nil
}

// Front is the chat's front (actors.Front), registered by the wasmkeep
// binary: it serves the lobby's page at /, each room's at /room/NAME
// (their WebSockets too), and POST /room/NAME/say?from=F&text=T says T in
// the room as F, calling the room wherever it is (it wakes where its
// people's sockets are).
type Front struct{}

// ServeFront routes a request to its room.
func (Front) ServeFront(ctx context.Context, req *actors.Request) (*actors.Response, error) {
	parts := strings.Split(strings.Trim(req.Path, "/"), "/")
	switch {
	case req.Path == "/":
		return actors.RouteTo(ownership.Actor{Class: "chat", Name: "lobby"}, ""), nil
	case len(parts) == 2 && parts[0] == "room" && parts[1] != "":
		return actors.RouteTo(ownership.Actor{Class: "chat", Name: parts[1]}, ""), nil
	case len(parts) == 3 && parts[0] == "room" && parts[1] != "" && parts[2] == "say" && req.Method == http.MethodPost:
		resp, err := actors.Call(ctx, ownership.Actor{Class: "chat", Name: parts[1]},
			&actors.Request{Method: http.MethodPost, Path: "/say", Query: req.Query})
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
	return actors.Text(http.StatusNotFound, "not found: / is the lobby, /room/NAME a room\n"), nil
}

func history(st actors.Storage) []Message {
	var h []Message
	if b, ok := st.Get(historyKey); ok {
		_ = json.Unmarshal(b, &h) // written only by this class
	}
	return h
}

// names lists who is present: the names in the open sockets' attachments.
func names(ws actors.Sockets) []string {
	var out []string
	for _, s := range ws.List("") {
		if len(s.Attachment) > 0 {
			out = append(out, string(s.Attachment))
		}
	}
	slices.Sort(out)
	return out
}

func send(ws actors.Sockets, id actors.SocketID, m outbound) {
	if b, err := json.Marshal(m); err == nil {
		ws.Send(id, true, b)
	}
}

// toMembers sends m to every socket that joined (has a name): sockets of
// the plain protocol never get chat frames.
func toMembers(ws actors.Sockets, m outbound) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	for _, s := range ws.List("") {
		if len(s.Attachment) > 0 {
			ws.Send(s.ID, true, b)
		}
	}
}
