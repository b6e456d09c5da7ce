package gopool

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReuseBoundAndStop: every task runs once; the goroutines that are
// done wait for more, at most maxIdle of them; one at a time, tasks run
// on one goroutine; Stop ends those waiting.
func TestReuseBoundAndStop(t *testing.T) {
	p := New(4, time.Hour)
	var mu sync.Mutex
	ran := map[int]int{}
	var wg sync.WaitGroup
	release := make(chan struct{})
	for i := range 10 {
		wg.Add(1)
		p.Go(func() {
			defer wg.Done()
			<-release // all 10 run at once: 10 goroutines
			mu.Lock()
			ran[i]++
			mu.Unlock()
		})
	}
	close(release)
	wg.Wait()
	if len(ran) != 10 {
		t.Fatalf("%d tasks ran, want 10", len(ran))
	}
	waitFor(t, "4 idle goroutines", func() bool { return p.Idle() == 4 })

	for range 100 {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
		waitFor(t, "the goroutine back", func() bool { return p.Idle() == 4 })
	}

	p.Stop()
	if n := p.Idle(); n != 0 {
		t.Fatalf("%d idle after Stop", n)
	}
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	waitFor(t, "the task's goroutine to end", func() bool { return p.Idle() == 0 })
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
			done := make(chan struct{})
			p.Go(func() { close(done) })
			<-done
		}
		synctest.Wait()
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
