package node

import (
	"context"
	"time"
)

// repeater runs a pass on a goroutine of its own, the first after first,
// each other as long after the one before ended as that one said (a slow
// bucket spaces the passes out rather than piling them up), until stop.
type repeater struct {
	cancelFn func()
	done     chan struct{}
}

func startRepeater(first time.Duration, pass func(context.Context) (next time.Duration)) *repeater {
	ctx, cancel := context.WithCancel(context.Background())
	r := &repeater{cancelFn: cancel, done: make(chan struct{})}
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
			t.Reset(pass(ctx))
		}
	}()
	return r
}

// periodic makes a pass of a repeater that runs period after the one
// before.
func periodic(period time.Duration, pass func(context.Context)) func(context.Context) time.Duration {
	return func(ctx context.Context) time.Duration {
		pass(ctx)
		return period
	}
}

// cancel ends the passes without waiting: the one under way is cut short
// by its context.
func (r *repeater) cancel() { r.cancelFn() }

// stop ends the passes, the one under way cut short by its context, and
// waits for it.
func (r *repeater) stop() {
	r.cancelFn()
	<-r.done
}
