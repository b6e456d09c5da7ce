package node

import (
	"context"
	"time"
)

// repeater runs a pass on a goroutine of its own: the first after first,
// each other every period after the one before ended (a slow bucket
// spaces the passes out rather than piling them up), until stop.
type repeater struct {
	cancel func()
	done   chan struct{}
}

func startRepeater(first, every time.Duration, pass func(context.Context)) *repeater {
	ctx, cancel := context.WithCancel(context.Background())
	r := &repeater{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTimer(first)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pass(ctx)
			t.Reset(every)
		}
	}()
	return r
}

// stop ends the passes, the one under way cut short by its context, and
// waits for it.
func (r *repeater) stop() {
	r.cancel()
	<-r.done
}
