package h2

import (
	"testing"
	"time"
)

// TestWorkerReaper: idle handler goroutines parked before the cutoff are
// told to exit (a nil on their channel), the newer ones stay idle, and the
// reaper stops once none is idle.
func TestWorkerReaper(t *testing.T) {
	var p workerPool
	now := time.Now()
	var ws []*worker
	for i := range 4 {
		w := &worker{work: make(chan *stream, 1)}
		ws = append(ws, w)
		p.mu.Lock()
		w.parkedAt = now.Add(time.Duration(i) * time.Second)
		p.idle = append(p.idle, w)
		p.reaping = true
		p.mu.Unlock()
	}
	if !p.reapIdle(now.Add(1500 * time.Millisecond)) {
		t.Fatal("the reaper stopped with two goroutines idle")
	}
	for i, w := range ws {
		select {
		case st := <-w.work:
			if i >= 2 || st != nil {
				t.Errorf("worker %d (parked %ds in): told %v", i, i, st)
			}
		default:
			if i < 2 {
				t.Errorf("worker %d, idle past the cutoff, was not told to exit", i)
			}
		}
	}
	if n := p.idleWorkers(); n != 2+1 {
		t.Errorf("%d idle goroutines counted, want 2 workers and the reaper", n)
	}
	if p.reapIdle(now.Add(time.Hour)) || p.idleWorkers() != 0 {
		t.Errorf("after every worker was reaped: %d idle goroutines, reaping %v", p.idleWorkers(), p.reaping)
	}
}
