package keeper_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/damagetest"
	"github.com/wasmkeep/wasmkeep/internal/testlog"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// TestDamagedStateInDirectoryStore: a byte of an actor's state object flips
// in the segment of the running directory store. Every acquisition of that
// actor is refused as damaged, naming the key; the damage is logged at
// Error once, with the key, however many requests meet it, and counted in
// wasmkeep_bucket_damaged_total{what="state"} for each; other actors are
// served as before, and the node stops cleanly.
func TestDamagedStateInDirectoryStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		store, err := dirstore.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		n1 := startNode(t, newChecked(t, store), "n1", "n1-i1")
		n1.mustGrant(t, roomA, 1)
		key := ownership.StateKey(roomA)
		state := ownership.EncodeState(ownership.StateHeader{Gen: 1, Seq: 1}, []byte("count=7"))
		if _, err := store.Put(context.Background(), key, state, ownership.IfAbsent()); err != nil {
			t.Fatal(err)
		}
		n1.Idle(roomA, 1)
		synctest.Wait()
		damagetest.FlipAfterKey(t, dir, key)

		damaged := map[string]string{"what": "state"}
		for i := range 3 {
			d := n1.acquire(t, roomA)
			if d.Verdict != keeper.Refused || d.Damaged != key || !strings.Contains(d.Reason, key) {
				t.Fatalf("acquisition %d of an actor with damaged state: %v, want a refusal for damage naming %s", i, d, key)
			}
			if got := metricValue(t, n1.reg, "wasmkeep_bucket_damaged_total", damaged); got != float64(i+1) {
				t.Fatalf("after %d acquisitions: wasmkeep_bucket_damaged_total{what=state} = %v, want %d", i+1, got, i+1)
			}
		}
		if got := n1.logs.Count("ERROR", "damaged actor state", "key="+key, "record checksum mismatch"); got != 1 {
			t.Fatalf("%d error lines about %s, want one:\n%s", got, key, n1.logs)
		}
		n1.mustGrant(t, roomB, 1)
		n1.stop(t)
	})
}

// TestTruncatedBucketEndsKeeper: the segment of the running directory
// store is cut short. The store logs it with the segment's path, and the
// keeper's next bucket call (a lease renewal) ends the node as a lost lease
// does: every socket closes, the live hold stops acting, nothing is
// released, and Err says the bucket is damaged (the node exits 1).
func TestTruncatedBucketEndsKeeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		storeLogs := &testlog.Log{}
		store, err := dirstore.OpenWith(dir, dirstore.Options{Logger: slog.New(storeLogs)})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		n1 := startNode(t, newChecked(t, store), "n1", "n1-i1")
		n1.mustGrant(t, roomA, 1)
		synctest.Wait()
		seg := damagetest.Segment(t, dir)
		fi, err := os.Stat(seg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(seg, fi.Size()-3); err != nil {
			t.Fatal(err)
		}

		select {
		case <-n1.Done():
		case <-time.After(time.Minute):
			t.Fatalf("the keeper still runs a minute after its bucket was cut short:\n%s", n1.logs)
		}
		var exit *keeper.ExitError
		if err := n1.Err(); !errors.As(err, &exit) || !strings.Contains(exit.Reason, "bucket is damaged") || !strings.Contains(exit.Reason, seg) {
			t.Fatalf("Err = %v, want an ExitError naming the damage and %s", n1.Err(), seg)
		}
		h := n1.hooks.snapshot()
		if len(h.stopActing) != 1 || h.stopActing[0].Actor != roomA || h.stopActing[0].Reason != "bucket damaged" {
			t.Errorf("StopActing: %+v, want one for %s", h.stopActing, roomA)
		}
		if len(h.closeSockets) != 1 || !h.closeSockets[0].All {
			t.Errorf("CloseSockets: %+v, want one for every socket", h.closeSockets)
		}
		if len(h.exits) != 1 || h.exits[0].Clean {
			t.Errorf("Exit: %+v, want one, not clean", h.exits)
		}
		if got := storeLogs.Count("ERROR", "segment="+seg, "shrank"); got != 1 {
			t.Errorf("%d store log lines naming %s, want one:\n%s", got, seg, storeLogs)
		}
		if !n1.logs.Has("ERROR", "bucket is damaged") {
			t.Errorf("the keeper did not log the damage:\n%s", n1.logs)
		}
		if got := metricValue(t, n1.reg, "wasmkeep_bucket_damaged_total", map[string]string{"what": "bucket"}); got != 1 {
			t.Errorf("wasmkeep_bucket_damaged_total{what=bucket} = %v, want 1", got)
		}
	})
}

// TestDamageFound: what a reader outside the keeper found damaged (an
// actor loading its state) is counted for every report and logged at
// Error once per key; the keeper serves on.
func TestDamageFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n1 := startNode(t, newChecked(t, memstore.New(memstore.Faults{})), "n1", "n1-i1")
		key := ownership.StateKey(roomA)
		for range 3 {
			n1.DamageFound(key, errors.New("decode actor state: damaged object: truncated key at byte 3"))
		}
		synctest.Wait()
		if got := metricValue(t, n1.reg, "wasmkeep_bucket_damaged_total", map[string]string{"what": "state"}); got != 3 {
			t.Fatalf("wasmkeep_bucket_damaged_total{what=state} = %v, want 3", got)
		}
		if got := n1.logs.Count("ERROR", "damaged actor state", "key="+key, "truncated key"); got != 1 {
			t.Fatalf("%d error lines about %s, want one:\n%s", got, key, n1.logs)
		}
		n1.mustGrant(t, roomB, 1)
		n1.stop(t)
	})
}
