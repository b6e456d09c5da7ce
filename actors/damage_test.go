package actors_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// flipInSegment flips a byte of the last record the directory store in dir
// holds under key: the first byte of its body.
func flipInSegment(t *testing.T, dir, key string) {
	t.Helper()
	cur, err := os.ReadFile(filepath.Join(dir, "current"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, strings.TrimSpace(string(cur)))
	seg, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(seg, []byte(key))
	if at < 0 {
		t.Fatalf("%s holds no record of %s", p, key)
	}
	seg[at+len(key)] ^= 0x01
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(seg[at+len(key):at+len(key)+1], int64(at+len(key))); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedState: an actor whose state object is damaged in the bucket
// (it fails the directory store's checksum, or its payload does not decode)
// fails every event with a DamagedError that names the key and matches
// ownership.ErrDamaged, not a retryable UnavailableError; the owner is told
// each time (it counts, and logs once per key); nothing is written over the
// object; and another actor is served as before.
func TestDamagedState(t *testing.T) {
	other := ownership.Actor{Class: "counter", Name: "other"}
	key := actors.StateKey(room)
	for _, c := range []struct {
		name   string
		damage func(t *testing.T) ownership.Bucket
	}{
		{"checksum", func(t *testing.T) ownership.Bucket {
			dir := t.TempDir()
			b, err := dirstore.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			mustCount(t, newHost(t, b, &owner{}, nil), 1, "1")
			flipInSegment(t, dir, key)
			return b
		}},
		{"decode", func(t *testing.T) ownership.Bucket {
			b := memstore.New(memstore.Faults{})
			// A key length of 5 with one byte after it.
			body := ownership.EncodeState(ownership.StateHeader{Gen: 1, Seq: 1}, []byte{5, 'a'})
			if _, err := b.Put(t.Context(), key, body, ownership.IfAbsent()); err != nil {
				t.Fatal(err)
			}
			return b
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.damage(t)
			before := stateOf(t, b, key)
			o := &owner{}
			h := newHost(t, b, o, nil)
			for i := range 2 {
				_, err := count(t, h, 2, "")
				var de *actors.DamagedError
				if !errors.As(err, &de) || de.Key != key || de.Actor != room || !errors.Is(err, ownership.ErrDamaged) ||
					errors.Is(err, actors.ErrUnavailable) || !strings.Contains(err.Error(), key) {
					t.Fatalf("event %d of a damaged actor: %v, want a DamagedError naming %s", i, err, key)
				}
			}
			resp, err := h.Deliver(t.Context(), other, 1, get(""))
			if err != nil || resp.Status != http.StatusOK || string(resp.Body) != "1\n" {
				t.Fatalf("another actor: %v, %v; want it served", resp, err)
			}
			o.mu.Lock()
			told := append([]string(nil), o.damaged...)
			o.mu.Unlock()
			if len(told) != 2 || told[0] != key || told[1] != key {
				t.Fatalf("owner told of damage: %q, want %s twice", told, key)
			}
			if after := stateOf(t, b, key); after != before {
				t.Fatalf("the damaged object after the events: %s, want it left as it was: %s", after, before)
			}
		})
	}
}

// stateOf describes what the bucket answers for key: its ETag and body, or
// its error's outcome.
func stateOf(t *testing.T, b ownership.Bucket, key string) string {
	t.Helper()
	obj, err := b.Get(t.Context(), key)
	if err != nil {
		return ownership.OutcomeOf(err).String()
	}
	return fmt.Sprintf("%s %q", obj.ETag, obj.Body)
}
