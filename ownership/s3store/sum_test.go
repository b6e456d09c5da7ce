package s3store_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/s3store"
)

// TestChangedByteNamedDamage: a byte changed in the server's own file of
// an object the store wrote is found on the next read and named as damage,
// not served as data; the object written again is read as before.
func TestChangedByteNamedDamage(t *testing.T) {
	prefix := randomPrefix(t)
	s, err := s3store.New(t.Context(), gw.Config(prefix))
	if err != nil {
		t.Fatal(err)
	}
	key := "actors/counter/c/state"
	body := []byte("wk1 state 1 3\ncount 3")
	if _, err := s.Put(t.Context(), key, body, ownership.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if obj, err := s.Get(t.Context(), key); err != nil || !bytes.Equal(obj.Body, body) {
		t.Fatalf("read back: %q %v", obj.Body, err)
	}
	// versitygw's posix backend keeps the object as a file under the
	// bucket's directory, its metadata in extended attributes.
	file := filepath.Join(gw.DataDir, gw.Bucket, prefix, key)
	stored, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(stored, []byte("count 3"), []byte("count 2"), 1)
	if bytes.Equal(changed, stored) {
		t.Fatalf("the server's file %s does not hold the body as written: %q", file, stored)
	}
	// Written in place, as damage at rest would be: the file keeps its
	// extended attributes.
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(changed, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = s.Get(t.Context(), key)
	if !errors.Is(err, ownership.ErrDamaged) || ownership.OutcomeOf(err) != ownership.Damaged {
		t.Fatalf("read of the changed object: %v, want damage", err)
	}
	if _, err := s.Put(t.Context(), key, body, ownership.Always()); err != nil {
		t.Fatal(err)
	}
	if obj, err := s.Get(t.Context(), key); err != nil || !bytes.Equal(obj.Body, body) {
		t.Fatalf("read after the rewrite: %q %v", obj.Body, err)
	}
}
