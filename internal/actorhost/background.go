package actorhost

import (
	"context"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// background is work a resident actor runs in a goroutine of its own: a
// merge of its runs (compact.go), the deletes of its garbage (resident.go,
// collect). Its result comes back to the actor as a message, unless the
// actor is stopping: a message sent to an actor that stopped is a dead
// letter, so from actor.Stopping on the goroutine sends nothing, and the
// actor waits for it at actor.Stopped and takes its result itself.
type background[T any] struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine returns
	result T             // set before done is closed
	mu     sync.Mutex
	ended  bool // the actor is stopping: no message
}

// goBackground runs f in a goroutine, then sends the actor the message
// msg makes of the task, if the actor is not stopping.
func goBackground[T any](ctx actor.Context, root *actor.RootContext, f func(context.Context) T, msg func(*background[T]) any) *background[T] {
	cctx, cancel := context.WithCancel(context.Background())
	t := &background[T]{cancel: cancel, done: make(chan struct{})}
	self := ctx.Self()
	go func() {
		defer close(t.done)
		t.result = f(cctx)
		cancel()
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.ended {
			root.Send(self, msg(t))
		}
	}()
	return t
}

// stopping tells the goroutine that the actor stops: it sends nothing
// from now on. A message it sent before is not received either.
func (t *background[T]) stopping() {
	t.mu.Lock()
	t.ended = true
	t.mu.Unlock()
}

// wait waits for the goroutine to return and gives its result.
func (t *background[T]) wait() T {
	<-t.done
	return t.result
}
