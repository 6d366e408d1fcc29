package coalesce

// The coalesce wrapper's chunk pool and budget (budget.go): buffers
// go back when idle, the global cap holds, no goroutine outlives its
// connection.

import (
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// Buffers go back to the pool when a connection has nothing pending, not
// only when it closes; many connections leave nothing behind.
func TestCoalescePoolReuse(t *testing.T) {
	lwNoLeaks(t)
	base := chunksOut.Load()
	limits := NewLimits(64<<10, 64<<20, 5*time.Second)
	server, client := harness.TCPPair(t)
	c := lwWrapShared(server, limits)
	payload := make([]byte, 200<<10)
	read := harness.Async(func() error { _, err := io.ReadFull(client, make([]byte, len(payload))); return err })
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := harness.Recv(t, read, "reader"); err != nil {
		t.Fatal(err)
	}
	harness.WaitUntil(t, "buffers back in the pool while the connection is open", func() bool {
		return chunksOut.Load() == base && limits.budget.used.Load() == 0
	})
	c.Close()

	var wg sync.WaitGroup
	for range 20 {
		server, client := harness.TCPPair(t)
		c := lwWrapShared(server, limits)
		wg.Go(func() { io.Copy(io.Discard, client) })
		wg.Go(func() {
			for range 10 {
				if _, err := c.Write(make([]byte, 50000)); err != nil {
					t.Error(err)
				}
			}
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := chunksOut.Load(); got != base {
		t.Fatalf("%d chunks not returned", got-base)
	}
	if used := limits.budget.used.Load(); used != 0 {
		t.Fatalf("budget still has %d chunks in use", used)
	}
}

// The budget of all connections together: when it is used up, a Write
// of another connection waits until chunks are given back.
func TestCoalesceGlobalCap(t *testing.T) {
	lwNoLeaks(t)
	limits := NewLimits(64<<10, 2*ChunkSize, 5*time.Second)
	ga, gb := lwNewGate(t), lwNewGate(t)
	a, b := lwWrapShared(ga, limits), lwWrapShared(gb, limits)
	lwFlushing(t, a, []byte{1})                      // chunk 1, in flight
	blockedA := lwAsyncWrite(a, make([]byte, 20000)) // chunk 2, then waits for a third
	harness.WaitUntil(t, "both chunks in use", func() bool { return limits.budget.used.Load() == 2 })
	lwNotYet(t, blockedA, "Write of a beyond the budget")
	blockedB := lwAsyncWrite(b, []byte("b"))
	lwNotYet(t, blockedB, "Write of b beyond the budget")
	if used := limits.budget.used.Load(); used != 2 {
		t.Fatalf("budget used = %d, want 2", used)
	}
	gb.openGate()
	ga.openGate()
	if r := harness.Recv(t, blockedA, "Write of a"); r.n != 20000 || r.err != nil {
		t.Fatalf("a: %d, %v", r.n, r.err)
	}
	if r := harness.Recv(t, blockedB, "Write of b"); r.n != 1 || r.err != nil {
		t.Fatalf("b: %d, %v", r.n, r.err)
	}
	a.Close()
	b.Close()
	if _, all := ga.written(); len(all) != 20001 {
		t.Fatalf("a sent %d bytes", len(all))
	}
	if _, all := gb.written(); string(all) != "b" {
		t.Fatalf("b sent %q", all)
	}
	if used := limits.budget.used.Load(); used != 0 {
		t.Fatalf("budget used = %d after close", used)
	}
}

// No goroutine outlives its connection.
func TestCoalesceNoGoroutineLeak(t *testing.T) {
	lwNoLeaks(t)
	before := runtime.NumGoroutine()
	func() {
		var wg sync.WaitGroup
		for i := range 30 {
			server, client := harness.TCPPair(t)
			c := lwWrap(server, 16<<10, 64<<20, time.Second)
			wg.Go(func() { io.Copy(io.Discard, client); client.Close() })
			wg.Go(func() {
				for range 20 {
					c.Write(make([]byte, 3000+i))
				}
				c.Close()
			})
		}
		wg.Wait()
	}()
	harness.WaitUntil(t, "goroutines to end", func() bool {
		return runtime.NumGoroutine() <= before && flushers.Load() == 0
	})
}
