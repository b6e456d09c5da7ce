package ownership_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/ownership"
)

// damageCounts returns the adds of MetricDamaged in effects, by label.
func damageCounts(effects []ownership.Effect) map[string]int {
	n := map[string]int{}
	for _, e := range effects {
		if c, ok := e.(ownership.Count); ok && c.Name == ownership.MetricDamaged {
			n[c.Label] += int(c.Add)
		}
	}
	return n
}

// errorReports returns the error-level reports about key in effects.
func errorReports(effects []ownership.Effect, key string) []ownership.Report {
	var out []ownership.Report
	for _, e := range effects {
		if r, ok := e.(ownership.Report); ok && r.Key == key && r.Level == "error" {
			out = append(out, r)
		}
	}
	return out
}

// TestDamagedObjectRefusesItsActor: the bucket answers that the actor's
// state object, or its ownership record, is damaged. Each acquisition is
// refused as damaged, naming the key (an error, with no Retry-After), and
// counted; the damage is reported at error level once per key however many
// acquisitions meet it; nothing is written (the record stays free at its
// generation); and another actor is granted as before.
func TestDamagedObjectRefusesItsActor(t *testing.T) {
	for _, c := range []struct {
		name, what string
		key        func(ownership.Actor) string
	}{
		{"state", "state", ownership.StateKey},
		{"record", "record", ownership.OwnerKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			a := ownership.Actor{Class: "room", Name: "damaged"}
			h.existed(a)
			key := c.key(a)
			h.faults = map[string]ownership.Outcome{key: ownership.Damaged}
			h.effects = nil
			var all []ownership.Effect
			for i := range 3 {
				r, ok := h.acquire(a).(ownership.Refuse)
				if !ok || r.Damaged != key || r.RetryAfter != 0 || !strings.Contains(r.Reason, key) || !strings.Contains(r.Reason, "damaged") {
					t.Fatalf("acquisition %d over a damaged %s: %#v, want a refusal for damage naming %s", i, c.name, r, key)
				}
				all = append(all, h.effects...)
			}
			if got := damageCounts(all); got[c.what] != 3 || len(got) != 1 {
				t.Fatalf("damage counted %v, want %s three times", got, c.what)
			}
			if got := errorReports(all, key); len(got) != 1 || got[0].Err == nil {
				t.Fatalf("error reports about %s: %+v, want one, with the store's error", key, got)
			}
			delete(h.faults, key)
			if rec := h.record(a); rec.Held || rec.Generation != 1 {
				t.Fatalf("record after refusals for damage: %+v, want free at generation 1", rec)
			}
			mustGrant(t, h.acquire(room), 1)
		})
	}
}

// TestDamageFoundIsCountedAndReportedOnce: what a reader outside the core
// found damaged is counted each time and reported once per key, with the
// damage the core's own reads find.
func TestDamageFoundIsCountedAndReportedOnce(t *testing.T) {
	h := newHarness(t)
	key := ownership.StateKey(room)
	h.effects = nil
	for range 2 {
		h.step(ownership.DamageFound{Key: key, Err: errors.New("checksum mismatch")})
	}
	if got := damageCounts(h.effects); got["state"] != 2 {
		t.Fatalf("damage counted %v, want state twice", got)
	}
	if got := errorReports(h.effects, key); len(got) != 1 {
		t.Fatalf("error reports: %+v, want one", got)
	}
	mustGrant(t, h.acquire(room), 1) // the core serves on: damage is the object's
}

// TestBucketDamagedEndsTheNode: a store that answers that it is damaged as
// a whole (here, to the lease renewal) ends the node as a lost lease does:
// every socket closes, the live hold stops acting, nothing is written (the
// record stays held; peers fence the node to free it), the core exits not
// cleanly, naming the damage, and refuses what comes after.
func TestBucketDamagedEndsTheNode(t *testing.T) {
	h := newHarness(t)
	mustGrant(t, h.acquire(room), 1)
	h.faults = map[string]ownership.Outcome{ownership.NodeKey("n1"): ownership.BucketDamaged}
	h.effects = nil
	h.advance(3 * time.Second) // past the next renewal
	var exit *ownership.Exit
	for _, e := range h.effects {
		if x, ok := e.(ownership.Exit); ok {
			exit = &x
		}
	}
	if exit == nil || exit.Clean || !strings.Contains(exit.Reason, "bucket is damaged") {
		t.Fatalf("exit %+v, want one that is not clean and names the damage", exit)
	}
	if !h.saw(ownership.StopActing{Actor: room, Gen: 1, Reason: "bucket damaged"}) {
		t.Fatal("the live hold did not stop acting")
	}
	if !h.saw(ownership.CloseSockets{All: true, Code: ownership.CloseServiceRestart, Reason: "bucket damaged"}) {
		t.Fatal("the sockets were not closed")
	}
	if got := damageCounts(h.effects); got["bucket"] != 1 {
		t.Fatalf("damage counted %v, want bucket once", got)
	}
	for _, e := range h.effects {
		if r, ok := e.(ownership.Request); ok && r.Op != ownership.OpGet && r.Key == ownership.OwnerKey(room) {
			t.Fatalf("the core wrote %v after the bucket was found damaged", r)
		}
	}
	if rec := h.record(room); !rec.Held || rec.Generation != 1 {
		t.Fatalf("record %+v, want it left held at generation 1", rec)
	}
	if r, ok := h.acquire(room).(ownership.Refuse); !ok || !r.Draining {
		t.Fatalf("acquisition after the end: %#v, want a refusal", r)
	}
}
