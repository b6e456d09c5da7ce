package actorhost_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/internal/damagetest"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// TestDamagedState: an actor whose state object is damaged in the bucket
// (it fails the directory store's checksum, or its payload does not decode)
// fails every event with a DamagedError that names the key and matches
// ownership.ErrDamaged, not a retryable UnavailableError; the keeper is told
// each time (it counts, and logs once per key); nothing is written over the
// object; and another actor is served as before.
func TestDamagedState(t *testing.T) {
	other := ownership.Actor{Class: "counter", Name: "other"}
	key := actorstore.StateKey(room)
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
			mustCount(t, newHost(t, b, &fakeKeeper{}, nil), 1, "1")
			damagetest.FlipAfterKey(t, dir, key)
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
			o := &fakeKeeper{}
			h := newHost(t, b, o, nil)
			for i := range 2 {
				_, err := count(t, h, 2, "")
				var de *actorhost.DamagedError
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
				t.Fatalf("keeper told of damage: %q, want %s twice", told, key)
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
