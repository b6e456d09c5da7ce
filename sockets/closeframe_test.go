package sockets

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// clientFrame is a frame as a client sends it: b0 is FIN, RSV and opcode,
// the payload masked with a fixed key unless unmasked.
func clientFrame(b0 byte, payload []byte, unmasked bool) []byte {
	var f []byte
	maskBit := byte(0x80)
	if unmasked {
		maskBit = 0
	}
	switch n := len(payload); {
	case n < 126:
		f = append(f, b0, maskBit|byte(n))
	case n <= 0xffff:
		f = binary.BigEndian.AppendUint16(append(f, b0, maskBit|126), uint16(n))
	default:
		f = binary.BigEndian.AppendUint64(append(f, b0, maskBit|127), uint64(n))
	}
	if unmasked {
		return append(f, payload...)
	}
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	f = append(f, key[:]...)
	for i, c := range payload {
		f = append(f, c^key[i%4])
	}
	return f
}

func closePayload(code int, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}

// TestFrameScanJudgesCloseFrames: after data and control frames that pass
// whole, a well-formed close frame is judged and held back from its last
// byte on, read at once or a byte at a time; one gorilla fails on its
// header passes as it is.
func TestFrameScanJudgesCloseFrames(t *testing.T) {
	before := bytes.Join([][]byte{
		clientFrame(0x81, []byte("hi"), false),
		clientFrame(0x02, bytes.Repeat([]byte{7}, 300), false), // a fragment, 16-bit length
		clientFrame(0x89, []byte("p"), false),                  // a ping between fragments
		clientFrame(0x80, bytes.Repeat([]byte{8}, 70000), false),
	}, nil)
	after := clientFrame(0x81, []byte("after"), false)
	for _, c := range []struct {
		name  string
		close []byte
		want  error // nil: not judged
	}{
		{"no payload", clientFrame(0x88, nil, false), &closeVerdict{code: 1005}},
		{"code and reason", clientFrame(0x88, closePayload(1000, "bye"), false), &closeVerdict{code: 1000, reason: "bye"}},
		{"1014", clientFrame(0x88, closePayload(1014, ""), false), &closeVerdict{code: 1014}},
		{"4999 and 123 bytes", clientFrame(0x88, closePayload(4999, strings.Repeat("r", 123)), false), &closeVerdict{code: 4999, reason: strings.Repeat("r", 123)}},
		{"1 byte", clientFrame(0x88, []byte{3}, false), ErrProtocol},
		{"code 999", clientFrame(0x88, closePayload(999, ""), false), ErrProtocol},
		{"code 1005", clientFrame(0x88, closePayload(1005, ""), false), ErrProtocol},
		{"code 1015", clientFrame(0x88, closePayload(1015, ""), false), ErrProtocol},
		{"reason not UTF-8", clientFrame(0x88, closePayload(1000, "ok\xed\xa0\x80"), false), ErrInvalidUTF8},
		{"RSV1", clientFrame(0xc8, closePayload(1000, "\xff"), false), nil},
		{"not final", clientFrame(0x08, closePayload(1000, ""), false), nil},
		{"unmasked", clientFrame(0x88, closePayload(1000, "\xff"), true), nil},
		{"126 bytes", clientFrame(0x88, closePayload(1000, strings.Repeat("r", 124)), false), nil},
	} {
		stream := bytes.Join([][]byte{before, c.close, after}, nil)
		for _, step := range []int{len(stream), 1, 5} {
			var f frameScan
			var passed []byte
			var got error
			for i := 0; i < len(stream) && got == nil; i += step {
				chunk := stream[i:min(i+step, len(stream))]
				var n int
				n, got = f.scan(chunk)
				passed = append(passed, chunk[:n]...)
			}
			want := stream
			if c.want != nil {
				want = stream[:len(before)+len(c.close)-1]
			}
			switch {
			case !bytes.Equal(passed, want):
				t.Errorf("%s, %d bytes a read: %d bytes passed, want %d", c.name, step, len(passed), len(want))
			case c.want == nil && got != nil:
				t.Errorf("%s, %d bytes a read: verdict %v, want none", c.name, step, got)
			case c.want != nil && f.verdict() != got:
				t.Errorf("%s, %d bytes a read: the verdict %v is not kept", c.name, step, got)
			}
			var cv, wantCV *closeVerdict
			switch {
			case c.want == nil:
			case errors.As(c.want, &wantCV):
				if !errors.As(got, &cv) || *cv != *wantCV {
					t.Errorf("%s, %d bytes a read: %v, want %v", c.name, step, got, c.want)
				}
			case !errors.Is(got, c.want):
				t.Errorf("%s, %d bytes a read: %v, want %v", c.name, step, got, c.want)
			}
		}
	}
}

// TestCloseReasonNotUTF8Closes1007: a close frame whose reason is not
// UTF-8 is answered with 1007 (gorilla alone answers 1002).
func TestCloseReasonNotUTF8Closes1007(t *testing.T) {
	e := newEnv(t, Config{})
	c, id := e.dial(room)
	if err := c.WriteMessage(websocket.CloseMessage, closePayload(1000, "\xce\xba\xff")); err != nil {
		t.Fatal(err)
	}
	if ce := readClose(t, c); ce.Code != websocket.CloseInvalidFramePayloadData {
		t.Errorf("client got close %d %q, want 1007", ce.Code, ce.Text)
	}
	end := next(t, e.sink.ends)
	if end.id != id || end.kind != "error" || !errors.Is(end.err, ErrInvalidUTF8) || CloseCode(end.err) != 1007 {
		t.Errorf("terminal event = %+v, want ErrInvalidUTF8", end)
	}
	if got := value(t, e.o.m.nodeCloses.WithLabelValues("invalid_utf8")); got != 1 {
		t.Errorf("node_closes{invalid_utf8} = %v", got)
	}
	if got := value(t, e.o.m.closed.WithLabelValues("1007")); got != 1 {
		t.Errorf("closed{1007} = %v", got)
	}
}

// TestClientCloseCodes: the client's close is echoed with its code, and
// reaches the Sink, for 1014 too (gorilla alone refuses it); a code no
// close frame may carry, or a payload of one byte, is a protocol error.
func TestClientCloseCodes(t *testing.T) {
	e := newEnv(t, Config{})
	for _, c := range []struct {
		payload []byte
		echo    int // 0: closed with 1002
	}{
		{closePayload(1014, "gateway"), 1014},
		{closePayload(3000, ""), 3000},
		{[]byte{}, 1005},
		{[]byte{0x03}, 0},
		{closePayload(1004, ""), 0},
		{closePayload(2999, ""), 0},
	} {
		conn, id := e.dial(room)
		if err := conn.WriteMessage(websocket.CloseMessage, c.payload); err != nil {
			t.Fatal(err)
		}
		ce := readRawClose(t, conn) // gorilla's client refuses 1014
		end := next(t, e.sink.ends)
		switch {
		case end.id != id:
			t.Errorf("close %x: terminal event of socket %v, want %v", c.payload, end.id, id)
		case c.echo == 0 && (ce.Code != 1002 || end.kind != "error" || !errors.Is(end.err, ErrProtocol)):
			t.Errorf("close %x: client got %d, terminal event %+v; want 1002 and ErrProtocol", c.payload, ce.Code, end)
		case c.echo != 0 && (ce.Code != c.echo || end.kind != "close" || end.code != c.echo || !end.clean):
			t.Errorf("close %x: client got %d, terminal event %+v; want %d both", c.payload, ce.Code, end, c.echo)
		}
	}
}

// readRawClose reads the server's next frame off the connection itself,
// which must be a close frame, and returns its code (1005 for none).
func readRawClose(t *testing.T, c *websocket.Conn) *websocket.CloseError {
	t.Helper()
	nc := c.NetConn()
	_ = nc.SetReadDeadline(time.Now().Add(wait))
	head := make([]byte, 2)
	if _, err := io.ReadFull(nc, head); err != nil {
		t.Fatalf("read a frame header: %v", err)
	}
	if head[0] != 0x88 || head[1] > 125 {
		t.Fatalf("frame header %x, want a close frame", head)
	}
	payload := make([]byte, head[1])
	if _, err := io.ReadFull(nc, payload); err != nil {
		t.Fatalf("read a close payload: %v", err)
	}
	if len(payload) < 2 {
		return &websocket.CloseError{Code: 1005}
	}
	return &websocket.CloseError{Code: int(binary.BigEndian.Uint16(payload)), Text: string(payload[2:])}
}

// TestCloseFramesJudgedOverTLS: a connection without direct writes (TLS
// here) has its close frames judged all the same.
func TestCloseFramesJudgedOverTLS(t *testing.T) {
	sink := newRecorder()
	o, err := New(Config{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = o.Accept(w, r, room, nil)
	}))
	defer srv.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = o.Shutdown(ctx)
	}()
	d := websocket.Dialer{TLSClientConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig, HandshakeTimeout: wait}
	c, _, err := d.Dial("wss"+strings.TrimPrefix(srv.URL, "https"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteMessage(websocket.CloseMessage, closePayload(1000, "\xff")); err != nil {
		t.Fatal(err)
	}
	if ce := readClose(t, c); ce.Code != websocket.CloseInvalidFramePayloadData {
		t.Errorf("client got close %d %q, want 1007", ce.Code, ce.Text)
	}
	if end := next(t, sink.ends); end.kind != "error" || !errors.Is(end.err, ErrInvalidUTF8) {
		t.Errorf("terminal event = %+v, want ErrInvalidUTF8", end)
	}
}
