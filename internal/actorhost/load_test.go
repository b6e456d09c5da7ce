package actorhost_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmkeep/wasmkeep/actors"
	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// heldGets is a bucket whose reads of state objects wait until release
// is closed (or their context ends), telling entered as each begins.
type heldGets struct {
	ownership.Bucket
	entered chan string
	release chan struct{}
}

func (b *heldGets) Get(ctx context.Context, key string) (ownership.Object, error) {
	select {
	case b.entered <- key:
	default:
	}
	select {
	case <-b.release:
	case <-ctx.Done():
		return ownership.Object{}, ctx.Err()
	}
	return b.Bucket.Get(ctx, key)
}

// TestLoadDoesNotHoldTheActor: the read of an actor's state runs beside
// its Receive, so a stop that comes while the bucket is slow stops the
// actor at once; the event that waited for the read is refused before it
// ran (delivered again elsewhere), and the read is cut short. The events
// that arrive during a read run after it, in order.
func TestLoadDoesNotHoldTheActor(t *testing.T) {
	b := &heldGets{Bucket: memstore.New(memstore.Faults{}), entered: make(chan string, 1), release: make(chan struct{})}
	h := hostOf(t, actorhost.Config{Bucket: b, Registry: actors.BuiltIn()})

	done := make(chan error, 1)
	go func() {
		_, err := h.Deliver(t.Context(), room, 1, get(""))
		done <- err
	}()
	<-b.entered // the state's read began, and waits on the bucket
	h.StopActing(room, 1)
	select {
	case err := <-done:
		var ua *actorhost.UnavailableError
		if !errors.As(err, &ua) || !ua.NotRun {
			t.Fatalf("the event that waited for the read: %v, want a refusal before it ran", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stop waited for the bucket's read")
	}

	// Events that come while a read waits (or as it ends) run once it
	// is done, each once: none lost, none run twice.
	b2 := &heldGets{Bucket: b.Bucket, entered: make(chan string, 1), release: make(chan struct{})}
	h2 := hostOf(t, actorhost.Config{Bucket: b2, Registry: actors.BuiltIn()})
	results := make(chan string, 3)
	for range 3 {
		go func() {
			resp, err := h2.Deliver(t.Context(), room, 2, get(""))
			switch {
			case err != nil:
				results <- err.Error()
			default:
				results <- strings.TrimSpace(string(resp.Body))
			}
		}()
	}
	<-b2.entered // the first event's read waits; the others come during it or after
	close(b2.release)
	got := map[string]bool{}
	for range 3 {
		got[<-results] = true
	}
	if !got["1"] || !got["2"] || !got["3"] {
		t.Fatalf("the events that waited for the read: %v, want the counts 1, 2 and 3", got)
	}
}
