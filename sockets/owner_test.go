package sockets

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wasmkeep/wasmkeep/ownership"
)

var (
	room  = ownership.Actor{Class: "chat", Name: "room1"}
	other = ownership.Actor{Class: "chat", Name: "room2"}
)

func ids(list []SocketInfo) []ID {
	out := []ID{}
	for _, s := range list {
		out = append(out, s.ID)
	}
	return out
}

func TestAcceptWithTagsAndListByTag(t *testing.T) {
	e := newEnv(t, Config{})
	_, a := e.dial(room, "red", "admin")
	_, b := e.dial(room, "red")
	_, c := e.dial(room)
	_, d := e.dial(other, "red")

	if got := ids(e.o.List(room, "red")); !slices.Equal(got, []ID{a, b}) {
		t.Errorf("List(room, red) = %v, want %v", got, []ID{a, b})
	}
	if got := ids(e.o.List(room, "")); !slices.Equal(got, []ID{a, b, c}) {
		t.Errorf("List(room, \"\") = %v, want %v", got, []ID{a, b, c})
	}
	if got := ids(e.o.List(other, "")); !slices.Equal(got, []ID{d}) {
		t.Errorf("List(other) = %v, want %v", got, []ID{d})
	}
	if got := e.o.List(room, "red")[0].Tags; !slices.Equal(got, []string{"red", "admin"}) {
		t.Errorf("tags = %v", got)
	}
	if n, _ := e.sink.counts(room); n != 3 {
		t.Errorf("Opened(room) = %d, want 3", n)
	}
	// An actor cannot reach another's socket.
	if err := e.o.Send(other, a, true, []byte("x")); !errors.Is(err, ErrUnknownSocket) {
		t.Errorf("Send to another actor's socket: %v, want ErrUnknownSocket", err)
	}
}

func TestAcceptRefusesInvalidTagsBeforeUpgrade(t *testing.T) {
	e := newEnv(t, Config{})
	for _, tags := range [][]string{
		strings.Split("a,b,c,d,e,f,g,h,i,j,k", ","),
		{strings.Repeat("x", MaxTagBytes+1)},
	} {
		_, resp, err := e.tryDial(room, tags...)
		if !errors.Is(err, websocket.ErrBadHandshake) || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("dial with %d tags: %v, %v; want a 400 handshake refusal", len(tags), err, resp)
		}
		if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "tag") {
			t.Errorf("dial with %d tags: refused with %q, which does not say why", len(tags), body)
		}
		if r := e.nextAccept(); !errors.Is(r.err, ErrInvalid) {
			t.Errorf("Accept: %v, want ErrInvalid", r.err)
		}
	}
	if got := value(t, e.o.m.refused.WithLabelValues("invalid")); got != 2 {
		t.Errorf("refused{invalid} = %v, want 2", got)
	}
}

func TestAttachmentLimitAndCopy(t *testing.T) {
	e := newEnv(t, Config{})
	_, id := e.dial(room)
	if err := e.o.SetAttachment(room, id, make([]byte, MaxAttachment+1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetAttachment over the limit: %v, want ErrInvalid", err)
	}
	att := bytes.Repeat([]byte("a"), MaxAttachment)
	if err := e.o.SetAttachment(room, id, att); err != nil {
		t.Fatal(err)
	}
	att[0] = 'b' // the Owner kept a copy
	got, err := e.o.Attachment(room, id)
	if err != nil || len(got) != MaxAttachment || got[0] != 'a' {
		t.Errorf("Attachment = %d bytes starting %q, %v", len(got), got[:1], err)
	}
	if l := e.o.List(room, ""); len(l) != 1 || len(l[0].Attachment) != MaxAttachment {
		t.Errorf("List does not carry the attachment: %v", len(l))
	}
	if _, err := e.o.Attachment(other, id); !errors.Is(err, ErrUnknownSocket) {
		t.Errorf("Attachment of another actor's socket: %v", err)
	}
}

func TestMessagesAndClientCloseCodesReachTheSink(t *testing.T) {
	e := newEnv(t, Config{})
	c, id := e.dial(room)
	if err := c.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if m := next(t, e.sink.messages); m.id != id || !m.text || m.data != "hello" {
		t.Errorf("first message = %+v", m)
	}
	if m := next(t, e.sink.messages); m.text || m.data != "\x01\x02\x03" {
		t.Errorf("second message = %+v", m)
	}
	if err := c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "bye")); err != nil {
		t.Fatal(err)
	}
	end := next(t, e.sink.ends)
	if end.kind != "close" || end.code != 4001 || end.reason != "bye" || !end.clean {
		t.Errorf("terminal event = %+v, want close 4001 bye clean", end)
	}
	if ce := readClose(t, c); ce.Code != 4001 {
		t.Errorf("client got close %d, want the echo of 4001", ce.Code)
	}
	if o, g := e.sink.counts(room); o != 1 || g != 1 {
		t.Errorf("Opened %d, Gone %d; want 1, 1", o, g)
	}
	if got := value(t, e.o.m.closed.WithLabelValues("4xxx")); got != 1 {
		t.Errorf("closed{4xxx} = %v", got)
	}
	if err := e.o.Send(room, id, true, []byte("late")); !errors.Is(err, ErrUnknownSocket) {
		t.Errorf("Send after the slot was freed: %v", err)
	}
}

func TestClientDropIsAnUncleanClose(t *testing.T) {
	e := newEnv(t, Config{})
	c, _ := e.dial(room)
	_ = c.NetConn().Close()
	end := next(t, e.sink.ends)
	if end.kind != "close" || end.code != websocket.CloseAbnormalClosure || end.clean {
		t.Errorf("terminal event = %+v, want close 1006 unclean", end)
	}
	if o, g := e.sink.counts(room); o != 1 || g != 1 {
		t.Errorf("Opened %d, Gone %d; want 1, 1", o, g)
	}
}

func TestNodeCloseAfterQueuedMessages(t *testing.T) {
	e := newEnv(t, Config{})
	c, id := e.dial(room)
	if err := e.o.Send(room, id, true, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := e.o.Close(room, id, 4000, "done"); err != nil {
		t.Fatal(err)
	}
	// Gone is immediate: the socket is closing, so it no longer counts.
	if o, g := e.sink.counts(room); o != 1 || g != 1 {
		t.Errorf("after Close: Opened %d, Gone %d; want 1, 1", o, g)
	}
	if l := e.o.List(room, ""); len(l) != 0 {
		t.Errorf("List shows a closing socket: %v", ids(l))
	}
	if err := e.o.Close(room, id, 4000, "again"); !errors.Is(err, ErrClosing) {
		t.Errorf("second Close: %v, want ErrClosing", err)
	}
	if err := e.o.Send(room, id, true, []byte("x")); !errors.Is(err, ErrClosing) {
		t.Errorf("Send while closing: %v, want ErrClosing", err)
	}
	if got := readText(t, c); got != "last words" {
		t.Errorf("client read %q", got)
	}
	if ce := readClose(t, c); ce.Code != 4000 || ce.Text != "done" {
		t.Errorf("client got close %d %q, want 4000 done", ce.Code, ce.Text)
	}
	if end := next(t, e.sink.ends); end.kind != "close" || end.code != 4000 || !end.clean {
		t.Errorf("terminal event = %+v, want the client's echo of 4000", end)
	}
	if got := value(t, e.o.m.nodeCloses.WithLabelValues("actor")); got != 1 {
		t.Errorf("node_closes{actor} = %v", got)
	}
	for _, bad := range []struct {
		code   int
		reason string
	}{{1005, ""}, {1006, ""}, {999, ""}, {5000, ""}, {1000, strings.Repeat("r", MaxCloseReason+1)}} {
		if err := e.o.Close(room, id, bad.code, bad.reason); !errors.Is(err, ErrInvalid) {
			t.Errorf("Close(%d, %d bytes): %v, want ErrInvalid", bad.code, len(bad.reason), err)
		}
	}
}

func TestMessageOverTheLimitCloses1009(t *testing.T) {
	e := newEnv(t, Config{MaxMessage: 1024})
	c, _ := e.dial(room)
	if err := c.WriteMessage(websocket.BinaryMessage, make([]byte, 1025)); err != nil {
		t.Fatal(err)
	}
	if ce := readClose(t, c); ce.Code != websocket.CloseMessageTooBig {
		t.Errorf("client got close %d, want 1009", ce.Code)
	}
	end := next(t, e.sink.ends)
	if end.kind != "error" || !errors.Is(end.err, ErrMessageTooBig) || CloseCode(end.err) != 1009 {
		t.Errorf("terminal event = %+v, want ErrMessageTooBig", end)
	}
	if o, g := e.sink.counts(room); o != 1 || g != 1 {
		t.Errorf("Opened %d, Gone %d; want 1, 1", o, g)
	}
	if got := value(t, e.o.m.nodeCloses.WithLabelValues("message_too_big")); got != 1 {
		t.Errorf("node_closes{message_too_big} = %v", got)
	}
	if got := value(t, e.o.m.closed.WithLabelValues("1009")); got != 1 {
		t.Errorf("closed{1009} = %v", got)
	}
}

func TestSlowReaderCloses1013(t *testing.T) {
	const size = 64 << 10
	e := newEnv(t, Config{MaxMessage: size, SendQueue: 4 * size, WriteTimeout: 5 * time.Second})
	c, id := e.dial(room)
	msg := bytes.Repeat([]byte("s"), size)
	// The client reads nothing: the kernel buffers fill, then the queue.
	var err error
	sent := 0
	for ; sent < 10_000 && err == nil; sent++ {
		err = e.o.Send(room, id, false, msg)
	}
	if !errors.Is(err, ErrSlowReader) {
		t.Fatalf("after %d sends: %v, want ErrSlowReader", sent, err)
	}
	if o, g := e.sink.counts(room); o != 1 || g != 1 {
		t.Errorf("after the overflow: Opened %d, Gone %d; want 1, 1", o, g)
	}
	if ce := readClose(t, c); ce.Code != websocket.CloseTryAgainLater {
		t.Errorf("client got close %d, want 1013", ce.Code)
	}
	if end := next(t, e.sink.ends); end.kind != "error" || !errors.Is(end.err, ErrSlowReader) {
		t.Errorf("terminal event = %+v, want ErrSlowReader", end)
	}
	if got := value(t, e.o.m.nodeCloses.WithLabelValues("slow_reader")); got != 1 {
		t.Errorf("node_closes{slow_reader} = %v", got)
	}
}

func TestPingTimeoutClosesADeadPeerOnly(t *testing.T) {
	e := newEnv(t, Config{PingInterval: 160 * time.Millisecond, PongTimeout: 80 * time.Millisecond})
	live, liveID := e.dial(room)
	pings := make(chan struct{}, 64)
	live.SetPingHandler(func(data string) error {
		select {
		case pings <- struct{}{}:
		default:
		}
		return live.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	liveDone := make(chan error, 1)
	go func() { // the live client reads, so it answers pings
		_ = live.SetReadDeadline(time.Now().Add(wait))
		_, _, err := live.ReadMessage()
		liveDone <- err
	}()
	_, deadID := e.dial(room) // never reads: never answers a ping

	end := next(t, e.sink.ends)
	if end.id != deadID || end.kind != "error" || !errors.Is(end.err, ErrPingTimeout) {
		t.Errorf("terminal event = %+v, want ErrPingTimeout for socket %v", end, deadID)
	}
	for range 3 { // the live one goes on answering
		select {
		case <-pings:
		case <-time.After(wait):
			t.Fatal("the live client got no ping")
		}
	}
	if got := ids(e.o.List(room, "")); !slices.Equal(got, []ID{liveID}) {
		t.Errorf("open sockets = %v, want only %v", got, liveID)
	}
	if got := value(t, e.o.m.nodeCloses.WithLabelValues("ping_timeout")); got != 1 {
		t.Errorf("node_closes{ping_timeout} = %v", got)
	}
	if err := e.o.Close(room, liveID, 1000, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-liveDone; !websocket.IsCloseError(err, 1000) {
		t.Errorf("live client: %v, want close 1000", err)
	}
}

func TestRefusalPastMaxSocketsIs503BeforeUpgrade(t *testing.T) {
	e := newEnv(t, Config{MaxSockets: 2, RetryAfter: 3 * time.Second})
	first, _ := e.dial(room)
	e.dial(other)
	_, resp, err := e.tryDial(room)
	if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third dial: %v, %v; want a 503 handshake refusal", err, resp)
	}
	if got := resp.Header.Get("Retry-After"); got != "3" {
		t.Errorf("Retry-After = %q, want 3", got)
	}
	if r := e.nextAccept(); !errors.Is(r.err, ErrTooManySockets) {
		t.Errorf("Accept: %v, want ErrTooManySockets", r.err)
	}
	if o, _ := e.sink.counts(room); o != 1 {
		t.Errorf("Opened(room) = %d after a refusal, want 1", o)
	}
	if got := value(t, e.o.m.refused.WithLabelValues("max_sockets")); got != 1 {
		t.Errorf("refused{max_sockets} = %v", got)
	}
	// A freed slot takes the next socket.
	_ = first.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""))
	next(t, e.sink.ends)
	e.dial(room)
}

func TestAutoResponseDoesNotReachTheSink(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, Config{Clock: func() time.Time { return at }})
	if err := e.o.SetAutoResponse(room, AutoResponse{Request: "ping", Response: "pong"}); err != nil {
		t.Fatal(err)
	}
	if err := e.o.SetAutoResponse(room, AutoResponse{Request: "x", Response: strings.Repeat("y", MaxAutoResponse+1)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("auto-response over the limit: %v", err)
	}
	c, id := e.dial(room)
	if last, _ := e.o.LastAutoResponse(room, id); !last.IsZero() {
		t.Errorf("LastAutoResponse before any = %v", last)
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if got := readText(t, c); got != "pong" {
		t.Errorf("auto-response = %q", got)
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	// Messages of a socket reach the Sink in order: "ping" did not.
	if m := next(t, e.sink.messages); m.data != "hello" {
		t.Errorf("first message at the sink = %q, want hello", m.data)
	}
	if last, err := e.o.LastAutoResponse(room, id); err != nil || !last.Equal(at) {
		t.Errorf("LastAutoResponse = %v, %v; want %v", last, err, at)
	}
	if got := value(t, e.o.m.autoResponses); got != 1 {
		t.Errorf("auto_responses = %v", got)
	}
	_ = e.o.SetAutoResponse(room, AutoResponse{})
	if ar := e.o.AutoResponseOf(room); ar.Request != "" || ar.Response != "" {
		t.Errorf("auto-response after removal = %+v", ar)
	}
}

func TestBroadcastByTag(t *testing.T) {
	for _, p := range writePaths {
		t.Run(p.name, func(t *testing.T) { testBroadcastByTag(t, p.cfg) })
	}
}

func testBroadcastByTag(t *testing.T, cfg Config) {
	e := newEnv(t, cfg)
	needRings(t, e, cfg)
	red1, _ := e.dial(room, "red")
	red2, _ := e.dial(room, "red", "blue")
	blue, _ := e.dial(room, "blue")
	outsider, _ := e.dial(other, "red")

	if n, err := e.o.Broadcast(room, "red", true, []byte("to red")); n != 2 || err != nil {
		t.Errorf("Broadcast(red) = %d, %v; want 2", n, err)
	}
	if n, _ := e.o.Broadcast(room, "", true, []byte("to all")); n != 3 {
		t.Errorf("Broadcast(\"\") = %d, want 3", n)
	}
	if n, _ := e.o.Broadcast(other, "", true, []byte("next door")); n != 1 {
		t.Errorf("Broadcast(other) = %d, want 1", n)
	}
	for _, c := range []*websocket.Conn{red1, red2} {
		if got := readText(t, c); got != "to red" {
			t.Errorf("red client read %q", got)
		}
	}
	for _, c := range []*websocket.Conn{red1, red2, blue} {
		if got := readText(t, c); got != "to all" {
			t.Errorf("client read %q, want to all", got)
		}
	}
	if got := readText(t, outsider); got != "next door" {
		t.Errorf("the other room's client read %q", got)
	}
}

func TestCloseAllAndCloseActorSend1012(t *testing.T) {
	e := newEnv(t, Config{})
	a1, _ := e.dial(room)
	a2, _ := e.dial(room)
	b, _ := e.dial(other)

	if n := e.o.CloseActor(other, ownership.CloseServiceRestart, "move"); n != 1 {
		t.Errorf("CloseActor = %d, want 1", n)
	}
	if ce := readClose(t, b); ce.Code != 1012 || ce.Text != "move" {
		t.Errorf("client of the moved room got %d %q", ce.Code, ce.Text)
	}
	if end := next(t, e.sink.ends); end.actor != other || end.code != 1012 || !end.clean {
		t.Errorf("terminal event = %+v", end)
	}
	if len(e.o.List(room, "")) != 2 {
		t.Error("CloseActor closed another actor's sockets")
	}

	if n := e.o.CloseAll(ownership.CloseServiceRestart, "drain"); n != 2 {
		t.Errorf("CloseAll = %d, want 2", n)
	}
	for _, c := range []*websocket.Conn{a1, a2} {
		if ce := readClose(t, c); ce.Code != 1012 || ce.Text != "drain" {
			t.Errorf("client got %d %q, want 1012 drain", ce.Code, ce.Text)
		}
	}
	for range 2 {
		if end := next(t, e.sink.ends); end.code != 1012 || !end.clean {
			t.Errorf("terminal event = %+v", end)
		}
	}
	if o, g := e.sink.counts(room); o != 2 || g != 2 {
		t.Errorf("room: Opened %d, Gone %d; want 2, 2", o, g)
	}
	if got := value(t, e.o.m.nodeCloses.WithLabelValues("drain")); got != 2 {
		t.Errorf("node_closes{drain} = %v", got)
	}
	if got := value(t, e.o.m.closed.WithLabelValues("1012")); got != 3 {
		t.Errorf("closed{1012} = %v", got)
	}
}

func TestShutdownClosesEverySocketAndRefusesNewOnes(t *testing.T) {
	e := newEnv(t, Config{})
	c, _ := e.dial(room)
	closed := make(chan int, 1)
	go func() { // the client answers the close handshake
		_ = c.SetReadDeadline(time.Now().Add(wait))
		_, _, err := c.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			closed <- ce.Code
		}
		close(closed)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := e.o.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if code := <-closed; code != 1012 {
		t.Errorf("client got %d, want 1012", code)
	}
	if end := next(t, e.sink.ends); end.code != 1012 || !end.clean {
		t.Errorf("terminal event = %+v", end)
	}
	_, resp, err := e.tryDial(room)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("dial after shutdown: %v, %v; want 503", err, resp)
	}
	if r := e.nextAccept(); !errors.Is(r.err, ErrShutDown) {
		t.Errorf("Accept after shutdown: %v", r.err)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without a sink = nil error")
	}
	for _, c := range []Config{
		{Sink: newRecorder(), MaxSockets: -1},
		{Sink: newRecorder(), MaxMessage: 2 << 20, SendQueue: 1 << 20},
		{Sink: newRecorder(), PingInterval: time.Second, PongTimeout: 2 * time.Second},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", c)
		}
	}
	if err := (Config{Sink: newRecorder(), PingInterval: time.Second}).Validate(); err != nil {
		t.Errorf("a short ping interval with the default pong timeout: %v", err)
	}
}

// Closes raced from every side at once still give each socket one Gone,
// before its one terminal event (the recorder checks it at cleanup).
func TestRacingClosesKeepOneGonePerSocket(t *testing.T) {
	e := newEnv(t, Config{PingInterval: 40 * time.Millisecond, PongTimeout: 20 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	const n = 24
	conns := make([]*websocket.Conn, n)
	idList := make([]ID, n)
	for i := range n {
		conns[i], idList[i] = e.dial(room)
	}
	done := make(chan struct{})
	for i, c := range conns {
		go func() {
			defer func() { done <- struct{}{} }()
			switch i % 4 {
			case 0: // the client closes as the node does
				_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "client"))
			case 1: // the client drops the connection
				_ = c.NetConn().Close()
			case 2: // the node sends as it closes
				_ = e.o.Send(room, idList[i], true, []byte("hi"))
			case 3: // nobody reads: the ping timeout races the closes
			}
		}()
		go func() {
			defer func() { done <- struct{}{} }()
			_ = e.o.Close(room, idList[i], 1000, "node")
		}()
	}
	for range 2 * n {
		select {
		case <-done:
		case <-time.After(wait):
			t.Fatal("closers did not return")
		}
	}
	e.o.CloseAll(ownership.CloseServiceRestart, "drain")
	for range n {
		next(t, e.sink.ends)
	}
	if o, g := e.sink.counts(room); o != n || g != n {
		t.Errorf("Opened %d, Gone %d; want %d each", o, g, n)
	}
}

// dialPaused starts a dial of a with tags on a fresh env whose upgrade
// stops in the middle (in its origin check), and returns once it is
// there; finish lets it go on and returns the client's connection.
func dialPaused(t *testing.T, a ownership.Actor, tags ...string) (e *env, finish func() *websocket.Conn) {
	t.Helper()
	inCheck, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e = newEnv(t, Config{CheckOrigin: func(*http.Request) bool {
		once.Do(func() {
			close(inCheck)
			<-release
		})
		return true
	}})
	type dialed struct {
		c   *websocket.Conn
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		c, _, err := e.tryDial(a, tags...)
		done <- dialed{c, err}
	}()
	<-inCheck
	return e, func() *websocket.Conn {
		t.Helper()
		close(release)
		d := <-done
		if d.err != nil {
			t.Fatalf("dial: %v", d.err)
		}
		t.Cleanup(func() { _ = d.c.Close() })
		if r := e.nextAccept(); r.err != nil {
			t.Fatalf("accept: %v", r.err)
		}
		return d.c
	}
}

// TestBroadcastDuringHandshake: a socket's handshake answer reaches its
// client before the socket is listed as the actor's, so a broadcast the
// actor makes meanwhile is kept for it: the client gets it first, before
// what is broadcast later; one for a tag it lacks is not kept.
func TestBroadcastDuringHandshake(t *testing.T) {
	a := ownership.Actor{Class: "room", Name: "a"}
	e, finish := dialPaused(t, a, "member")
	if n, err := e.o.Broadcast(a, "member", true, []byte("during")); err != nil || n != 0 {
		t.Fatalf("broadcast during the handshake: %d, %v; want 0 sockets listed", n, err)
	}
	if _, err := e.o.Broadcast(a, "other", true, []byte("not for it")); err != nil {
		t.Fatal(err)
	}
	c := finish()
	if n, err := e.o.Broadcast(a, "", true, []byte("after")); err != nil || n != 1 {
		t.Fatalf("broadcast after: %d, %v", n, err)
	}
	for _, want := range []string{"during", "after"} {
		_ = c.SetReadDeadline(time.Now().Add(wait))
		_, got, err := c.ReadMessage()
		if err != nil || string(got) != want {
			t.Fatalf("client read %q, %v; want %q", got, err, want)
		}
	}
}

// TestCloseDuringHandshake: a socket whose upgrade is under way when its
// actor's sockets (or every socket) are closed is closed as soon as it is
// open, with that close's code and reason; a close of another actor's
// sockets leaves it open.
func TestCloseDuringHandshake(t *testing.T) {
	for _, c := range []struct {
		name   string
		close  func(o *Owner)
		reason string // "" if it stays open
	}{
		{"CloseActor", func(o *Owner) { o.CloseActor(room, ownership.CloseServiceRestart, "lapse") }, "lapse"},
		{"CloseAll", func(o *Owner) { o.CloseAll(ownership.CloseServiceRestart, "drain") }, "drain"},
		{"another actor", func(o *Owner) { o.CloseActor(other, ownership.CloseServiceRestart, "move") }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, finish := dialPaused(t, room)
			c.close(e.o)
			conn := finish()
			if c.reason == "" {
				if n := len(e.o.List(room, "")); n != 1 {
					t.Fatalf("%d sockets listed, want 1 (left open)", n)
				}
				return
			}
			if ce := readClose(t, conn); ce.Code != 1012 || ce.Text != c.reason {
				t.Errorf("client got %d %q, want 1012 %q", ce.Code, ce.Text, c.reason)
			}
			if end := next(t, e.sink.ends); end.actor != room || end.code != 1012 {
				t.Errorf("terminal event = %+v", end)
			}
			if o, g := e.sink.counts(room); o != 1 || g != 1 {
				t.Errorf("Opened %d, Gone %d; want 1, 1", o, g)
			}
		})
	}
}
