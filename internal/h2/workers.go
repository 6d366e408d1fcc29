package h2

import (
	"sync"
	"time"
)

// Handler goroutines are reused: a goroutine that has run a handler waits
// a while for the next, keeping its grown stack, instead of a new
// goroutine per stream whose stack grows again on every request (the
// growth copies the stack and walks its frames: 10-15% of the CPU of a
// 10 KB response in a profile of a goroutine per stream).
//
// No timer is armed per handler: an idle goroutine notes when it parked,
// and one reaper, running while any is idle, ends those idle for longer
// than workerIdleTimeout. A timer per idle goroutine, reset for every
// handler it ran, made the Go runtime rescan every timer of the process
// (runtime.(*timers).adjust, half the CPU of a busy process with other
// sites' timers pending: issue 29).
const (
	// workerIdleTimeout is how long an idle handler goroutine waits for
	// work before it exits (up to half as long again: the reaper's
	// period).
	workerIdleTimeout = 5 * time.Second
	// maxIdleWorkers bounds the idle handler goroutines of the process.
	maxIdleWorkers = 4096
)

// workers is the process-wide pool of idle handler goroutines.
var workers workerPool

type workerPool struct {
	mu      sync.Mutex
	idle    []*worker // the most recently parked last
	reaping bool      // the reaper runs
}

// worker is an idle handler goroutine, waiting on work.
type worker struct {
	work     chan *stream // buffered: the sender never waits; nil: exit
	parkedAt time.Time
}

// start runs st's handler on an idle goroutine, or on a new one.
func (p *workerPool) start(st *stream) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.work <- st
		return
	}
	p.mu.Unlock()
	go p.loop(st)
}

// loop runs handlers until the reaper ends it, or the idle list is full.
// They run above a floor of workerStackFloor bytes of the goroutine's
// stack, taken once: the collector halves a goroutine's stack when less
// than a quarter of it is in use, as it is while the goroutine waits for
// work, so without the floor every collection shrank the idle goroutines'
// stacks and the next handler on each grew it again, copying it
// (runtime.newstack: 2.5-3.8% of the CPU on the bench's 10 KB workload;
// with the floor, 200-280 busy goroutines hold about 14% more stack).
func (p *workerPool) loop(st *stream) {
	var floor [workerStackFloor]byte
	p.runHandlers(st, &floor)
}

// workerStackFloor is the stack a handler goroutine keeps in use: a
// quarter of the 16 KiB that Caddy's route chain and a file handler grow
// it to, so that the collector leaves it at 16 KiB.
const workerStackFloor = 4 << 10

// runHandlers is loop's work, on top of floor (which it does not use: its
// address keeps it on loop's frame).
//
//go:noinline
func (p *workerPool) runHandlers(st *stream, floor *[workerStackFloor]byte) {
	_ = floor
	w := &worker{work: make(chan *stream, 1)}
	for st != nil {
		st.c.runHandler(st)
		if !p.park(w) {
			return
		}
		st = <-w.work
	}
}

// park puts w on the idle list, or reports false when the list is full.
func (p *workerPool) park(w *worker) bool {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= maxIdleWorkers {
		return false
	}
	w.parkedAt = now
	p.idle = append(p.idle, w)
	if !p.reaping {
		p.reaping = true
		go p.reap()
	}
	return true
}

// reap ends, every half workerIdleTimeout, the goroutines idle for
// longer than workerIdleTimeout, and returns once none is idle.
func (p *workerPool) reap() {
	for {
		time.Sleep(workerIdleTimeout / 2)
		if !p.reapIdle(time.Now().Add(-workerIdleTimeout)) {
			return
		}
	}
}

// reapIdle ends the goroutines parked before cutoff, and reports whether
// any is still idle (false: the reaper stops).
func (p *workerPool) reapIdle(cutoff time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	// the list is in the order of parking: the oldest first
	k := 0
	for k < len(p.idle) && p.idle[k].parkedAt.Before(cutoff) {
		p.idle[k].work <- nil
		k++
	}
	n := copy(p.idle, p.idle[k:])
	clear(p.idle[n:])
	p.idle = p.idle[:n]
	if n == 0 {
		p.reaping = false
	}
	return n > 0
}

// idleWorkers is how many of the pool's goroutines wait now: the idle
// handler goroutines, and the reaper while it runs.
func (p *workerPool) idleWorkers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaping {
		return len(p.idle) + 1
	}
	return len(p.idle)
}
