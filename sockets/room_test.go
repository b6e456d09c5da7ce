package sockets

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// TestRoomSurvivesInvalidText: three sockets of a room that broadcasts
// every text message it gets. One sends bytes that are not UTF-8 as a
// text message: it is closed with 1007 and its message never reaches the
// room; the two others stay open, get nothing of it, and go on getting
// the room's broadcasts.
func TestRoomSurvivesInvalidText(t *testing.T) {
	for _, p := range writePaths {
		t.Run(p.name, func(t *testing.T) { testRoomSurvivesInvalidText(t, p.cfg) })
	}
}

func testRoomSurvivesInvalidText(t *testing.T, cfg Config) {
	e := newEnv(t, cfg)
	needRings(t, e, cfg)
	e.sink.onMessage = func(a ownership.Actor, _ ID, text bool, data []byte) error {
		if text {
			if _, err := e.o.Broadcast(a, "", true, data); err != nil {
				t.Errorf("the room's broadcast: %v", err)
			}
		}
		return nil
	}
	alice, aliceID := e.dial(room)
	mallory, malloryID := e.dial(room)
	bob, _ := e.dial(room)
	// readText reads the next message of c, which must be valid text.
	readText := func(name string, c *websocket.Conn) string {
		t.Helper()
		got := readText(t, c)
		if !utf8.ValidString(got) {
			t.Fatalf("%s got %q: not UTF-8", name, got)
		}
		return got
	}

	if err := alice.WriteMessage(websocket.TextMessage, []byte("all:hello")); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*websocket.Conn{"alice": alice, "mallory": mallory, "bob": bob} {
		if got := readText(name, c); got != "all:hello" {
			t.Fatalf("%s got %q, want all:hello", name, got)
		}
	}
	if m := next(t, e.sink.messages); m.id != aliceID {
		t.Fatalf("the room got %+v, want alice's message", m)
	}

	if err := mallory.WriteMessage(websocket.TextMessage, []byte("all:\xff\xfe")); err != nil {
		t.Fatal(err)
	}
	if ce := readClose(t, mallory); ce.Code != websocket.CloseInvalidFramePayloadData {
		t.Errorf("mallory got close %d %q, want 1007", ce.Code, ce.Text)
	}
	end := next(t, e.sink.ends)
	if end.id != malloryID || end.kind != "error" || !errors.Is(end.err, ErrInvalidUTF8) || CloseCode(end.err) != 1007 {
		t.Errorf("terminal event = %+v, want mallory's ErrInvalidUTF8", end)
	}

	// The actor cannot send such bytes as text either; nothing goes out,
	// and the sockets stay open.
	if n, err := e.o.Broadcast(room, "", true, []byte("\xff\xfe")); n != 0 || !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("Broadcast of invalid text = %d, %v; want 0, ErrInvalid and ErrInvalidUTF8", n, err)
	}
	if err := e.o.Send(room, aliceID, true, []byte("\xed\xa0\x80")); !errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("Send of a surrogate as text = %v, want ErrInvalidUTF8", err)
	}

	if err := bob.WriteMessage(websocket.TextMessage, []byte("all:still here")); err != nil {
		t.Fatal(err)
	}
	// The next message each survivor reads is bob's: nothing came between.
	for name, c := range map[string]*websocket.Conn{"alice": alice, "bob": bob} {
		if got := readText(name, c); got != "all:still here" {
			t.Errorf("%s got %q, want all:still here", name, got)
		}
	}
	if m := next(t, e.sink.messages); m.id == malloryID || m.data != "all:still here" {
		t.Errorf("the room got %+v, want bob's message", m)
	}
	select {
	case m := <-e.sink.messages:
		t.Errorf("the room got %+v besides", m)
	default:
	}
	if got := len(e.o.List(room, "")); got != 2 {
		t.Errorf("%d sockets open, want alice's and bob's", got)
	}
}

// TestUndeliveredMessageClosesItsSocket: a message the Sink cannot hand to
// its actor (Message fails) closes its socket with 1012 and
// UndeliveredReason, so that its client connects again; the room's other
// sockets carry on.
func TestUndeliveredMessageClosesItsSocket(t *testing.T) {
	e := newEnv(t, Config{})
	e.sink.onMessage = func(a ownership.Actor, id ID, text bool, data []byte) error {
		if string(data) == "undeliverable" {
			return errors.New("its actor is unavailable")
		}
		_ = e.o.Send(a, id, text, data)
		return nil
	}
	refused, _ := e.dial(room)
	other, _ := e.dial(room)
	if err := refused.WriteMessage(websocket.TextMessage, []byte("undeliverable")); err != nil {
		t.Fatal(err)
	}
	if ce := readClose(t, refused); ce.Code != 1012 || ce.Text != UndeliveredReason {
		t.Fatalf("close %d %q, want 1012 %q", ce.Code, ce.Text, UndeliveredReason)
	}
	if err := other.WriteMessage(websocket.TextMessage, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	if got := readText(t, other); got != "still here" {
		t.Fatalf("the other socket's echo: %q", got)
	}
}
