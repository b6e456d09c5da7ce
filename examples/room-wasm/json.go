package main

import (
	"unicode/utf16"
	"unicode/utf8"
)

// The few JSON shapes of the room: a flat object read into its string
// members, and strings written. encoding/json would make the module
// about 1 MB (45%) bigger: 3.3 MB instead of 2.3 MB.

const hexDigits = "0123456789abcdef"

// quote returns s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func quote(s string) []byte {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		b = utf8.AppendRune(b, r) // RuneError for an invalid byte
		i += n
	}
	return append(b, '"')
}

// decodeObject decodes a JSON object and returns its members whose values
// are strings; members of other types are skipped (numbers checked
// loosely). It reports false for anything that is not one well-formed
// object.
func decodeObject(data []byte) (map[string]string, bool) {
	d := decoder{b: data}
	out := map[string]string{}
	d.space()
	if !d.eat('{') {
		return nil, false
	}
	d.space()
	if d.eat('}') {
		return out, d.end()
	}
	for {
		d.space()
		key, ok := d.str()
		if !ok {
			return nil, false
		}
		d.space()
		if !d.eat(':') {
			return nil, false
		}
		d.space()
		if d.peek() == '"' {
			v, ok := d.str()
			if !ok {
				return nil, false
			}
			out[key] = v
		} else if !d.skip(0) {
			return nil, false
		}
		d.space()
		if d.eat('}') {
			return out, d.end()
		}
		if !d.eat(',') {
			return nil, false
		}
	}
}

// decoder reads JSON front to back.
type decoder struct {
	b []byte
	i int
}

func (d *decoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *decoder) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// end reports whether only white space is left.
func (d *decoder) end() bool {
	d.space()
	return d.i == len(d.b)
}

// str reads a string.
func (d *decoder) str() (string, bool) {
	if !d.eat('"') {
		return "", false
	}
	var out []byte
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		d.i++
		e := d.peek()
		d.i++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(utf8.RuneError)
				if d.peek() == '\\' && d.i+1 < len(d.b) && d.b[d.i+1] == 'u' {
					d.i += 2
					if r2, ok = d.hex4(); !ok {
						return "", false
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	d.i += 4
	return r, true
}

// maxDepth bounds the nesting of a skipped value.
const maxDepth = 32

// skip checks and skips one value of any type.
func (d *decoder) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch c := d.peek(); {
	case c == '"':
		_, ok := d.str()
		return ok
	case c == '{' || c == '[':
		d.i++
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		d.space()
		if d.eat(closer) {
			return true
		}
		for {
			d.space()
			if c == '{' {
				if _, ok := d.str(); !ok {
					return false
				}
				d.space()
				if !d.eat(':') {
					return false
				}
				d.space()
			}
			if !d.skip(depth + 1) {
				return false
			}
			d.space()
			if d.eat(closer) {
				return true
			}
			if !d.eat(',') {
				return false
			}
		}
	case c == 't':
		return d.word("true")
	case c == 'f':
		return d.word("false")
	case c == 'n':
		return d.word("null")
	case c == '-' || '0' <= c && c <= '9':
		start := d.i
		for d.i < len(d.b) && (d.b[d.i] == '-' || d.b[d.i] == '+' || d.b[d.i] == '.' ||
			d.b[d.i] == 'e' || d.b[d.i] == 'E' || '0' <= d.b[d.i] && d.b[d.i] <= '9') {
			d.i++
		}
		return d.i > start
	}
	return false
}

func (d *decoder) word(w string) bool {
	if d.i+len(w) > len(d.b) || string(d.b[d.i:d.i+len(w)]) != w {
		return false
	}
	d.i += len(w)
	return true
}
