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
const (
	// workerIdleTimeout is how long an idle handler goroutine waits for
	// work before it exits.
	workerIdleTimeout = 5 * time.Second
	// maxIdleWorkers bounds the idle handler goroutines of the process.
	maxIdleWorkers = 4096
)

// workers is the process-wide pool of idle handler goroutines.
var workers workerPool

type workerPool struct {
	mu   sync.Mutex
	idle []*worker
}

// worker is an idle handler goroutine, waiting on work.
type worker struct {
	work chan *stream // buffered: the sender never waits
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

// loop runs handlers until it has waited workerIdleTimeout for one.
func (p *workerPool) loop(st *stream) {
	w := &worker{work: make(chan *stream, 1)}
	timer := time.NewTimer(workerIdleTimeout)
	timer.Stop()
	for {
		st.c.runHandler(st)
		st = nil
		if !p.park(w) {
			return
		}
		timer.Reset(workerIdleTimeout)
		select {
		case st = <-w.work:
			timer.Stop()
		case <-timer.C:
			if p.unpark(w) {
				return
			}
			// taken from the idle list just now: its work is on the way
			st = <-w.work
		}
	}
}

// park puts w on the idle list, or reports false when the list is full.
func (p *workerPool) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= maxIdleWorkers {
		return false
	}
	p.idle = append(p.idle, w)
	return true
}

// unpark takes w off the idle list; false means start has taken it.
func (p *workerPool) unpark(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.idle {
		if x == w {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return true
		}
	}
	return false
}

// idleWorkers is how many handler goroutines wait for work now.
func (p *workerPool) idleWorkers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
