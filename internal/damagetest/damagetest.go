// Package damagetest damages a directory bucket for tests.
package damagetest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Segment is the path of the segment the directory store in dir writes
// to now (the one its file "current" names).
func Segment(t testing.TB, dir string) string {
	t.Helper()
	cur, err := os.ReadFile(filepath.Join(dir, "current"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, strings.TrimSpace(string(cur)))
}

// FlipAfterKey flips, in place, the byte after the last copy of key in the
// segment of the directory store in dir: the first byte of the body of the
// key's last record.
func FlipAfterKey(t testing.TB, dir, key string) {
	t.Helper()
	p := Segment(t, dir)
	seg, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(seg, []byte(key))
	if at < 0 {
		t.Fatalf("%s holds no record of %s", p, key)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{seg[at+len(key)] ^ 0x01}, int64(at+len(key))); err != nil {
		t.Fatal(err)
	}
}
