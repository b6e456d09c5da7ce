package actorhost

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
		tx := newEventTxn(t.Context(), st, DefaultMaxState)
		e := ledgerEntry{status: http.StatusOK, body: []byte(name)}
		if err := tx.ledgerRecord(ledgerKey{name: "c/" + name, keep: keep}, &e, now, 100, false); err != nil {
			t.Fatal(err)
		}
		st.apply(tx, 1)
	}
	kept := func(name string) bool {
		_, ok, err := newEventTxn(t.Context(), st, DefaultMaxState).ledgerLookup(ledgerKey{name: "c/" + name, keep: time.Hour})
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
	if n := newEventTxn(t.Context(), st, DefaultMaxState).keyCount(); n != 2 {
		t.Fatalf("count %d, want 2", n)
	}
	// What the ledger keeps is under the node's prefix: the class sees none.
	if es, _ := newEventTxn(t.Context(), st, DefaultMaxState).List(actors.ListOptions{}); len(es) != 0 {
		t.Fatalf("the class sees %d entries", len(es))
	}
}

// TestLedgerEntryRoundTrip: an entry decodes as it was encoded.
func TestLedgerEntryRoundTrip(t *testing.T) {
	e := ledgerEntry{partial: true, expires: 42, status: 201, header: http.Header{"A": {"1", ""}, "B": {"x"}}, parts: 3, body: []byte("body")}
	e.sum[3] = 9
	got, err := decodeEntry(e.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !got.partial || got.expires != 42 || got.status != 201 || got.parts != 3 || string(got.body) != "body" || got.sum != e.sum ||
		len(got.header) != 2 || got.header["A"][1] != "" || got.header["B"][0] != "x" {
		t.Fatalf("round trip: %+v", got)
	}
	for n := range len(e.encode()) {
		if _, err := decodeEntry(e.encode()[:n]); err == nil && n < len(e.encode())-len("body") {
			t.Fatalf("a cut entry of %d bytes decoded", n)
		}
	}
}
