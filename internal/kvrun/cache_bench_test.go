package kvrun

import (
	"fmt"
	"testing"
)

// BenchmarkCacheGet: a lookup of a block in the node's cache, found, by
// one goroutine alone and by as many as there are cores at once (the
// cache's one lock shared): what the lock costs an event that reads its
// storage (docs/ARCHITECTURE.md, "Locks on an event's path").
func BenchmarkCacheGet(b *testing.B) {
	const items = 10000
	c := NewCache(1 << 30)
	keys := make([]cacheKey, items)
	for i := range keys {
		keys[i] = cacheKey{run: fmt.Sprintf("actors/c/a%d/runs/1-1", i%100), off: int64(i) * 4096}
		c.add(keys[i], &block{}, 4096)
	}
	b.Run("alone", func(b *testing.B) {
		for i := range b.N {
			if c.get(keys[i%items]) == nil {
				b.Fatal("missed")
			}
		}
	})
	b.Run("every core", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i += 7919
				if c.get(keys[i%items]) == nil {
					b.Error("missed")
					return
				}
			}
		})
	})
}
