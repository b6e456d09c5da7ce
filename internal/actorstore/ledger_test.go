package actorstore

import (
	"net/http"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
)

// TestLedgerExpiry: a key is ended at the first record after its window,
// and the ledger counts what it keeps.
func TestLedgerExpiry(t *testing.T) {
	st := stateOfMap(map[string][]byte{})
	t0 := time.Unix(1_800_000_000, 0)
	record := func(name string, keep time.Duration, now time.Time) {
		t.Helper()
		tx := NewEventTxn(t.Context(), st, testMaxState)
		e := LedgerEntry{Status: http.StatusOK, Body: []byte(name)}
		if err := tx.LedgerRecord(LedgerKey{Name: "c/" + name, Keep: keep}, &e, now, 100, false); err != nil {
			t.Fatal(err)
		}
		st.Apply(tx, 1)
	}
	kept := func(name string) bool {
		_, ok, err := NewEventTxn(t.Context(), st, testMaxState).LedgerLookup(LedgerKey{Name: "c/" + name, Keep: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	record("short", time.Minute, t0)
	record("long", time.Hour, t0)
	if !kept("short") || !kept("long") {
		t.Fatal("keys not kept")
	}
	record("later", time.Hour, t0.Add(2*time.Minute))
	if kept("short") || !kept("long") || !kept("later") {
		t.Fatalf("after the short window: short %v long %v later %v, want only short ended", kept("short"), kept("long"), kept("later"))
	}
	if n := NewEventTxn(t.Context(), st, testMaxState).keyCount(); n != 2 {
		t.Fatalf("count %d, want 2", n)
	}
	// What the ledger keeps is under the node's prefix: the class sees none.
	if es, _ := NewEventTxn(t.Context(), st, testMaxState).List(actors.ListOptions{}); len(es) != 0 {
		t.Fatalf("the class sees %d entries", len(es))
	}
}

// TestLedgerEntryRoundTrip: an entry decodes as it was encoded.
func TestLedgerEntryRoundTrip(t *testing.T) {
	e := LedgerEntry{Partial: true, expires: 42, Status: 201, Header: http.Header{"A": {"1", ""}, "B": {"x"}}, parts: 3, Body: []byte("body")}
	e.Sum[3] = 9
	got, err := decodeEntry(e.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Partial || got.expires != 42 || got.Status != 201 || got.parts != 3 || string(got.Body) != "body" || got.Sum != e.Sum ||
		len(got.Header) != 2 || got.Header["A"][1] != "" || got.Header["B"][0] != "x" {
		t.Fatalf("round trip: %+v", got)
	}
	for n := range len(e.encode()) {
		if _, err := decodeEntry(e.encode()[:n]); err == nil && n < len(e.encode())-len("body") {
			t.Fatalf("a cut entry of %d bytes decoded", n)
		}
	}
}
