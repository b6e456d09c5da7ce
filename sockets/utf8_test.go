package sockets

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"unicode/utf8"
)

// utf8Cases are valid and invalid UTF-8, the boundaries of each sequence
// length and each way a sequence can be wrong.
var utf8Cases = []string{
	"", "a", "Hello-µ@ßöäüàá-UTF-8!!", "κόσμε",
	"\x00", "\x7f", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xef\xbf\xbf",
	"\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbd",
	"\x80", "\xbf", "\x80\xbf\x80", "\xc2", "\xc2 ", "\xe0\xa0", "\xf0\x90\x80", "x\xe0\xa0y",
	"\xfe", "\xff", "\xfe\xfe\xff\xff", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xe0\x9f\xbf",
	"\xf0\x80\x80\xaf", "\xf0\x8f\xbf\xbf", "\xf8\x80\x80\x80\xaf", "\xc0\x80",
	"\xed\xa0\x80", "\xed\xbf\xbf", "\xed\xa0\x80\xed\xb0\x80",
	"\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xf7\xbf\xbf\xbf",
	"κόσμε\xed\xa0\x80edited", "κόσμε\xf4\x90\x80\x80", "\xce\xba\xe1\xbd\xb9\xcf",
}

// feed checks b in the chunks split gives (checkUTF8 each time, as
// readMessage does) and returns the verdict at the end and how many bytes
// were fed when it first failed (-1: never).
func feed(b []byte, split []int) (valid bool, failedAt int) {
	checked, end := 0, 0
	for _, k := range append(split, len(b)) {
		end = max(end, min(k, len(b)))
		var ok bool
		if checked, ok = checkUTF8(b[:end], checked); !ok {
			return false, end
		}
	}
	return checked == len(b), -1
}

// TestCheckUTF8InChunks: checked whole, in two parts at every byte, or a
// byte at a time, every case gets utf8.Valid's verdict.
func TestCheckUTF8InChunks(t *testing.T) {
	for _, c := range utf8Cases {
		b := []byte(c)
		want := utf8.Valid(b)
		if got, _ := feed(b, nil); got != want {
			t.Errorf("%q whole: %v, want %v", c, got, want)
		}
		var each []int
		for k := 1; k < len(b); k++ {
			if got, _ := feed(b, []int{k}); got != want {
				t.Errorf("%q split at %d: %v, want %v", c, k, got, want)
			}
			each = append(each, k)
		}
		if got, _ := feed(b, each); got != want {
			t.Errorf("%q a byte at a time: %v, want %v", c, got, want)
		}
	}
}

// TestCheckUTF8FailsFast: bytes that cannot begin UTF-8 fail when they
// come, before the message ends.
func TestCheckUTF8FailsFast(t *testing.T) {
	for _, c := range []struct {
		in string
		at int // bytes fed when it fails, a byte at a time
	}{
		{"ab\xff", 3},
		{"\xc0", 1},               // never a lead byte
		{"\xed\xa0", 2},           // a surrogate, on its second byte
		{"\xe0\x80", 2},           // overlong, on its second byte
		{"\xf4\x90", 2},           // over U+10FFFF, on its second byte
		{"\xe0\xa0x", 3},          // cut short by an ASCII byte
		{"κόσμε\xf4\x90\x80", 12}, // ten valid bytes, then over U+10FFFF
	} {
		b := []byte(c.in)
		var each []int
		for k := 1; k < len(b); k++ {
			each = append(each, k)
		}
		if valid, at := feed(b, each); valid || at != c.at {
			t.Errorf("%q: failed after %d bytes (valid %v), want after %d", c.in, at, valid, c.at)
		}
	}
	// A valid beginning waits for its end.
	if valid, at := feed([]byte("\xf4\x8f\xbf"), []int{1, 2}); valid || at != -1 {
		t.Errorf("an unfinished valid sequence: valid %v, failed at %d; want an unfinished message", valid, at)
	}
}

func FuzzCheckUTF8(f *testing.F) {
	for _, c := range utf8Cases {
		f.Add([]byte(c), uint8(1), uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, x, y uint8) {
		split := []int{int(x) % (len(b) + 1), int(y) % (len(b) + 1)}
		if split[1] < split[0] {
			split[0], split[1] = split[1], split[0]
		}
		if got, _ := feed(b, split); got != utf8.Valid(b) {
			t.Fatalf("%q split at %v: %v, want %v", b, split, got, !got)
		}
	})
}

// chunkReader returns its data n bytes per Read.
type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.data)
	r.data = r.data[k:]
	return k, nil
}

func TestReadMessage(t *testing.T) {
	big := bytes.Repeat([]byte("κόσμε"), 1000)
	for _, n := range []int{1, 3, 256, len(big)} {
		got, err := readMessage(&chunkReader{data: big, n: n}, true)
		if err != nil || !bytes.Equal(got, big) {
			t.Errorf("%d bytes a read: %d bytes, %v", n, len(got), err)
		}
	}
	bad := append(bytes.Clone(big[:999]), big[1000:]...) // a sequence cut in two
	if _, err := readMessage(&chunkReader{data: bad, n: 7}, true); !errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("invalid text: %v, want ErrInvalidUTF8", err)
	}
	if got, err := readMessage(&chunkReader{data: bad, n: 7}, false); err != nil || !bytes.Equal(got, bad) {
		t.Errorf("the same bytes as binary: %d bytes, %v", len(got), err)
	}
}
