package wasmhost

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/internal/actorstore"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/keeper"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// TestGuestAlarms: a Go guest sets, reads, lists and deletes its alarms,
// and handles them when they are delivered: in both isolations, a failed
// handler's alarm comes back with its retry counted, and one fired ends.
func TestGuestAlarms(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.String(), func(t *testing.T) {
			reg := probeRegistry(t, Config{Isolation: map[string]Isolation{"": iso}})
			ctx := context.Background()
			bucket := memstore.New(memstore.Faults{})
			h, err := actorhost.New(actorhost.Config{Keeper: anyKeeper{}, Bucket: bucket, Registry: reg, System: keeper.NewSystem(nil),
				AlarmRetry: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = h.HibernateAll(ctx) }()
			a := ownership.Actor{Class: "probe", Name: "a"}
			probeAlarm := func(query string) string {
				t.Helper()
				resp, err := h.Deliver(t.Context(), a, 1, get("/alarm", query))
				if err != nil || resp.Status != http.StatusOK {
					t.Fatalf("alarm ?%s: %v %v", query, resp, err)
				}
				return string(resp.Body)
			}
			past := time.Now().Add(-time.Second).UnixMilli()
			if got, want := probeAlarm(fmt.Sprintf("set=x&at=%d&get=x", past)), fmt.Sprintf("get x true %d\nalarm x %d 0\n", past, past); got != want {
				t.Fatalf("set: %q, want %q", got, want)
			}
			if got := probeAlarm("set=..&at=1"); !strings.HasPrefix(got, "set: guest: bad alarm name") {
				t.Fatalf("a bad name: %q", got)
			}
			// Deliver what the index holds, as a node's poller does.
			deliver := func() []actorhost.AlarmOutcome {
				t.Helper()
				page, err := bucket.List(t.Context(), actorstore.IndexPrefix, "", 0)
				if err != nil {
					t.Fatal(err)
				}
				var out []actorhost.AlarmOutcome
				for _, le := range page.Entries {
					e, err := actorstore.ParseIndexKey(le.Key)
					if err != nil {
						t.Fatal(err)
					}
					// An alarm set again after a failure is due AlarmRetry
					// (a millisecond) on the host's wall clock, which is
					// what DispatchAlarm reads: wait for it to pass.
					if d := time.Until(e.At); d > 0 {
						time.Sleep(d)
					}
					o, at, err := h.DispatchAlarm(t.Context(), e)
					if err != nil || at != nil {
						t.Fatalf("deliver %s: %v %v", le.Key, at, err)
					}
					out = append(out, o)
					if o != actorhost.AlarmNotDue {
						if err := bucket.Delete(t.Context(), le.Key, ownership.Always()); err != nil {
							t.Fatal(err)
						}
					}
				}
				return out
			}
			probeAlarm("fail=1")
			if o := deliver(); len(o) != 1 || o[0] != actorhost.AlarmRetried {
				t.Fatalf("a failed handler: %v, want retried", o)
			}
			if got := probeAlarm(""); !strings.HasPrefix(got, "alarm x ") || !strings.HasSuffix(got, " 1\n") {
				t.Fatalf("after a failure: %q, want x set again with retry 1", got)
			}
			if o := deliver(); len(o) != 1 || o[0] != actorhost.AlarmFired {
				t.Fatalf("the retry: %v, want fired", o)
			}
			if got := probeAlarm(""); got != "fired/x 1 retry=1\n" {
				t.Fatalf("after the retry: %q", got)
			}
			probeAlarm("set=y&at=1")
			probeAlarm("delete=y")
			if o := deliver(); len(o) != 1 || o[0] != actorhost.AlarmGone {
				t.Fatalf("a deleted alarm: %v, want gone", o)
			}
		})
	}
}
