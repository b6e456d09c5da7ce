package sockets

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// Text messages are UTF-8 (RFC 6455 section 8.1): one that is not fails
// its socket with 1007 (section 8.1 and 7.4.1), and the node never sends
// one (Send and Broadcast refuse it). An incoming text message is checked
// as it is read, each read's bytes as they come, a sequence split across
// reads or fragments once it is whole: the socket fails on the first bytes
// that cannot begin valid UTF-8, without waiting for the rest of the
// message (or its last fragment).

// errNotUTF8 is the fault of an incoming text message that is not UTF-8.
var errNotUTF8 = fmt.Errorf("%w: a text message that is not UTF-8", ErrInvalidUTF8)

// readMessage reads one message from r, up to its end; a text message
// stops at its first bytes that cannot be UTF-8 (errNotUTF8).
func readMessage(r io.Reader, text bool) ([]byte, error) {
	b := make([]byte, 0, 512)
	valid := 0 // b[:valid] is UTF-8 (text only)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if text && n > 0 {
			var ok bool
			if valid, ok = checkUTF8(b, valid); !ok {
				return nil, errNotUTF8
			}
		}
		switch {
		case err == io.EOF:
			if text && valid != len(b) { // it ends inside a sequence
				return nil, errNotUTF8
			}
			return b, nil
		case err != nil:
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// checkUTF8 checks b, of which b[:from] is valid UTF-8 ending on a
// sequence's end. It returns how much of b is valid up to a sequence's
// end, and false if b cannot begin valid UTF-8. A sequence b ends inside
// is left for the next check unless its bytes so far cannot begin one
// (utf8.FullRune reports them whole, and utf8.Valid refuses them): an
// overlong form, a surrogate or a code point over U+10FFFF is refused on
// its second byte, where UTF-8 tells.
func checkUTF8(b []byte, from int) (int, bool) {
	end := len(b)
	// The last sequence begins at most 3 bytes from the end.
	for i := end - 1; i >= from && i >= end-3; i-- {
		if c := b[i]; c < utf8.RuneSelf {
			break
		} else if utf8.RuneStart(c) {
			if !utf8.FullRune(b[i:]) {
				end = i
			}
			break
		}
	}
	if !utf8.Valid(b[from:end]) {
		return from, false
	}
	return end, true
}
