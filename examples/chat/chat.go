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

// Handle serves the page, or accepts the page's WebSocket.
func (Room) Handle(_ context.Context, req *actors.Request, _ actors.Storage) (*actors.Response, error) {
	if req.IsUpgrade() {
		return actors.AcceptSocket("member"), nil
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
		m := Message{From: string(from), Text: text, At: time.Now().UnixMilli()}
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
		toMembers(ws, outbound{Type: "said", Message: &m})
	}
	return nil
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
