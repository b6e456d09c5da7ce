// Package gopool runs functions on goroutines that are kept for reuse.
//
// A goroutine started per task pays for its start, its exit and, above
// all, for growing its stack from the smallest size to what the task
// needs: for a WebSocket write or an actor's event, that was as much CPU
// as the task itself. A goroutine of a Pool that has run its task waits
// for the next one instead, keeping its stack, unless enough others
// already wait, or until it has waited idleFor. Each waits on a channel
// of its own; the one that waited least is handed the next task.
//
// A goroutine belongs to the synctest bubble it was started in, and ends
// idleFor after its last task: a Pool made in a bubble serves only that
// bubble, and leaves nothing behind once its time has passed.
package gopool

import (
	"slices"
	"sync"
	"time"
)

// Pool hands tasks to waiting goroutines, or starts one.
type Pool struct {
	maxIdle int
	idleFor time.Duration

	mu      sync.Mutex
	idle    []chan func() // the last one waited least
	stopped bool
	started int // goroutines started, for tests
}

// New returns a Pool that keeps at most maxIdle goroutines waiting, each
// for at most idleFor.
func New(maxIdle int, idleFor time.Duration) *Pool {
	return &Pool{maxIdle: maxIdle, idleFor: idleFor}
}

// Go runs fn on a waiting goroutine, or on a new one.
func (p *Pool) Go(fn func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		ch := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		ch <- fn
		return
	}
	p.started++
	p.mu.Unlock()
	go p.work(fn)
}

// work runs fn, then the tasks it is handed, until maxIdle others wait,
// it waited idleFor, or the Pool is stopped.
func (p *Pool) work(fn func()) {
	ch := make(chan func(), 1)
	var idle *time.Timer
	for fn != nil {
		fn()
		p.mu.Lock()
		if p.stopped || len(p.idle) >= p.maxIdle {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, ch)
		p.mu.Unlock()
		if idle == nil {
			idle = time.NewTimer(p.idleFor)
		} else {
			idle.Reset(p.idleFor)
		}
		select {
		case fn = <-ch:
		case <-idle.C:
			p.mu.Lock()
			i := slices.Index(p.idle, ch)
			if i >= 0 {
				p.idle = slices.Delete(p.idle, i, i+1)
			}
			p.mu.Unlock()
			if i >= 0 {
				return
			}
			fn = <-ch // taken off the list by Go or Stop: a task (or nil) is on its way
		}
	}
}

// Stop ends the waiting goroutines, and every other one once its task
// is done. Go still runs tasks after it, each on a goroutine of its own.
func (p *Pool) Stop() {
	p.mu.Lock()
	p.stopped = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, ch := range idle {
		ch <- nil
	}
}

// Idle returns how many goroutines wait for a task.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
