package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/sockets"
	"github.com/wasmkeep/wasmkeep/wasmhost/internal/wire"
)

// fakeSockets records what an event does with its actor's sockets.
type fakeSockets struct {
	ops  []string // "send 1 text data", "broadcast tag bin data", "close 1 1000 reason"
	list []actors.SocketInfo
	auto [2]string
}

func (f *fakeSockets) Send(id actors.SocketID, text bool, data []byte) {
	f.ops = append(f.ops, fmt.Sprintf("send %d %s %s", id, kind(text), data))
}

func (f *fakeSockets) Broadcast(tag string, text bool, data []byte) {
	f.ops = append(f.ops, fmt.Sprintf("broadcast %s %s %s", tag, kind(text), data))
}

func (f *fakeSockets) Close(id actors.SocketID, code int, reason string) {
	f.ops = append(f.ops, fmt.Sprintf("close %d %d %s", id, code, reason))
}

func (f *fakeSockets) List(tag string) []actors.SocketInfo {
	var out []actors.SocketInfo
	for _, s := range f.list {
		if tag == "" || slices.Contains(s.Tags, tag) {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeSockets) find(id actors.SocketID) *actors.SocketInfo {
	for i := range f.list {
		if f.list[i].ID == id {
			return &f.list[i]
		}
	}
	return nil
}

func (f *fakeSockets) SetAttachment(id actors.SocketID, data []byte) error {
	s := f.find(id)
	if s == nil {
		return sockets.ErrUnknownSocket
	}
	if len(data) > sockets.MaxAttachment {
		return sockets.ErrInvalid
	}
	s.Attachment = slices.Clone(data)
	return nil
}

func (f *fakeSockets) Attachment(id actors.SocketID) ([]byte, error) {
	s := f.find(id)
	if s == nil {
		return nil, sockets.ErrUnknownSocket
	}
	return slices.Clone(s.Attachment), nil
}

func (f *fakeSockets) SetAutoResponse(request, response string) error {
	if request == "bad" {
		return sockets.ErrInvalid
	}
	f.auto = [2]string{request, response}
	return nil
}

// LastAutoResponse: socket 1 auto-responded at 1.5 s past the epoch,
// socket 1<<40 never, any other is gone.
func (f *fakeSockets) LastAutoResponse(id actors.SocketID) (time.Time, error) {
	switch id {
	case 1:
		return time.UnixMilli(1500), nil
	case 1 << 40:
		return time.Time{}, nil
	}
	return time.Time{}, sockets.ErrUnknownSocket
}

func kind(text bool) string {
	if text {
		return "text"
	}
	return "bin"
}

func withSockets(f *fakeSockets) context.Context {
	return context.WithValue(context.Background(), socketsKey{}, actors.Sockets(f))
}

// say sends the probe a text message on socket id and returns what the
// event queued.
func say(t *testing.T, g *Guest, f *fakeSockets, st memStorage, id actors.SocketID, msg string) []string {
	t.Helper()
	f.ops = nil
	ev := &actors.SocketEvent{Kind: actors.SocketMessage, Socket: id, Text: true, Data: []byte(msg)}
	if err := g.HandleSocket(withSockets(f), ev, st); err != nil {
		t.Fatalf("socket message %q: %v", msg, err)
	}
	return f.ops
}

func TestSocketAccept(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{}
	f := &fakeSockets{}
	resp, err := g.Handle(withSockets(f), get("/ws", "tags=a,b"), st)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 101 || resp.Accept == nil || !slices.Equal(resp.Accept.Tags, []string{"a", "b"}) || string(st["accepted"]) != "a,b" {
		t.Fatalf("accept: %d %+v, stored %q", resp.Status, resp.Accept, st["accepted"])
	}
	resp = do(t, g, get("/ws", ""), st)
	if resp.Accept == nil || len(resp.Accept.Tags) != 0 {
		t.Fatalf("accept without tags: %+v", resp.Accept)
	}
	// Refused: too many tags, an empty tag, a tag too long. The guest's own
	// response stands.
	long := strings.Repeat("x", sockets.MaxTagBytes+1)
	for _, tags := range []string{"1,2,3,4,5,6,7,8,9,10,11", "a,,b", long} {
		resp := do(t, g, get("/ws", "tags="+tags), st)
		if resp.Status != http.StatusInternalServerError || resp.Accept != nil {
			t.Errorf("accept with tags %.20q: %d %+v, want the guest's 500", tags, resp.Status, resp.Accept)
		}
	}
	if resp := do(t, g, get("/ws", "tags="+strings.Repeat("x", sockets.MaxTagBytes)), st); resp.Accept == nil {
		t.Errorf("accept with a tag of %d bytes refused", sockets.MaxTagBytes)
	}
	// A malformed tag encoding is an ABI violation.
	req := get("/ws-raw", "")
	req.Body = wire.AppendU32(nil, 2)
	if _, err := g.Handle(context.Background(), req, st); !errors.Is(err, ErrGuest) || g.Started() {
		t.Fatalf("malformed tags: err %v, started %v; want ErrGuest and the guest discarded", err, g.Started())
	}
	// In a socket event, ws_accept is refused.
	if ops := say(t, g, f, st, 1, "accept"); !slices.Equal(ops, []string{"send 1 text 500"}) {
		t.Fatalf("accept in a socket event: %q", ops)
	}
}

func TestSocketEvents(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{}
	f := &fakeSockets{list: []actors.SocketInfo{
		{ID: 1, Tags: []string{"a"}},
		{ID: 1 << 40, Tags: []string{"a", "b"}, Attachment: []byte("bob")},
	}}
	tests := []struct {
		id   actors.SocketID
		msg  string
		want []string
	}{
		{1, "echo hi there", []string{"send 1 text hi there"}},
		{1 << 40, "echo big id", []string{"send 1099511627776 text big id"}},
		{1, "bcast b all of b", []string{"broadcast b text all of b"}},
		{1, "bcast  everyone", []string{"broadcast  text everyone"}},
		{1, "close 4000 bye", []string{"close 1 4000 bye"}},
		// A code that cannot be sent: the SDK closes with 1011 instead.
		{1, "close 1005 no", []string{"close 1 1011 "}},
		{1, "raw-close 1006 x", []string{"send 1 text 1"}},
		{1, "raw-close 1000 " + strings.Repeat("r", 124), []string{"send 1 text 1"}},
		{1, "raw-close 1000 " + strings.Repeat("r", 123), []string{"close 1 1000 " + strings.Repeat("r", 123), "send 1 text 0"}},
		{1, "raw-send", []string{"send 1 text 1"}},
		{1, "list", []string{"send 1 text 1:a:;1099511627776:a,b:bob"}},
		{1, "list b", []string{"send 1 text 1099511627776:a,b:bob"}},
		{1, "list none", []string{"send 1 text "}},
		{1, "att-set ada", []string{"send 1 text ok"}},
		{1, "list a", []string{"send 1 text 1:a:ada;1099511627776:a,b:bob"}},
		{1, "att-big", []string{"send 1 text refused"}},
		{9, "att-set ghost", []string{"send 9 text refused"}},
		{1, "att-get 1099511627776", []string{"send 1 text att:bob"}},
		{1, "att-get 9", []string{"send 1 text none"}},
		{1, "auto ping pong", []string{"send 1 text ok"}},
		{1, "auto bad x", []string{"send 1 text refused"}},
		{1, "last-auto 1", []string{"send 1 text at:1500"}},
		{1, "last-auto 1099511627776", []string{"send 1 text at:0"}},
		{1, "last-auto 9", []string{"send 1 text gone"}},
	}
	for _, tt := range tests {
		if ops := say(t, g, f, st, tt.id, tt.msg); !slices.Equal(ops, tt.want) {
			t.Errorf("%.30q on %d: queued %q, want %q", tt.msg, tt.id, ops, tt.want)
		}
	}
	if f.auto != [2]string{"ping", "pong"} {
		t.Errorf("auto-response = %q", f.auto)
	}
	// A binary message, a close and an error.
	f.ops = nil
	bin := &actors.SocketEvent{Kind: actors.SocketMessage, Socket: 1, Data: []byte{0, 1}}
	if err := g.HandleSocket(withSockets(f), bin, st); err != nil || !slices.Equal(f.ops, []string{"send 1 bin bin:\x00\x01"}) {
		t.Fatalf("binary message: %v, queued %q", err, f.ops)
	}
	cl := &actors.SocketEvent{Kind: actors.SocketClose, Socket: 1, Code: 1001, Reason: "away", Clean: true}
	er := &actors.SocketEvent{Kind: actors.SocketError, Socket: 2, Code: 1009, Err: "too big"}
	for _, ev := range []*actors.SocketEvent{cl, er} {
		if err := g.HandleSocket(withSockets(f), ev, st); err != nil {
			t.Fatal(err)
		}
	}
	if got := string(st["closed/1"]); got != "1001 away clean" {
		t.Errorf("close recorded %q", got)
	}
	if got := string(st["closed/2"]); got != "1009 error too big" {
		t.Errorf("error recorded %q", got)
	}
	// Socket functions work in a request event too.
	f.ops = nil
	if _, err := g.Handle(withSockets(f), get("/ws-send", ""), st); err != nil || !slices.Equal(f.ops, []string{"send 7 text from request"}) {
		t.Fatalf("send from a request: %v, queued %q", err, f.ops)
	}
	// One guest served them all.
	if ops := say(t, g, f, st, 1, "events"); len(ops) != 1 || ops[0] == "send 1 text 1" {
		t.Fatalf("events: %q", ops)
	}
}

func TestSocketFailures(t *testing.T) {
	g := newGuest(t, Config{}, probeGuest)
	st := memStorage{}
	f := &fakeSockets{}
	say(t, g, f, st, 1, "echo start")
	if !g.Started() {
		t.Fatal("no guest after a socket event")
	}
	// A handler that reports failure fails the event and keeps the guest.
	ev := &actors.SocketEvent{Kind: actors.SocketMessage, Socket: 1, Text: true, Data: []byte("fail")}
	if err := g.HandleSocket(withSockets(f), ev, st); !errors.Is(err, ErrHandler) || !g.Started() {
		t.Fatalf("failing handler: err %v, started %v", err, g.Started())
	}
	// An out-of-bounds buffer is an ABI violation, in a socket event and in
	// a request.
	say(t, g, f, st, 1, "echo again")
	ev.Data = []byte("oob")
	if err := g.HandleSocket(withSockets(f), ev, st); !errors.Is(err, ErrGuest) || !strings.Contains(err.Error(), "out of range") || g.Started() {
		t.Fatalf("out of bounds in a socket event: err %v, started %v", err, g.Started())
	}
	if _, err := g.Handle(withSockets(f), get("/ws-oob", ""), st); !errors.Is(err, ErrGuest) || g.Started() {
		t.Fatalf("out of bounds in a request: err %v, started %v", err, g.Started())
	}
	// The next event runs on a fresh guest.
	if ops := say(t, g, f, st, 1, "events"); !slices.Equal(ops, []string{"send 1 text 1"}) {
		t.Fatalf("after the violations: %q", ops)
	}
}

// TestSocketWithoutExport: a module without wasmkeep_on_socket (the
// counter's SDK exports it, but registers no socket handler) drops socket
// events.
func TestSocketNotHandled(t *testing.T) {
	g := newGuest(t, Config{}, counterGuest)
	f := &fakeSockets{}
	ev := &actors.SocketEvent{Kind: actors.SocketMessage, Socket: 1, Text: true, Data: []byte("x")}
	if err := g.HandleSocket(withSockets(f), ev, memStorage{}); err != nil || len(f.ops) != 0 {
		t.Fatalf("socket event to the counter: %v, queued %q", err, f.ops)
	}
	if !g.Started() {
		t.Fatal("counter: the socket event did not start the guest (it should ask it)")
	}
}

// TestEncodeSocketEvent: a guest of minor version 2 gets a dialed
// socket's URL and tags after the event's fields; an older one gets the
// event as its minor version has it, with no byte left over (its SDK's
// decoder refuses any).
func TestEncodeSocketEvent(t *testing.T) {
	ev := &actors.SocketEvent{Kind: actors.SocketClose, Socket: 1<<33 + 5, Code: 1000, Reason: "bye", Clean: true,
		URL: "ws://feed/x", Tags: []string{"feed", "b"}}
	for _, minor := range []uint32{0, 1} {
		r := wire.NewReader(encodeSocketEvent(ev, minor))
		if r.U8() != wire.SocketClose || r.U64() != 1<<33+5 || r.U8() != wire.FlagClean || r.U32() != 1000 || r.String() != "bye" || r.Err() {
			t.Fatalf("encodeSocketEvent for minor %d = %v", minor, encodeSocketEvent(ev, minor))
		}
	}
	b := encodeSocketEvent(ev, 2)
	r := wire.NewReader(b)
	if r.U8() != wire.SocketClose || r.U64() != 1<<33+5 || r.U8() != wire.FlagClean || r.U32() != 1000 || r.String() != "bye" ||
		r.String() != "ws://feed/x" || r.Count(4) != 2 || r.String() != "feed" || r.String() != "b" || r.Err() {
		t.Fatalf("encodeSocketEvent for minor 2 = %v", b)
	}
	if cap(b) != len(b) {
		t.Errorf("encodeSocketEvent for minor 2: %d bytes in a buffer of %d", len(b), cap(b))
	}
	// A message, or the close of an accepted socket: an empty URL, no tags.
	b = encodeSocketEvent(&actors.SocketEvent{Kind: actors.SocketMessage, Socket: 1, Text: true, Data: []byte("hi")}, 2)
	r = wire.NewReader(b)
	if r.U8() != wire.SocketMessage || r.U64() != 1 || r.U8() != wire.FlagText || r.U32() != 0 || r.String() != "hi" ||
		r.String() != "" || r.Count(4) != 0 || r.Err() {
		t.Fatalf("encodeSocketEvent of a message for minor 2 = %v", b)
	}
}

// TestEncodeSocketList: a guest of minor version 2 gets each socket's URL
// after its attachment; an older one the list as its minor version has it.
func TestEncodeSocketList(t *testing.T) {
	list := []actors.SocketInfo{
		{ID: 1, Tags: []string{"member"}, Attachment: []byte("ada")},
		{ID: 1<<62 | 2, Tags: []string{"feed"}, URL: "ws://feed/x"},
	}
	for _, minor := range []uint32{0, 1, 2} {
		b := encodeSocketList(list, minor)
		r := wire.NewReader(b)
		if r.Count(16) != 2 {
			t.Fatalf("minor %d: count", minor)
		}
		for _, s := range list {
			if id := r.U64(); id != uint64(s.ID) {
				t.Fatalf("minor %d: id %d, want %d", minor, id, s.ID)
			}
			if n := r.Count(4); n != 1 || r.String() != s.Tags[0] {
				t.Fatalf("minor %d: tags of %d", minor, s.ID)
			}
			if att := r.String(); att != string(s.Attachment) {
				t.Fatalf("minor %d: attachment %q", minor, att)
			}
			if minor >= 2 {
				if u := r.String(); u != s.URL {
					t.Fatalf("minor %d: URL %q, want %q", minor, u, s.URL)
				}
			}
		}
		if r.Err() || cap(b) != len(b) {
			t.Fatalf("minor %d: bytes left over or a buffer sized wrong: %v (cap %d)", minor, b, cap(b))
		}
	}
}

// BenchmarkSocketEcho measures one socket message through the wasm room
// (examples/room-wasm): a text message echoed to its socket, with and
// without the event timeout.
func BenchmarkSocketEcho(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{{"timeout", Config{}}, {"notimeout", Config{NoEventTimeout: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			g := newGuest(b, bc.cfg, roomGuest)
			f := &fakeSockets{}
			ctx, st := withSockets(f), memStorage{}
			ev := &actors.SocketEvent{Kind: actors.SocketMessage, Socket: 1, Text: true, Data: []byte("ping 0123456789")}
			b.ReportAllocs()
			for b.Loop() {
				f.ops = f.ops[:0]
				if err := g.HandleSocket(ctx, ev, st); err != nil {
					b.Fatal(err)
				}
			}
			if len(f.ops) != 1 {
				b.Fatalf("queued %q", f.ops)
			}
		})
	}
}
