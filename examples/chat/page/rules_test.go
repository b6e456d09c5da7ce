package page

import "testing"

func TestClean(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want string
	}{
		{"  ada  ", 40, "ada"},
		{"a\x00d\ta\x7f", 40, "ada"},
		{"héllo", 2, "h"}, // never half a rune
		{"héllo", 3, "hé"},
		{"\n\t ", 40, ""},
	} {
		if got := Clean(tt.in, tt.max); got != tt.want {
			t.Errorf("Clean(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}
