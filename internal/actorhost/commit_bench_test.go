package actorhost_test

import (
	"fmt"
	"testing"

	"github.com/wasmkeep/wasmkeep/internal/actorhost"
	"github.com/wasmkeep/wasmkeep/ownership"
	"github.com/wasmkeep/wasmkeep/ownership/memstore"
)

// BenchmarkCommit: counter increments spread over 1,000 actors on an
// in-memory bucket, each event a commit of its own: the resident actor's
// way of an event (storage, the head's encoding, the output gate) without
// HTTP.
func BenchmarkCommit(b *testing.B) {
	actors := make([]ownership.Actor, 1000)
	for i := range actors {
		actors[i] = ownership.Actor{Class: "counter", Name: fmt.Sprintf("c%d", i)}
	}
	h := newHost(b, memstore.New(memstore.Faults{}), &fakeKeeper{}, nil)
	for _, a := range actors {
		if _, err := h.Deliver(b.Context(), a, 1, get("")); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if _, err := h.Deliver(b.Context(), actors[i%len(actors)], 1, get("")); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkKeyedEvent: increments of one counter, one at a time, each
// with a client's key of its own (keyed) or none (plain), on an in-memory
// bucket: what remembering a key costs an event, the actor's storage
// filling with keys up to DefaultMaxKeys and past.
func BenchmarkKeyedEvent(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		b.Run(fmt.Sprintf("keyed=%v", keyed), func(b *testing.B) {
			h := newHost(b, memstore.New(memstore.Faults{}), &fakeKeeper{}, nil)
			b.ReportAllocs()
			for i := range b.N {
				ctx := b.Context()
				if keyed {
					ctx = actorhost.WithEventKey(ctx, actorhost.ClientKey(fmt.Sprintf("key-%d", i), 0))
				}
				if _, err := h.Deliver(ctx, room, 1, get("")); err != nil {
					b.Fatal(err)
				}
			}
			st := h.StorageStats()
			b.ReportMetric(float64(st.HeadBytes+st.RunWriteBytes)/float64(b.N), "bytes/op")
		})
	}
}

// BenchmarkEventHandOff: the least that running each event's class code
// on a goroutine apart from the resident actor's Receive would add to
// every event (doc.go, "Blocking"): the event handed to a waiting
// goroutine and its end handed back. Compare with
// BenchmarkKeyedEvent/keyed=false, a whole warm event, in the same run.
// (Built whole, with the actor's messages kept while the code runs, it
// cost far more: RATIONALE.md.)
func BenchmarkEventHandOff(b *testing.B) {
	work, end := make(chan func()), make(chan struct{})
	go func() {
		for f := range work {
			f()
			end <- struct{}{}
		}
	}()
	defer close(work)
	n := 0
	f := func() { n++ }
	b.ReportAllocs()
	for b.Loop() {
		work <- f
		<-end
	}
	if n == 0 {
		b.Fatal("no event ran")
	}
}

// BenchmarkOneHotActor: increments of one counter from 32 callers at once,
// on an in-memory bucket: the group commit of one busy actor, what the
// HTTP benchmark with one name drives without HTTP. heads/op is the
// commits per event (the smaller, the bigger the groups).
func BenchmarkOneHotActor(b *testing.B) {
	h := newHost(b, memstore.New(memstore.Faults{}), &fakeKeeper{}, nil)
	if _, err := h.Deliver(b.Context(), room, 1, get("")); err != nil {
		b.Fatal(err)
	}
	before := h.StorageStats().HeadWrites
	b.ReportAllocs()
	b.SetParallelism(16) // 32 callers on two cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.Deliver(b.Context(), room, 1, get("")); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(h.StorageStats().HeadWrites-before)/float64(b.N), "heads/op")
}
