package gopool

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestReuseBoundAndStop: every task runs once; the goroutines that are
// done wait for more, at most maxIdle of them; a task given while one
// waits runs on it (no goroutine more); Stop ends those waiting, and a
// task given after it runs on a goroutine that then ends.
func TestReuseBoundAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(4, time.Hour)
		var mu sync.Mutex
		ran := map[int]int{}
		release := make(chan struct{})
		for i := range 10 {
			p.Go(func() {
				<-release // all 10 run at once: 10 goroutines
				mu.Lock()
				ran[i]++
				mu.Unlock()
			})
		}
		close(release)
		synctest.Wait() // every goroutine is done, or waits
		if len(ran) != 10 {
			t.Fatalf("%d tasks ran, want 10", len(ran))
		}
		if n := p.Idle(); n != 4 {
			t.Fatalf("%d idle, want 4", n)
		}

		for range 100 {
			p.Go(func() {})
			synctest.Wait()
			p.mu.Lock()
			started := p.started
			p.mu.Unlock()
			if started != 10 {
				t.Fatalf("%d goroutines started, want the first 10 only", started)
			}
			if n := p.Idle(); n != 4 {
				t.Fatalf("%d idle after a task, want 4", n)
			}
		}

		p.Stop()
		if n := p.Idle(); n != 0 {
			t.Fatalf("%d idle after Stop", n)
		}
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
		synctest.Wait()
		if n := p.Idle(); n != 0 {
			t.Fatalf("%d idle after a task given after Stop, want 0", n)
		}
	})
}

// BenchmarkGo: a task handed to a waiting goroutine, against one
// started for it ("spawn"); both tasks need a few KiB of stack.
func BenchmarkGo(b *testing.B) {
	task := func(done chan struct{}) func() {
		return func() {
			var buf [4096]byte
			grow(buf[:], 3)
			done <- struct{}{}
		}
	}
	b.Run("pool", func(b *testing.B) {
		p := New(8, time.Hour)
		done := make(chan struct{})
		fn := task(done)
		for b.Loop() {
			p.Go(fn)
			<-done
		}
	})
	b.Run("spawn", func(b *testing.B) {
		done := make(chan struct{})
		fn := task(done)
		for b.Loop() {
			go fn()
			<-done
		}
	})
}

//go:noinline
func grow(b []byte, n int) byte {
	if n == 0 {
		return b[0]
	}
	var more [512]byte
	more[0] = b[0]
	return grow(more[:], n-1)
}

// TestIdleEnd: a goroutine that waited idleFor ends; inside a synctest
// bubble, the bubble then ends with nothing left.
func TestIdleEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(4, time.Second)
		for range 3 {
			p.Go(func() {})
			synctest.Wait() // its goroutine waits for the next
		}
		if n := p.Idle(); n != 1 {
			t.Fatalf("%d idle, want 1", n)
		}
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if n := p.Idle(); n != 1 {
			t.Fatalf("%d idle before idleFor, want 1", n)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if n := p.Idle(); n != 0 {
			t.Fatalf("%d idle after idleFor, want 0", n)
		}
	})
}
