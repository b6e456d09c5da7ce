package ingress

import (
	"testing"
	"time"
)

// TestBodiesGiveMemoryBack: the release that ends a burst of bodies over
// giveBackAbove gives memory back to the system, once per giveBackEvery;
// a small burst does not.
func TestBodiesGiveMemoryBack(t *testing.T) {
	b, err := newBodies(1<<30, time.Second, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	gave := make(chan struct{}, 4)
	b.giveBack = func() { gave <- struct{}{} }
	burst := func(n int, size int64) {
		for range n {
			if !b.reserve(size) {
				t.Fatal("reserve refused under the bound")
			}
		}
		for range n {
			b.release(size)
		}
	}
	burst(10, 1<<20) // 10 MiB: no give-back
	select {
	case <-gave:
		t.Fatal("a small burst gave memory back")
	case <-time.After(50 * time.Millisecond):
	}
	burst(40, 1<<20) // 40 MiB
	select {
	case <-gave:
	case <-time.After(5 * time.Second):
		t.Fatal("the end of a 40 MiB burst gave nothing back")
	}
	burst(40, 1<<20) // again, within giveBackEvery
	select {
	case <-gave:
		t.Fatal("a second give-back within the interval")
	case <-time.After(50 * time.Millisecond):
	}
	if b.inflight.Load() != 0 {
		t.Fatalf("%d bytes still reserved", b.inflight.Load())
	}
}
