package ingress

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestBodiesGiveMemoryBack: the release that ends a burst of bodies over
// giveBackAbove gives memory back to the system, once per giveBackEvery;
// a small burst does not. Time is synctest's: the give-back's goroutine
// has started, or not, once the bubble is idle.
func TestBodiesGiveMemoryBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
			synctest.Wait()
		}
		gaveBack := func() bool {
			select {
			case <-gave:
				return true
			default:
				return false
			}
		}
		burst(10, 1<<20) // 10 MiB: no give-back
		if gaveBack() {
			t.Fatal("a small burst gave memory back")
		}
		burst(40, 1<<20) // 40 MiB
		if !gaveBack() {
			t.Fatal("the end of a 40 MiB burst gave nothing back")
		}
		burst(40, 1<<20) // again, within giveBackEvery
		if gaveBack() {
			t.Fatal("a second give-back within the interval")
		}
		time.Sleep(giveBackEvery)
		burst(40, 1<<20) // again, past it
		if !gaveBack() {
			t.Fatal("no give-back a full interval after the last")
		}
		if b.inflight.Load() != 0 {
			t.Fatalf("%d bytes still reserved", b.inflight.Load())
		}
	})
}
