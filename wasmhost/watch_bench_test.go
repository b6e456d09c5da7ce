package wasmhost

import (
	"testing"
	"time"
)

// BenchmarkWatch: what the watch of event timeouts costs one wasm event,
// its start and stop, by one goroutine alone and by as many as there are
// cores at once (the watch's one lock shared; docs/ARCHITECTURE.md,
// "Locks on an event's path").
func BenchmarkWatch(b *testing.B) {
	var w watch
	deadline := time.Now().Add(time.Minute)
	b.Run("alone", func(b *testing.B) {
		ev := &event{}
		for range b.N {
			w.start(ev, deadline)
			w.stop(ev)
		}
	})
	b.Run("every core", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			ev := &event{}
			for pb.Next() {
				w.start(ev, deadline)
				w.stop(ev)
			}
		})
	})
}
