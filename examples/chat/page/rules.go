package page

import (
	"strings"
	"unicode/utf8"
)

// The chat protocol's limits, the same in both rooms.
const (
	// HistoryLen is how many messages a room keeps.
	HistoryLen = 100
	// MaxName and MaxText bound a name and a message, in bytes.
	MaxName = 40
	MaxText = 2000
)

// Clean trims s, drops control characters and cuts it to at most max bytes
// of whole runes: what both rooms do to a name or a message before using it.
func Clean(s string, max int) string {
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s))
	for len(s) > max {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}
