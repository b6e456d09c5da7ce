package ingress_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/ingress"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// TestHibernationReleasesRecord: an actor idle for the idle timeout
// hibernates, and the keeper releases its record in the bucket. The
// keeper, the resident actors and the bucket run in a synctest bubble, on
// its fake clock; requests go straight to the handler.
func TestHibernationReleasesRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memstore.New(memstore.Faults{})
		system := keeper.NewSystem(nil)
		k, err := keeper.Start(t.Context(), keeper.Config{
			Core: ownership.DefaultConfig("n1", "i1"), Bucket: b, System: system,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		host, err := actorhost.New(actorhost.Config{
			Keeper: k, Bucket: b, Registry: actors.BuiltIn(), System: system, IdleTimeout: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		h, err := ingress.New(ingress.Config{Node: "n1", Keeper: k, Host: host, Registry: actors.BuiltIn(), Peers: peersOf(t, k)})
		if err != nil {
			t.Fatal(err)
		}
		record := func() ownership.Record {
			t.Helper()
			obj, err := b.Get(context.Background(), ownership.OwnerKey(counterA))
			if err != nil {
				t.Fatal(err)
			}
			r, err := ownership.DecodeRecord(obj.Body)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		count := func(want string) {
			t.Helper()
			w := serve(h, "GET", "/actor/counter/a", "", nil)
			if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != want {
				t.Fatalf("count: %d %q, want %q", w.Code, w.Body, want)
			}
		}

		if w := serve(h, "GET", "/readyz", "", nil); w.Code != http.StatusOK {
			t.Fatalf("/readyz: %d", w.Code)
		}
		count("1")
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if r := record(); !r.Held || host.Resident() != 1 {
			t.Fatalf("before the idle timeout: record %+v, resident %d", r, host.Resident())
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if r := record(); r.Held || r.Generation != 1 || host.Resident() != 0 {
			t.Fatalf("after the idle timeout: record %+v, resident %d; want free at generation 1, none resident", r, host.Resident())
		}
		count("2") // wakes at a new generation, from the bucket
		if r := record(); !r.Held || r.Generation != 2 {
			t.Fatalf("after waking: %+v", r)
		}

		if err := host.HibernateAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := k.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := record(); r.Held {
			t.Fatalf("after stop: %+v", r)
		}
	})
}
