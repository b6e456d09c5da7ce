package supervisors_test

import (
	"runtime"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wasmkeep/wasmkeep/ownership/keeper"
)

// BenchmarkIdleActorMemory measures what an idle proto.actor actor costs
// in heap: the cost a socket owner made of one actor per room would add
// to every room, so to every hibernated actor with sockets (RATIONALE.md,
// "Why an actor's socket output goes through a room actor, and the room
// stays a locked room").
//
//	go test -run '^$' -bench IdleActorMemory -benchtime 1x ./supervisors/
func BenchmarkIdleActorMemory(b *testing.B) {
	const n = 20000
	for range b.N {
		sys := keeper.NewSystem(nil)
		props := actor.PropsFromFunc(func(actor.Context) {})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		pids := make([]*actor.PID, n)
		for i := range pids {
			pids[i] = sys.Root.Spawn(props)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per := float64(after.HeapAlloc-before.HeapAlloc) / n
		b.ReportMetric(per, "heap-B/actor")
		for _, p := range pids {
			_ = sys.Root.StopFuture(p).Wait()
		}
		sys.Shutdown()
	}
}
