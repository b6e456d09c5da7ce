package keeper_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/dirstore"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// The tests run in synctest bubbles: the keeper's clock, timers and bucket
// contexts follow the bubble's fake time, which moves only when every
// goroutine waits. synctest.Wait returns once the keeper, its bucket calls
// and its timer have nothing left to do now, so "afterwards" is an event,
// not a sleep.

// TestLifecycle follows one node: lease, grant, release on idle, park on
// idle with a socket, wake at the next generation, release of the parked
// record when its last socket goes, and a clean stop.
func TestLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		n1 := startNode(t, b, "n1", "n1-i1")

		l, _ := readLease(t, b, "n1")
		if l.State != ownership.LeaseLive || l.Instance != "n1-i1" || l.Addr != "n1.test:7000" {
			t.Fatalf("lease after start: %+v", l)
		}
		if st := n1.Status(); st.Phase != "running" || !st.LeaseValid {
			t.Fatalf("status after start: %+v", st)
		}

		// Grant at generation 1; release on idle with no socket.
		n1.mustGrant(t, roomA, 1)
		if rec, _ := readRecord(t, b, roomA); !rec.Held || rec.Generation != 1 || rec.Node != "n1" || rec.Instance != "n1-i1" {
			t.Fatalf("record of %s after the grant: %+v", roomA, rec)
		}
		if !n1.MayAct(roomA, 1) || n1.MayAct(roomA, 2) || n1.MayAct(roomB, 1) {
			t.Fatal("MayAct: want true for the live hold only")
		}
		n1.Idle(roomA, 1)
		synctest.Wait()
		if rec := wantFree(t, b, roomA); rec.Generation != 1 {
			t.Fatalf("a release changed the generation: %+v", rec)
		}
		if n1.MayAct(roomA, 1) {
			t.Fatal("MayAct after the release: want false")
		}

		// Park on idle with a socket; the next event wakes at generation 2.
		n1.mustGrant(t, roomB, 1)
		n1.SocketOpened(roomB)
		n1.Idle(roomB, 1)
		synctest.Wait()
		if st := n1.Status(); st.Parked != 1 || st.Live != 0 {
			t.Fatalf("status after parking: %+v", st)
		}
		if rec, _ := readRecord(t, b, roomB); !rec.Held || rec.Generation != 1 {
			t.Fatalf("a parked record must stay held: %+v", rec)
		}
		n1.mustGrant(t, roomB, 2)
		if st := n1.Status(); st.Parked != 0 || st.Live != 1 {
			t.Fatalf("status after the wake: %+v", st)
		}

		// Park again; the last socket going releases the parked record.
		n1.Idle(roomB, 2)
		synctest.Wait()
		if rec, _ := readRecord(t, b, roomB); !rec.Held || rec.Generation != 2 {
			t.Fatalf("parked again: %+v", rec)
		}
		n1.SocketGone(roomB)
		synctest.Wait()
		wantFree(t, b, roomB)

		// Metrics, with the release label split in two.
		for _, m := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"wasmkeep_releases_total", map[string]string{"reason": "idle", "outcome": "landed"}, 1},
			{"wasmkeep_releases_total", map[string]string{"reason": "last_socket", "outcome": "landed"}, 1},
			{"wasmkeep_parked_releases_total", map[string]string{"reason": "last_socket"}, 1},
			{"wasmkeep_acquisitions_total", map[string]string{"outcome": "created"}, 2},
			{"wasmkeep_acquisitions_total", map[string]string{"outcome": "taken"}, 1},
			{"wasmkeep_parked_wakes_total", nil, 1},
			{"wasmkeep_parks_total", nil, 2},
			{"wasmkeep_parked_records", nil, 0},
			{"wasmkeep_live_holds", nil, 0},
			{"wasmkeep_lease_lapses_total", nil, 0},
			{"wasmkeep_ownership_bucket_requests_total", map[string]string{"op": "put", "outcome": "refused"}, -1},
		} {
			if got := metricValue(t, n1.reg, m.name, m.labels); got != m.want {
				t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
			}
		}
		if got := metricValue(t, n1.reg, "wasmkeep_lease_renew_seconds", nil); got < 1 {
			t.Errorf("wasmkeep_lease_renew_seconds: %v observations, want at least the first lease write", got)
		}
		if !n1.logs.Has("INFO", "took its lease", "node=n1") {
			t.Errorf("no info line for the lease taken:\n%s", n1.logs)
		}

		n1.stop(t)
		if l, _ := readLease(t, b, "n1"); l.State != ownership.LeaseReleased {
			t.Fatalf("lease after stop: %+v", l)
		}
		for key, rec := range allRecords(t, b) {
			if rec.Held {
				t.Errorf("%s held after a clean stop: %+v", key, rec)
			}
		}
		if ex := n1.hooks.snapshot().exits; len(ex) != 1 || !ex[0].Clean {
			t.Errorf("exit hooks: %+v", ex)
		}
		// After the end: refusals that say "ask a peer", no acting, the
		// last status.
		if d := n1.acquire(t, roomA); d.Verdict != keeper.Refused || !d.Draining || !strings.Contains(d.Reason, "stopped") {
			t.Errorf("acquire after stop: %v", d)
		}
		if n1.MayAct(roomA, 2) {
			t.Error("MayAct after stop")
		}
		if st := n1.Status(); st.Phase != "exited" || st.LeaseValid {
			t.Errorf("status after stop: %+v", st)
		}
	})
}

// TestTwoNodes: an actor held by n1 is routed from n2; n1 stops cleanly,
// leaving its lease released and its records free; n2 then takes the actor
// at the next generation.
func TestTwoNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One bucket; each node checks its own calls (two cores may well
		// read and write one key at once).
		b := memstore.New(memstore.Faults{})
		sys := keeper.NewSystem(nil)
		shared := func(c *keeper.Config) { c.System = sys }
		n1 := startNode(t, newChecked(t, b), "n1", "n1-i1", shared)
		n2 := startNode(t, newChecked(t, b), "n2", "n2-i1", shared)
		synctest.Wait() // each has listed the other

		n1.mustGrant(t, roomA, 1)
		n1.mustGrant(t, roomB, 1)
		n1.SocketOpened(roomB)
		n1.Idle(roomB, 1) // parked
		synctest.Wait()

		for _, a := range []ownership.Actor{roomA, roomB} {
			d := n2.acquire(t, a)
			if d.Verdict != keeper.Routed || d.Node != "n1" || d.Addr != "n1.test:7000" {
				t.Fatalf("n2 acquire %s: %v, want routed to n1", a, d)
			}
		}

		n1.stop(t)
		if l, _ := readLease(t, b, "n1"); l.State != ownership.LeaseReleased || l.Instance != "n1-i1" {
			t.Fatalf("n1's lease after stop: %+v", l)
		}
		wantFree(t, b, roomA)
		wantFree(t, b, roomB)
		if got := n1.hooks.snapshot().closeSockets; len(got) != 1 || !got[0].All || got[0].Code != ownership.CloseServiceRestart {
			t.Errorf("n1's CloseSockets on stop: %+v", got)
		}

		n2.mustGrant(t, roomA, 2)
		n2.mustGrant(t, roomB, 2)
		n2.stop(t)
		wantFree(t, b, roomA)
	})
}

// TestFencedLeaseEndsKeeper: a fence written behind the node's back is
// found at its next renewal; the keeper drops everything without releasing,
// tells the node, and ends with an error naming the reason.
func TestFencedLeaseEndsKeeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		n1 := startNode(t, b, "n1", "n1-i1")
		n1.mustGrant(t, roomA, 1)
		n1.mustGrant(t, roomB, 1)
		n1.SocketOpened(roomB)
		n1.Idle(roomB, 1)
		synctest.Wait()

		l, etag := readLease(t, b, "n1")
		l.State, l.Seq, l.Nonce = ownership.LeaseFenced, l.Seq+1, "test-fence"
		if _, err := b.Put(context.Background(), ownership.NodeKey("n1"), ownership.EncodeLease(l), ownership.IfMatch(etag)); err != nil {
			t.Fatalf("write the fence: %v", err)
		}

		<-n1.Done() // the next renewal is refused; the re-read finds the fence
		var exit *keeper.ExitError
		if err := n1.Err(); !errors.As(err, &exit) || !strings.Contains(exit.Reason, "fenced") || exit.Panic != nil {
			t.Fatalf("Err = %v, want an ExitError naming the fence", n1.Err())
		}
		h := n1.hooks.snapshot()
		if len(h.closeSockets) != 1 || !h.closeSockets[0].All {
			t.Errorf("CloseSockets: %+v, want one for every socket", h.closeSockets)
		}
		if len(h.stopActing) != 1 || h.stopActing[0].Actor != roomA || h.stopActing[0].Gen != 1 {
			t.Errorf("StopActing: %+v, want one for %s at generation 1", h.stopActing, roomA)
		}
		if len(h.exits) != 1 || h.exits[0].Clean {
			t.Errorf("Exit: %+v, want one, not clean", h.exits)
		}
		if !n1.logs.Has("WARN", "lease lost", "fenced") {
			t.Errorf("no warning about the lost lease:\n%s", n1.logs)
		}
		// Nothing was released: the fence frees the records.
		for _, a := range []ownership.Actor{roomA, roomB} {
			if rec, _ := readRecord(t, b, a); !rec.Held || rec.Node != "n1" {
				t.Errorf("record of %s after the lost lease: %+v, want still naming n1", a, rec)
			}
		}
		if d := n1.acquire(t, roomC); d.Verdict != keeper.Refused || !strings.Contains(d.Reason, "fenced") {
			t.Errorf("acquire after the end: %v", d)
		}
		if err := n1.Stop(t.Context()); err == nil || err.Error() != n1.Err().Error() {
			t.Errorf("Stop after the end = %v, want Err", err)
		}
	})
}

// TestFaultyBucketEndsFree: over a bucket that loses requests and replies,
// lands writes late and answers 503, a node that acquires, parks, wakes
// and releases still ends a clean stop with every record free. Its bucket
// calls run concurrently, so a seed fixes the faults' odds, not the order
// in which they strike.
func TestFaultyBucketEndsFree(t *testing.T) {
	for _, seed := range []uint64{1, 2, 7, 9, 42, 49, 1234} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New(memstore.Faults{
					Seed: seed, LoseRequest: 0.05, LoseReply: 0.05, LandLate: 0.05,
					UnavailableApplied: 0.03, UnavailableNotApplied: 0.03,
				})
				b := newChecked(t, store)
				n1 := startNode(t, b, "n1", "n1-i1")
				rooms := []ownership.Actor{roomA, roomB, roomC, {Class: "room", Name: "d"}, {Class: "chat", Name: "e"}}
				sockets := map[ownership.Actor]int{}
				for round := range 3 {
					for i, a := range rooms {
						d := acquireRetrying(t, n1, a)
						if d.Verdict != keeper.Granted {
							continue
						}
						switch (i + round) % 3 {
						case 0:
							n1.Idle(a, d.Gen) // released, or parked if a socket is left
						case 1:
							n1.SocketOpened(a)
							sockets[a]++
							n1.Idle(a, d.Gen) // parked
						case 2:
							n1.HoldEnded(a, d.Gen, "test")
						}
						time.Sleep(300 * time.Millisecond)
					}
					if round == 1 {
						// Every socket goes: parked records are released.
						for _, a := range rooms {
							for ; sockets[a] > 0; sockets[a]-- {
								n1.SocketGone(a)
							}
						}
					}
				}
				// The stop runs with faults on, the lease record's included.
				n1.stop(t)
				store.Settle() // whatever was to land late lands now
				truth := faultless{store}
				if l, _ := readLease(t, truth, "n1"); l.State != ownership.LeaseReleased {
					t.Fatalf("lease after stop: %+v", l)
				}
				for key, rec := range allRecords(t, truth) {
					if rec.Held {
						t.Errorf("%s held after a clean stop: %+v\nlogs:\n%s", key, rec, n1.logs)
					}
				}
			})
		})
	}
}

// acquireRetrying acquires as a client would: after a refusal, it waits the
// Retry-After it was given and asks again, a few times.
func acquireRetrying(t *testing.T, n *node, a ownership.Actor) keeper.Decision {
	t.Helper()
	var d keeper.Decision
	for range 5 {
		d = n.acquire(t, a)
		if d.Verdict != keeper.Refused {
			return d
		}
		time.Sleep(d.RetryAfter)
	}
	return d
}

// TestKeysRunConcurrently: a bucket call that hangs on one key does not
// hold up calls on another.
func TestKeysRunConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		n1 := startNode(t, b, "n1", "n1-i1")
		entered, release := b.block(ownership.OwnerKey(roomA))
		defer release()

		slow := make(chan keeper.Decision, 1)
		go func() { slow <- n1.acquire(t, roomA) }()
		<-entered // the read of room a's record has started, and hangs

		// Time stands still while goroutines run: room b's acquisition,
		// read and write included, completes with room a's read unanswered.
		n1.mustGrant(t, roomB, 1)
		select {
		case d := <-slow:
			t.Fatalf("room a answered while its read hangs: %v", d)
		default:
		}

		release()
		if d := <-slow; d.Verdict != keeper.Granted || d.Gen != 1 {
			t.Fatalf("room a after the release: %v", d)
		}
		n1.stop(t)
	})
}

// TestStopNow: a release that never lands holds up a clean stop; the end of
// Stop's context sends StopNow, which writes the lease released anyway.
func TestStopNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		n1 := startNode(t, b, "n1", "n1-i1")
		n1.mustGrant(t, roomA, 1)
		_, release := b.block(ownership.OwnerKey(roomA))
		defer release()

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := n1.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop with a hanging release = %v, want the deadline", err)
		}
		<-n1.Done()
		if err := n1.Err(); err != nil {
			t.Fatalf("Err after StopNow = %v, want a clean stop", err)
		}
		if l, _ := readLease(t, b, "n1"); l.State != ownership.LeaseReleased {
			t.Fatalf("lease after StopNow: %+v", l)
		}
		// The release never landed: the record still names n1, whose
		// released lease lets any node take it.
		if rec, _ := readRecord(t, b.Bucket, roomA); !rec.Held {
			t.Fatalf("record of %s: %+v, want the unreleased hold", roomA, rec)
		}
		n2 := startNode(t, b, "n2", "n2-i1")
		synctest.Wait()
		release()
		n2.mustGrant(t, roomA, 2)
		n2.stop(t)
	})
}

// TestAbandonedGrant: a grant that arrives after its caller gave up goes to
// Hooks.Abandoned.
func TestAbandonedGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		n1 := startNode(t, b, "n1", "n1-i1")
		entered, release := b.block(ownership.OwnerKey(roomA))
		defer release()

		ctx, cancel := context.WithCancel(t.Context())
		res := make(chan error, 1)
		go func() {
			_, err := n1.Acquire(ctx, roomA)
			res <- err
		}()
		<-entered
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire after cancel = %v", err)
		}
		release()
		synctest.Wait()
		if got := n1.hooks.snapshot().abandoned; len(got) != 1 || got[0] != "room/a@1" {
			t.Fatalf("Abandoned: %v, want room/a@1", got)
		}
		// The hold is live; the node ends it as the hook says.
		n1.Idle(roomA, 1)
		n1.stop(t)
		wantFree(t, b, roomA)
	})
}

// TestPanicEndsKeeper: a panic while handling a message ends the keeper
// with the panic in Err; it releases nothing and stops renewing, so a new
// instance of the node takes the lease over once it has stood still for
// ttl + grace.
func TestPanicEndsKeeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		n1 := startNode(t, b, "n1", "n1-i1")
		n2 := startNode(t, newChecked(t, b.Bucket), "n2", "n2-i1") // the move's target: a live peer (its own check: the rule is per node)
		n1.mustGrant(t, roomA, 1)
		for !slices.ContainsFunc(n1.Status().Peers, func(p ownership.PeerStatus) bool { return p.Node == "n2" && p.Live }) {
			time.Sleep(100 * time.Millisecond)
		}
		n1.hooks.mu.Lock()
		n1.hooks.panicOn = "StopActing"
		n1.hooks.mu.Unlock()
		n1.Move(roomA, "n2") // the move stops acting first: the hook panics

		<-n1.Done()
		// n2 stops too: the lease writes counted below are n1's own, not a
		// peer's fence of the instance that broke.
		if err := n2.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		var exit *keeper.ExitError
		if !errors.As(n1.Err(), &exit) || exit.Panic == nil || len(exit.Stack) == 0 ||
			!strings.Contains(exit.Reason, "test hook StopActing panics") {
			t.Fatalf("Err = %#v, want an ExitError with the panic", n1.Err())
		}
		if !n1.logs.Has("ERROR", "keeper broke", "stack=") {
			t.Errorf("no error line with the stack:\n%s", n1.logs)
		}
		h := n1.hooks.snapshot()
		if len(h.exits) != 1 || h.exits[0].Clean || len(h.closeSockets) != 1 || !h.closeSockets[0].All {
			t.Errorf("hooks after the panic: exits %+v, closes %+v", h.exits, h.closeSockets)
		}
		if n1.MayAct(roomA, 1) {
			t.Error("MayAct after the panic")
		}
		leasePuts := b.putCount(ownership.NodeKey("n1"))
		if rec, _ := readRecord(t, b, roomA); !rec.Held {
			t.Errorf("the record was released after the panic: %+v", rec)
		}

		// A new instance watches the stale lease, then takes it over.
		n1b := startNode(t, b, "n1", "n1-i2")
		if !n1b.logs.Has("WARN", "held by instance n1-i1", "watching it") {
			t.Errorf("the new instance took the lease without watching it:\n%s", n1b.logs)
		}
		if got := b.putCount(ownership.NodeKey("n1")); got != leasePuts+1 {
			t.Errorf("lease writes after the panic: %d, want only the new instance's", got-leasePuts)
		}
		// The old instance's record is free to take for the new one.
		n1b.mustGrant(t, roomA, 2)
		n1b.stop(t)
	})
}

// TestTwinAtStart: a second instance of a node that is still renewing its
// lease refuses to start.
func TestTwinAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memstore.New(memstore.Faults{})
		n1 := startNode(t, newChecked(t, b), "n1", "n1-i1")
		twin, err := tryStart(t, newChecked(t, b), "n1", "n1-i2")
		var exit *keeper.ExitError
		if !errors.As(err, &exit) || !strings.Contains(exit.Reason, "live under instance n1-i1") {
			t.Fatalf("twin start = %v, want an ExitError naming the live instance", err)
		}
		if !twin.logs.Has("WARN", "watching it") {
			t.Errorf("no warning about the watch:\n%s", twin.logs)
		}
		n1.stop(t)
	})
}

// TestStartCancelled: Start gives up with its context, and stops what it
// started.
func TestStartCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memstore.New(memstore.Faults{})
		n1 := startNode(t, newChecked(t, b), "n1", "n1-i1")
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		_, err := keeper.Start(ctx, keeper.Config{Core: coreConfig("n1", "n1-i2"), Bucket: newChecked(t, b)}, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Start = %v, want the deadline", err)
		}
		n1.stop(t)
	})
}

// TestConfig: Start refuses what cannot run.
func TestConfig(t *testing.T) {
	bad := coreConfig("n1", "")
	for _, cfg := range []keeper.Config{
		{Core: coreConfig("n1", "i1")},
		{Core: bad, Bucket: memstore.New(memstore.Faults{})},
	} {
		if _, err := keeper.Start(t.Context(), cfg, nil); err == nil {
			t.Errorf("Start(%+v) succeeded", cfg.Core)
		}
	}
}

// TestDirectoryStore runs a node over the embedded directory store, and a
// second instance after a clean stop, which takes the released lease at
// once.
func TestDirectoryStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := dirstore.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		b := newChecked(t, store)
		n1 := startNode(t, b, "n1", "n1-i1")
		n1.mustGrant(t, roomA, 1)
		n1.mustGrant(t, roomB, 1)
		n1.SocketOpened(roomB)
		n1.Idle(roomA, 1)
		n1.Idle(roomB, 1)
		synctest.Wait()
		wantFree(t, b, roomA)
		n1.mustGrant(t, roomB, 2)
		n1.stop(t)
		wantFree(t, b, roomB)

		again := startNode(t, b, "n1", "n1-i2")
		if again.logs.Has("watching it") {
			t.Errorf("a released lease was watched before it was taken:\n%s", again.logs)
		}
		again.mustGrant(t, roomA, 2)
		again.stop(t)
		wantFree(t, b, roomA)
	})
}

// TestFromAnActor: code running in an actor asks without waiting, and gets
// its answers as messages.
func TestFromAnActor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		sys := keeper.NewSystem(nil)
		n1 := startNode(t, b, "n1", "n1-i1", func(c *keeper.Config) { c.System = sys })
		got := make(chan any, 4)
		pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			switch m := c.Message().(type) {
			case *keeper.AcquireAnswer, *keeper.MayActAnswer:
				got <- m
			}
		}))
		defer sys.Root.Stop(pid)

		if err := n1.RequestAcquire(roomA, pid, 7); err != nil {
			t.Fatal(err)
		}
		a := (<-got).(*keeper.AcquireAnswer)
		if a.Actor != roomA || a.Tag != 7 || a.Decision.Verdict != keeper.Granted || a.Decision.Gen != 1 {
			t.Fatalf("answer: %+v", a)
		}
		n1.RequestMayAct(roomA, 1, pid, 8)
		if m := (<-got).(*keeper.MayActAnswer); !m.May || m.Tag != 8 {
			t.Fatalf("may act: %+v", m)
		}
		if err := n1.RequestAcquire(ownership.Actor{Class: "room"}, pid, 9); !errors.Is(err, keeper.ErrInvalidActor) {
			t.Fatalf("RequestAcquire of an actor without a name = %v", err)
		}
		n1.stop(t)

		// After the end the answers still come, from the keeper's methods.
		n1.RequestMayAct(roomA, 1, pid, 10)
		if m := (<-got).(*keeper.MayActAnswer); m.May || m.Tag != 10 {
			t.Fatalf("may act after stop: %+v", m)
		}
		if err := n1.RequestAcquire(roomB, pid, 11); err != nil {
			t.Fatal(err)
		}
		if a := (<-got).(*keeper.AcquireAnswer); a.Decision.Verdict != keeper.Refused || a.Tag != 11 {
			t.Fatalf("answer after stop: %+v", a)
		}
	})
}

// TestStopAfterLostReplyOfFinalWrite: the reply to the write of the lease
// as released is lost although the write landed; the Core writes it again
// and is refused (the version changed), so it re-reads its lease, and that
// read goes unanswered too. The stop still ends once a read answers: the
// re-read is retried before anything else, and finds the lease released by
// this very instance. Found by TestFaultyBucketEndsFree.
func TestStopAfterLostReplyOfFinalWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		lostPut, lostGet := false, false
		b.loseReply = func(key string, body []byte) bool {
			if key == ownership.NodeKey("n1") && strings.Contains(string(body), " released ") && !lostPut {
				lostPut = true
				return true
			}
			return false
		}
		b.failGet = func(key string) bool {
			if key == ownership.NodeKey("n1") && lostPut && !lostGet {
				lostGet = true
				return true
			}
			return false
		}
		n1 := startNode(t, b, "n1", "n1-i1")
		n1.mustGrant(t, roomA, 1)
		n1.stop(t)
		if l, _ := readLease(t, b, "n1"); l.State != ownership.LeaseReleased {
			t.Fatalf("lease after stop: %+v", l)
		}
		wantFree(t, b, roomA)
	})
}

// TestSlowClock: a keeper whose clock runs behind the runtime's timers (its
// ticks fire early on its own clock) still renews its lease on time.
func TestSlowClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		base := time.Now()
		slow := func() time.Time { return base.Add(time.Since(base) * 9 / 10) }
		n1 := startNode(t, b, "n1", "n1-i1", func(c *keeper.Config) { c.Clock = slow })
		before, _ := readLease(t, b, "n1")
		time.Sleep(time.Minute)
		after, _ := readLease(t, b, "n1")
		// 54 s on the keeper's clock: a renewal every 2.5 s.
		if renewals := after.Seq - before.Seq; renewals < 20 {
			t.Errorf("%d renewals in a minute of a slow clock, want about 21", renewals)
		}
		if st := n1.Status(); !st.LeaseValid || n1.logs.Has("lapsed") {
			t.Errorf("the lease lapsed: %+v\n%s", st, n1.logs)
		}
		n1.stop(t)
	})
}

// TestStoppedFromOutside: an actor stopped by someone else (Stop drops its
// queued messages) ends the keeper with an error, and the node is told to
// stop everything.
func TestStoppedFromOutside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		sys := keeper.NewSystem(nil)
		n1 := startNode(t, b, "n1", "n1-i1", func(c *keeper.Config) { c.System = sys })
		n1.mustGrant(t, roomA, 1)
		sys.Root.Stop(sys.NewLocalPID("ownership-n1"))
		<-n1.Done()
		var exit *keeper.ExitError
		if !errors.As(n1.Err(), &exit) || !strings.Contains(exit.Reason, "stopped from outside") {
			t.Fatalf("Err = %v", n1.Err())
		}
		h := n1.hooks.snapshot()
		if len(h.exits) != 1 || h.exits[0].Clean || len(h.closeSockets) != 1 || !h.closeSockets[0].All {
			t.Errorf("hooks: exits %+v, closes %+v", h.exits, h.closeSockets)
		}
		if d := n1.acquire(t, roomA); d.Verdict != keeper.Refused {
			t.Errorf("acquire after the end: %v", d)
		}
		if rec, _ := readRecord(t, b, roomA); !rec.Held {
			t.Errorf("record released by a keeper stopped from outside: %+v", rec)
		}
	})
}

// TestFastAnswersFollowInputs: acquisitions and MayAct for live holds are
// answered without the mailbox, yet an input posted before them (Idle,
// HoldEnded, Drain) is always taken into account first, as through the
// mailbox: none of them gets the old hold's answer.
func TestFastAnswersFollowInputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Faults{})
		b := newChecked(t, store) // n1's calls; n2 (below) calls the store itself
		n := startNode(t, b, "n1", "n1-i1")
		n.mustGrant(t, roomA, 1)
		n.mustGrant(t, roomA, 1) // the fast path: nothing new in the bucket
		if got := b.putCount(ownership.OwnerKey(roomA)); got != 1 {
			t.Fatalf("%d record writes for two grants of one hold; want 1", got)
		}
		if !n.MayAct(roomA, 1) || n.MayAct(roomA, 2) {
			t.Fatal("MayAct: want true for the live hold's generation only")
		}
		// Idle, then at once another event: it must not run under the
		// hold that Idle ended (released here, as no socket is open).
		n.Idle(roomA, 1)
		if n.MayAct(roomA, 1) {
			t.Fatal("MayAct of a hold said idle: want false")
		}
		n.mustGrant(t, roomA, 2)

		n.mustGrant(t, roomB, 1)
		n.HoldEnded(roomB, 1, "test")
		n.mustGrant(t, roomB, 2)

		// A drain hands actors over only to a live peer (alone, it is stuck
		// and serves): n2 starts, and n1 lists it.
		n2 := startNode(t, store, "n2", "n2-i1")
		time.Sleep(2 * ownership.DefaultConfig("n1", "x").LeasePeriod)
		synctest.Wait()
		n.mustGrant(t, roomC, 1)
		n.Drain()
		if d := n.acquire(t, roomC); d.Verdict == keeper.Granted {
			t.Fatalf("acquire right after Drain: %v; want no grant on a draining node", d)
		}
		synctest.Wait()
		n.stop(t)
		n2.stop(t)
	})
}

// TestPredecessorGone: an instance whose shell has proved that every earlier
// process of its node has ended takes the lease they left live at once,
// without the watch of TestPanicEndsKeeper, and serves what they held.
func TestPredecessorGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		n1 := startNode(t, b, "n1", "n1-i1")
		n2 := startNode(t, newChecked(t, b.Bucket), "n2", "n2-i1")
		n1.mustGrant(t, roomA, 1)
		for !slices.ContainsFunc(n1.Status().Peers, func(p ownership.PeerStatus) bool { return p.Node == "n2" && p.Live }) {
			time.Sleep(100 * time.Millisecond)
		}
		n1.hooks.mu.Lock()
		n1.hooks.panicOn = "StopActing" // the move below breaks the keeper: its lease stays live
		n1.hooks.mu.Unlock()
		n1.Move(roomA, "n2")
		<-n1.Done()
		if err := n2.Stop(t.Context()); err != nil { // so that no peer fences n1-i1
			t.Fatal(err)
		}
		if l, _ := readLease(t, b, "n1"); l.State != ownership.LeaseLive || l.Instance != "n1-i1" {
			t.Fatalf("lease after the break: %+v, want n1-i1's, live", l)
		}

		start := time.Now()
		n1b := startNode(t, b, "n1", "n1-i2", func(c *keeper.Config) { c.Core.PredecessorGone = true })
		if took := time.Since(start); took >= time.Second {
			t.Errorf("the new instance took %v to start, want no watch of the lease", took)
		}
		if !n1b.logs.Has("INFO", "names instance n1-i1, which has ended", "taking the lease at once") {
			t.Errorf("no line naming the ended instance:\n%s", n1b.logs)
		}
		if n1b.logs.Has("watching it") {
			t.Errorf("the new instance watched the lease:\n%s", n1b.logs)
		}
		n1b.mustGrant(t, roomA, 2)
		n1b.stop(t)
	})
}

// TestNewWaitsForBegin: a keeper New made reads and writes nothing and
// calls no hook until Begin, which takes the lease as Start does; one
// stopped before Begin ends at once, cleanly, without a write.
func TestNewWaitsForBegin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newChecked(t, memstore.New(memstore.Faults{}))
		hooks := &recorder{}
		k, err := keeper.New(keeper.Config{Core: coreConfig("n1", "n1-i1"), Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		if got := b.putCount(ownership.NodeKey("n1")); got != 0 {
			t.Fatalf("%d lease writes before Begin, want none", got)
		}
		if h := hooks.snapshot(); len(h.leases) != 0 || len(h.exits) != 0 {
			t.Fatalf("hooks called before Begin: %d lease changes, %d exits", len(h.leases), len(h.exits))
		}
		if err := k.Begin(t.Context(), hooks); err != nil {
			t.Fatal(err)
		}
		if l, _ := readLease(t, b, "n1"); l.Instance != "n1-i1" || l.State != ownership.LeaseLive {
			t.Fatalf("lease after Begin: %+v", l)
		}
		if err := k.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}

		idle, err := keeper.New(keeper.Config{Core: coreConfig("n2", "n2-i1"), Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		if err := idle.Stop(t.Context()); err != nil {
			t.Fatalf("stop before Begin: %v", err)
		}
		if got := b.putCount(ownership.NodeKey("n2")); got != 0 {
			t.Errorf("%d lease writes by a keeper stopped before Begin", got)
		}
	})
}
