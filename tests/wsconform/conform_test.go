package wsconform

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/sockets"
)

// A section is one part of the suite, as an Autobahn fuzzing client
// numbers them; each case runs on a socket of its own.
type section struct {
	id, name string
	cases    []tcase
}

type tcase struct {
	name   string
	header []string // request header lines of the handshake
	run    func(c *client)
}

// maxMessage is the Owner's MaxMessage in the suite.
const maxMessage = 1 << 20

func TestConformance(t *testing.T) {
	srv := newServer(t, sockets.Config{MaxMessage: maxMessage, PingInterval: time.Hour})
	var rows []row
	n := 0
	for _, sec := range sections() {
		r := row{section: sec.id + " " + sec.name}
		t.Run(sec.id, func(t *testing.T) {
			for _, tc := range sec.cases {
				n++
				name := fmt.Sprintf("case%d", n)
				ok := t.Run(tc.name, func(t *testing.T) {
					tc.run(srv.dial(t, name, tc.header...))
				})
				r.cases++
				if ok {
					r.passed++
				} else {
					r.failed = append(r.failed, tc.name)
				}
			}
		})
		rows = append(rows, r)
	}
	srv.sink.mu.Lock()
	for _, p := range srv.sink.problems {
		t.Error(p)
	}
	srv.sink.mu.Unlock()
	report(t, rows)
}

func sections() []section {
	return []section{
		{"1", "Framing", framing()},
		{"2", "Pings/Pongs", pings()},
		{"3", "Reserved Bits", reservedBits()},
		{"4", "Opcodes", opcodes()},
		{"5", "Fragmentation", fragmentation()},
		{"6", "UTF-8 Handling", utf8Handling()},
		{"7", "Close Handling", closeHandling()},
		{"9", "Limited Performance", performance()},
		{"12/13", "Compression (not negotiated)", compression()},
	}
}

// Payloads.
func textOf(n int) []byte { return bytes.Repeat([]byte("*"), n) }

func binaryOf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

func closePayload(code int, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}

// bye ends a case that must leave the socket open: a clean close,
// echoed, with nothing before it.
func bye(c *client) { c.closes(closePayload(1000, ""), 1000) }

// echoes sends payload as one message of op, in writes of chunk bytes,
// and expects it back.
func echoes(op byte, payload []byte, chunk int) func(c *client) {
	return func(c *client) {
		c.send(chunk, final(op, payload))
		c.expectMessage(op, payload)
		bye(c)
	}
}

// fragments splits payload into frames of at most size bytes: the first
// of op, the others continuations, the last final.
func fragments(op byte, payload []byte, size int) []frame {
	var out []frame
	for first := true; first || len(payload) > 0; first = false {
		k := min(size, len(payload))
		f := frame{op: opCont, payload: payload[:k]}
		if first {
			f.op = op
		}
		payload = payload[k:]
		f.fin = len(payload) == 0
		out = append(out, f)
	}
	return out
}

func framing() []tcase {
	var cs []tcase
	for _, op := range []byte{opText, opBinary} {
		kind, payload := "text", textOf
		if op == opBinary {
			kind, payload = "binary", binaryOf
		}
		for _, n := range []int{0, 125, 126, 127, 128, 65535, 65536} {
			cs = append(cs, tcase{name: fmt.Sprintf("%s of %d bytes", kind, n), run: echoes(op, payload(n), 0)})
		}
		cs = append(cs, tcase{name: kind + " of 65536 bytes in writes of 997", run: echoes(op, payload(65536), 997)})
		cs = append(cs, tcase{name: kind + " of 125 bytes a byte at a time", run: echoes(op, payload(125), 1)})
	}
	return cs
}

func pings() []tcase {
	pinged := func(payload []byte, chunk int) func(c *client) {
		return func(c *client) {
			c.send(chunk, final(opPing, payload))
			c.expectPong(payload)
			bye(c)
		}
	}
	return []tcase{
		{name: "ping without payload", run: pinged(nil, 0)},
		{name: "ping with text", run: pinged([]byte("Hello, world!"), 0)},
		{name: "ping with binary", run: pinged([]byte{0x00, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0x00, 0xff}, 0)},
		{name: "ping of 125 bytes", run: pinged(binaryOf(125), 0)},
		{name: "ping of 126 bytes fails", run: func(c *client) {
			c.send(0, final(opPing, binaryOf(126)))
			c.fails(1002)
		}},
		{name: "ping of 125 bytes a byte at a time", run: pinged(binaryOf(125), 1)},
		{name: "unsolicited pong without payload is ignored", run: func(c *client) {
			c.send(0, final(opPong, nil), final(opPing, []byte("after")))
			c.expectPong([]byte("after"))
			bye(c)
		}},
		{name: "unsolicited pong with payload is ignored", run: func(c *client) {
			c.send(0, final(opPong, []byte("unsolicited")))
			bye(c)
		}},
		{name: "unsolicited pong, then ping", run: func(c *client) {
			c.send(0, final(opPong, []byte("unsolicited")), final(opPing, []byte("solicited")))
			c.expectPong([]byte("solicited"))
			bye(c)
		}},
		{name: "ten pings", run: func(c *client) {
			for i := range 10 {
				c.send(0, final(opPing, fmt.Appendf(nil, "ping %d", i)))
			}
			for i := range 10 {
				c.expectPong(fmt.Appendf(nil, "ping %d", i))
			}
			bye(c)
		}},
		{name: "ten pings a byte at a time", run: func(c *client) {
			var all []frame
			for i := range 10 {
				all = append(all, final(opPing, fmt.Appendf(nil, "ping %d", i)))
			}
			c.send(1, all...)
			for i := range 10 {
				c.expectPong(fmt.Appendf(nil, "ping %d", i))
			}
			bye(c)
		}},
	}
}

// failsAfterEcho sends a valid text, then f, then a ping: the text is
// echoed, then the connection fails with 1002, and the ping is not
// answered.
func failsAfterEcho(f frame, chunk int) func(c *client) {
	return func(c *client) {
		c.send(chunk, final(opText, []byte("Hello, world!")), f, final(opPing, nil))
		c.expectMessage(opText, []byte("Hello, world!"))
		c.fails(1002)
	}
}

func reservedBits() []tcase {
	return []tcase{
		{name: "text with RSV 1", run: func(c *client) {
			c.send(0, frame{fin: true, rsv: 1, op: opText, payload: []byte("Hello, world!")})
			c.fails(1002)
		}},
		{name: "text with RSV 2 after a text", run: failsAfterEcho(frame{fin: true, rsv: 2, op: opText, payload: []byte("x")}, 0)},
		{name: "text with RSV 3 after a text, a byte at a time", run: failsAfterEcho(frame{fin: true, rsv: 3, op: opText, payload: []byte("x")}, 1)},
		{name: "text with RSV 4 after a text, in writes of 3", run: failsAfterEcho(frame{fin: true, rsv: 4, op: opText, payload: []byte("x")}, 3)},
		{name: "binary with RSV 5", run: failsAfterEcho(frame{fin: true, rsv: 5, op: opBinary, payload: binaryOf(10)}, 0)},
		{name: "ping with RSV 6", run: failsAfterEcho(frame{fin: true, rsv: 6, op: opPing, payload: []byte("ping")}, 0)},
		{name: "close with RSV 7", run: failsAfterEcho(frame{fin: true, rsv: 7, op: opClose, payload: closePayload(1000, "")}, 0)},
		{name: "continuation with RSV 1", run: func(c *client) {
			c.send(0, frame{op: opText, payload: []byte("frag")}, frame{fin: true, rsv: 1, op: opCont, payload: []byte("ment")})
			c.fails(1002)
		}},
	}
}

func opcodes() []tcase {
	var cs []tcase
	for _, op := range []byte{3, 4, 5, 6, 7, 11, 12, 13, 14, 15} {
		cs = append(cs, tcase{name: fmt.Sprintf("reserved opcode %d after a text", op),
			run: failsAfterEcho(frame{fin: true, op: op, payload: []byte("reserved")}, 0)})
	}
	cs = append(cs, tcase{name: "reserved opcode 3 without payload", run: func(c *client) {
		c.send(0, final(3, nil))
		c.fails(1002)
	}})
	return cs
}

func fragmentation() []tcase {
	msg := []byte("fragment1fragment2")
	two := func() []frame {
		return []frame{{op: opText, payload: msg[:9]}, {fin: true, op: opCont, payload: msg[9:]}}
	}
	withPing := func() []frame {
		return []frame{{op: opText, payload: msg[:9]}, final(opPing, []byte("between")), {fin: true, op: opCont, payload: msg[9:]}}
	}
	fails := func(chunk int, frames ...frame) func(c *client) {
		return func(c *client) {
			c.send(chunk, frames...)
			c.fails(1002)
		}
	}
	return []tcase{
		{name: "ping in two fragments fails", run: fails(0, frame{op: opPing, payload: []byte("frag")}, frame{fin: true, op: opCont, payload: []byte("ment")})},
		{name: "pong in two fragments fails", run: fails(0, frame{op: opPong, payload: []byte("frag")}, frame{fin: true, op: opCont, payload: []byte("ment")})},
		{name: "text in two fragments", run: func(c *client) {
			c.send(0, two()...)
			c.expectMessage(opText, msg)
			bye(c)
		}},
		{name: "text in two fragments, a byte at a time", run: func(c *client) {
			c.send(1, two()...)
			c.expectMessage(opText, msg)
			bye(c)
		}},
		{name: "text in two fragments, a ping between", run: func(c *client) {
			c.send(0, withPing()...)
			c.expectPong([]byte("between"))
			c.expectMessage(opText, msg)
			bye(c)
		}},
		{name: "text in two fragments, a ping between, a byte at a time", run: func(c *client) {
			c.send(1, withPing()...)
			c.expectPong([]byte("between"))
			c.expectMessage(opText, msg)
			bye(c)
		}},
		{name: "ping between fragments answered before the message ends", run: func(c *client) {
			f := withPing()
			c.send(0, f[0], f[1])
			c.expectPong([]byte("between"))
			c.send(0, f[2])
			c.expectMessage(opText, msg)
			bye(c)
		}},
		{name: "text in 20 fragments, a ping between each", run: func(c *client) {
			var all []frame
			frags := fragments(opText, textOf(40), 2)
			for i, f := range frags {
				all = append(all, f)
				if i < len(frags)-1 {
					all = append(all, final(opPing, fmt.Appendf(nil, "%d", i)))
				}
			}
			c.send(0, all...)
			for i := range len(frags) - 1 {
				c.expectPong(fmt.Appendf(nil, "%d", i))
			}
			c.expectMessage(opText, textOf(40))
			bye(c)
		}},
		{name: "final continuation without a start fails", run: fails(0, frame{fin: true, op: opCont, payload: []byte("x")})},
		{name: "continuation without a start fails", run: fails(0, frame{op: opCont, payload: []byte("x")})},
		{name: "continuation without a start, then text, a byte at a time", run: fails(1, frame{op: opCont, payload: []byte("x")}, final(opText, []byte("never")))},
		{name: "a text where a continuation belongs fails", run: fails(0, frame{op: opText, payload: []byte("frag")}, final(opText, []byte("ment")))},
		{name: "a binary where a continuation belongs fails", run: fails(0, frame{op: opText, payload: []byte("a")}, frame{op: opCont, payload: []byte("b")}, final(opBinary, []byte("c")))},
		{name: "close in two fragments fails", run: fails(0, frame{op: opClose, payload: closePayload(1000, "")}, frame{fin: true, op: opCont})},
		{name: "binary in fragments, empty ones first and last", run: func(c *client) {
			c.send(0, frame{op: opBinary}, frame{op: opCont, payload: binaryOf(30)}, frame{fin: true, op: opCont})
			c.expectMessage(opBinary, binaryOf(30))
			bye(c)
		}},
		{name: "text of three empty fragments", run: func(c *client) {
			c.send(0, frame{op: opText}, frame{op: opCont}, frame{fin: true, op: opCont})
			c.expectMessage(opText, nil)
			bye(c)
		}},
		{name: "two fragmented messages in a row", run: func(c *client) {
			c.send(0, append(fragments(opText, textOf(30), 7), fragments(opBinary, binaryOf(30), 11)...)...)
			c.expectMessage(opText, textOf(30))
			c.expectMessage(opBinary, binaryOf(30))
			bye(c)
		}},
	}
}

var validUTF8 = []string{
	"Hello-µ@ßöäüàá-UTF-8!!", "κόσμε", "\x00", "\x7f", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xef\xbf\xbf",
	"\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbd", "\xef\xbf\xbe",
	"\xf0\x9f\x98\x80",
}

var invalidUTF8 = []string{
	"\x80", "\xbf", "\x80\xbf\x80\xbf", "\xc0 ", "\xe0 ", "\xf0 ", "\xc2", "\xe0\xa0", "\xf0\x90\x80", "κόσμε\xe0\xa0",
	"\xfe", "\xff", "\xfe\xfe\xff\xff", "\xc0\xaf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf", "\xf8\x80\x80\x80\xaf",
	"\xfc\x80\x80\x80\x80\xaf", "\xc1\xbf", "\xe0\x9f\xbf", "\xf0\x8f\xbf\xbf", "\xc0\x80", "\xe0\x80\x80",
	"\xed\xa0\x80", "\xed\xad\xbf", "\xed\xae\x80", "\xed\xaf\xbf", "\xed\xb0\x80", "\xed\xbe\x80", "\xed\xbf\xbf",
	"\xed\xa0\x80\xed\xb0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xf7\xbf\xbf\xbf",
	"κόσμε\xed\xa0\x80edited", "all:\xff\xfe",
}

// failsInvalid sends frames and checks the connection fails with 1007
// and no message of the socket reached the actor.
func failsInvalid(chunk int, frames ...frame) func(c *client) {
	return func(c *client) {
		c.send(chunk, frames...)
		c.fails(1007)
		if n := c.messages(); n != 0 {
			c.t.Errorf("%d messages reached the actor, want none", n)
		}
	}
}

func utf8Handling() []tcase {
	cs := []tcase{{name: "empty text", run: echoes(opText, nil, 0)}}
	for _, s := range validUTF8 {
		cs = append(cs,
			tcase{name: fmt.Sprintf("valid %q", s), run: echoes(opText, []byte(s), 0)},
			tcase{name: fmt.Sprintf("valid %q, a fragment per byte", s), run: func(c *client) {
				c.send(0, fragments(opText, []byte(s), 1)...)
				c.expectMessage(opText, []byte(s))
				bye(c)
			}},
		)
	}
	for _, s := range invalidUTF8 {
		cs = append(cs,
			tcase{name: fmt.Sprintf("invalid %q", s), run: failsInvalid(0, final(opText, []byte(s)))},
			tcase{name: fmt.Sprintf("invalid %q, a fragment per byte", s), run: failsInvalid(0, fragments(opText, []byte(s), 1)...)},
		)
	}
	return append(cs,
		tcase{name: "invalid in a first fragment fails before the last one", run: func(c *client) {
			c.send(0, frame{op: opText, payload: []byte("κόσμε\xf4\x90\x80\x80")})
			c.fails(1007)
		}},
		tcase{name: "a first fragment ending inside a surrogate fails at once", run: func(c *client) {
			c.send(0, frame{op: opText, payload: []byte("κόσμε\xed\xa0")})
			c.fails(1007)
		}},
		tcase{name: "a valid text, then an invalid one", run: func(c *client) {
			c.send(0, final(opText, []byte("κόσμε")), final(opText, []byte("\xce\xba\xff")))
			c.expectMessage(opText, []byte("κόσμε"))
			c.fails(1007)
		}},
		tcase{name: "valid sequences split across fragments", run: func(c *client) {
			s := []byte("κόσμε\xf0\x9f\x98\x80\xe0\xa0\x80")
			c.send(0, frame{op: opText, payload: s[:1]}, frame{op: opCont, payload: s[1:11]}, frame{op: opCont, payload: s[11:13]},
				frame{fin: true, op: opCont, payload: s[13:]})
			c.expectMessage(opText, s)
			bye(c)
		}},
		tcase{name: "binary is not checked", run: echoes(opBinary, []byte("\xff\xfe\xed\xa0\x80"), 0)},
	)
}

func closeHandling() []tcase {
	cs := []tcase{
		{name: "text, then close", run: func(c *client) {
			c.send(0, final(opText, []byte("Hello, world!")))
			c.expectMessage(opText, []byte("Hello, world!"))
			bye(c)
		}},
		{name: "close twice", run: func(c *client) {
			c.send(0, final(opClose, closePayload(1000, "")), final(opClose, closePayload(1000, "")))
			c.expectClose(1000)
			c.expectEnd(nil, 1000)
		}},
		{name: "close, then ping", run: func(c *client) {
			c.send(0, final(opClose, closePayload(1000, "")), final(opPing, []byte("never")))
			c.expectClose(1000)
			c.expectEnd(nil, 1000)
		}},
		{name: "close, then text", run: func(c *client) {
			c.send(0, final(opClose, closePayload(1000, "")), final(opText, []byte("never")))
			c.expectClose(1000)
			c.expectEnd(nil, 1000)
		}},
		{name: "a fragment, close, then the last fragment", run: func(c *client) {
			c.send(0, frame{op: opText, payload: []byte("frag")}, final(opClose, closePayload(1000, "")), frame{fin: true, op: opCont, payload: []byte("ment")})
			c.expectClose(1000)
			c.expectEnd(nil, 1000)
		}},
		{name: "256 KiB text, close, then ping", run: func(c *client) {
			big := textOf(256 << 10)
			c.send(0, final(opText, big), final(opClose, closePayload(1000, "")), final(opPing, nil))
			// The echo may go before the close, or be dropped by it.
			f, err := c.next()
			if err == nil && f.op == opText {
				if !f.fin || !bytes.Equal(f.payload, big) {
					c.t.Fatalf("echo %v differs", f)
				}
				c.expectClose(1000)
			} else if err != nil || f.op != opClose || binary.BigEndian.Uint16(f.payload) != 1000 {
				c.t.Fatalf("want the echo or a close 1000, got %v, %v", f, err)
			} else {
				c.expectEOF()
			}
			c.expectEnd(nil, 1000)
		}},
		{name: "close without payload", run: func(c *client) { c.closes(nil, 1005) }},
		{name: "close of 1 byte fails", run: func(c *client) {
			c.send(0, final(opClose, []byte{0x03}))
			c.fails(1002)
		}},
		{name: "close 1000", run: func(c *client) { c.closes(closePayload(1000, ""), 1000) }},
		{name: "close 1000 with a reason", run: func(c *client) { c.closes(closePayload(1000, "Hello World!"), 1000) }},
		{name: "close 1000 with a reason of 123 bytes", run: func(c *client) { c.closes(closePayload(1000, strings.Repeat("*", 123)), 1000) }},
		{name: "close with a reason of 124 bytes fails (a control frame of 126)", run: func(c *client) {
			c.send(0, final(opClose, closePayload(1000, strings.Repeat("*", 124))))
			c.fails(1002)
		}},
		{name: "close with a reason that is not UTF-8 fails", run: func(c *client) {
			c.send(0, final(opClose, closePayload(1000, "κόσμε\xed\xa0\x80edited")))
			c.fails(1007)
		}},
		{name: "close with a reason, a byte at a time", run: func(c *client) {
			c.send(1, final(opClose, closePayload(1000, "κόσμε")))
			c.expectClose(1000)
			c.expectEnd(nil, 1000)
		}},
	}
	for _, code := range []int{1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999} {
		cs = append(cs, tcase{name: fmt.Sprintf("valid code %d is echoed", code), run: func(c *client) { c.closes(closePayload(code, "reason"), code) }})
	}
	for _, code := range []int{0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535} {
		cs = append(cs, tcase{name: fmt.Sprintf("invalid code %d fails", code), run: func(c *client) {
			c.send(0, final(opClose, closePayload(code, "")))
			c.fails(1002)
		}})
	}
	return cs
}

func performance() []tcase {
	var cs []tcase
	for _, n := range []int{64 << 10, 256 << 10, maxMessage} {
		cs = append(cs,
			tcase{name: fmt.Sprintf("text of %d KiB", n>>10), run: echoes(opText, textOf(n), 0)},
			tcase{name: fmt.Sprintf("binary of %d KiB", n>>10), run: echoes(opBinary, binaryOf(n), 0)},
		)
	}
	for _, size := range []int{64 << 10, 4 << 10, 256} {
		cs = append(cs, tcase{name: fmt.Sprintf("text of 1 MiB in fragments of %d bytes", size), run: func(c *client) {
			c.send(0, fragments(opText, textOf(maxMessage), size)...)
			c.expectMessage(opText, textOf(maxMessage))
			bye(c)
		}})
	}
	many := func(op byte, count, size int) func(c *client) {
		return func(c *client) {
			var all []frame
			for i := range count {
				p := binaryOf(size)
				if op == opText {
					p = textOf(size)
				}
				all = append(all, final(op, append(fmt.Appendf(nil, "%04d", i), p[4:]...)))
			}
			c.send(0, all...)
			for _, f := range all {
				c.expectMessage(op, f.payload)
			}
			bye(c)
		}
	}
	return append(cs,
		tcase{name: "text over MaxMessage fails with 1009", run: func(c *client) {
			c.send(0, final(opText, textOf(maxMessage+1)))
			c.fails(1009)
		}},
		tcase{name: "1000 texts of 16 bytes", run: many(opText, 1000, 16)},
		tcase{name: "1000 binaries of 16 bytes", run: many(opBinary, 1000, 16)},
		tcase{name: "100 binaries of 64 KiB", run: many(opBinary, 100, 64<<10)},
	)
}

func compression() []tcase {
	refused := func(offer string) tcase {
		return tcase{name: "offer of " + offer + " is not accepted", header: []string{"Sec-WebSocket-Extensions: " + offer}, run: func(c *client) {
			if got := c.resp.Header.Values("Sec-WebSocket-Extensions"); len(got) != 0 {
				c.t.Fatalf("the handshake accepted extensions %q", got)
			}
			c.send(0, final(opText, []byte("Hello, world!")))
			c.expectMessage(opText, []byte("Hello, world!"))
			bye(c)
		}}
	}
	return []tcase{
		refused("permessage-deflate"),
		refused("permessage-deflate; client_max_window_bits; server_max_window_bits=10"),
		refused("permessage-deflate; client_no_context_takeover; server_no_context_takeover"),
		refused("x-webkit-deflate-frame"),
		{name: "a compressed message (RSV 1) without the extension fails", header: []string{"Sec-WebSocket-Extensions: permessage-deflate"}, run: func(c *client) {
			c.send(0, frame{fin: true, rsv: 4, op: opText, payload: []byte{0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00}})
			c.fails(1002)
		}},
	}
}

// row is a section's line of the report.
type row struct {
	section       string
	cases, passed int
	failed        []string
}

// report logs the table of the run and, with WSCONFORM_REPORT set to a
// file, writes it there as sockets/CONFORMANCE.md is.
func report(t *testing.T, rows []row) {
	var b strings.Builder
	b.WriteString("| Section | Cases | Passed |\n|---|---:|---:|\n")
	cases, passed := 0, 0
	var failed []string
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", r.section, r.cases, r.passed)
		cases += r.cases
		passed += r.passed
		for _, f := range r.failed {
			failed = append(failed, r.section+": "+f)
		}
	}
	fmt.Fprintf(&b, "| **Total** | **%d** | **%d** |\n", cases, passed)
	t.Logf("conformance:\n%s", b.String())
	path := os.Getenv("WSCONFORM_REPORT")
	if path == "" {
		return
	}
	gorilla := "gorilla/websocket" // a test binary holds no module versions: ask go
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/gorilla/websocket").Output(); err == nil {
		gorilla += " " + strings.TrimSpace(string(out))
	}
	var doc strings.Builder
	doc.WriteString(`# WebSocket conformance

What the node's socket owner does with what a client sends, section by
section of RFC 6455 as an Autobahn TestSuite fuzzing client groups them.
The cases are the suite of ` + "`tests/wsconform`" + ` (cases of our own, not
Autobahn's), run against a ` + "`sockets.Owner`" + ` whose actor echoes every
message, by a raw TCP client that writes frames whole or a few bytes at
a time. A case that fails the connection passes only with the exact
close code (1002, 1007 or 1009), the end of the connection after it,
nothing else before it, and the fault at the actor; an invalid text
message must never reach the actor. The UTF-8 cases include failing
fast: a first fragment that cannot begin UTF-8 fails the connection
before the last fragment is sent. Section 10 (automatic fragmentation)
has no cases: the node sends each message in one frame. What RFC 6455
asks that gorilla/websocket does not do, and how the owner makes up for
it, is in ` + "`sockets/doc.go`" + ` ("RFC 6455").

This file is written by the run (do not edit it by hand):

    WSCONFORM_REPORT=$PWD/sockets/CONFORMANCE.md go test -race -run Conformance ./tests/wsconform/

`)
	fmt.Fprintf(&doc, "Last run: %s, %s, %s/%s, the Owner's MaxMessage %d KiB.\n\n", runtime.Version(), gorilla, runtime.GOOS, runtime.GOARCH, maxMessage>>10)
	doc.WriteString(b.String())
	if len(failed) > 0 {
		doc.WriteString("\nFailed:\n\n")
		for _, f := range failed {
			fmt.Fprintf(&doc, "- %s\n", f)
		}
	}
	if err := os.WriteFile(path, []byte(doc.String()), 0o644); err != nil {
		t.Errorf("write the report: %v", err)
	}
}
