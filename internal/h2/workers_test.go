package h2

import (
	"net/http"
	"runtime"
	"sync"
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

// TestIdleWorkersKeepTheirStacks: handler goroutines that grew their
// stacks keep them while idle through collections (the floor of loop), so
// the next handler on each does not grow it again. 200 handlers that
// each need about 10 KiB of stack run at once, on 200 goroutines; once all
// are idle and a collection has freed what other goroutines left, three
// more must leave the stacks in use within 200 KiB of where they were
// (without the floor each collection halves an idle goroutine's stack
// until a quarter is in use, down to 2 KiB: about 1 MiB of these
// goroutines' stacks; with it, measured within 32 KiB).
func TestIdleWorkersKeepTheirStacks(t *testing.T) {
	const handlers = 200
	var arrived sync.WaitGroup
	arrived.Add(handlers)
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		useStack(10 << 10)
		arrived.Done()
		<-release
	})
	c, err := dialBenchClient(listenEngineTCP(t, h), handlers, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	done := make(chan struct{})
	go func() {
		c.run(handlers)
		close(done)
	}()
	arrived.Wait() // every handler at once: a goroutine each
	close(release)
	<-done
	if err := c.failure(); err != nil {
		t.Fatal(err)
	}
	// the last handlers' goroutines are parking: let them
	time.Sleep(100 * time.Millisecond)
	// A goroutine that starts or exits meanwhile (the reaper ending an
	// earlier test's idle goroutines, a connection closing) changes the
	// stacks in use by its own: measure again, up to five times, until
	// the goroutines are the same before and after.
	var before, after runtime.MemStats
	for try := 0; try < 5; try++ {
		goroutines := runtime.NumGoroutine()
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&after)
		if runtime.NumGoroutine() == goroutines {
			break
		}
	}
	t.Logf("stacks in use: %d KiB before three collections, %d KiB after", before.StackInuse>>10, after.StackInuse>>10)
	if lost := int64(before.StackInuse) - int64(after.StackInuse); lost > handlers<<10 {
		t.Errorf("idle handler goroutines' stacks shrank: %d KiB of stacks in use before three collections, %d KiB after",
			before.StackInuse>>10, after.StackInuse>>10)
	}
}

// useStack takes at least n bytes of stack, in frames of 1 KiB.
//
//go:noinline
func useStack(n int) byte {
	var frame [1 << 10]byte
	if n <= len(frame) {
		return frame[n%len(frame)]
	}
	return useStack(n-len(frame)) + frame[n%len(frame)]
}
