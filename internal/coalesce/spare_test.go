package coalesce

// The default max_pending is elastic: a connection may queue up to
// sparePending bytes while the wrapper's budget is less than half used.

import (
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// lwSpareLimits are limits with 2 chunks of max_pending, 8 of spare
// pending, and a budget of maxChunks chunks.
func lwSpareLimits(maxChunks int64) *Limits {
	l := NewLimits(2*ChunkSize, maxChunks*ChunkSize, time.Second)
	l.sparePending = 8 * ChunkSize
	return l
}

// With chunks to spare, a Write beyond max_pending is queued up to spare
// pending without waiting; beyond that it waits for the flusher.
func TestCoalesceSparePending(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrapShared(g, lwSpareLimits(100))
	lwFlushing(t, c, []byte{1}) // in flight, blocked in the gate
	if r := harness.Recv(t, lwAsyncWrite(c, make([]byte, 8*ChunkSize)), "Write within spare pending"); r.err != nil {
		t.Fatal(r.err)
	}
	blocked := lwAsyncWrite(c, make([]byte, 10))
	lwNotYet(t, blocked, "Write beyond spare pending")
	if got := lwQueued(c); got != 8*ChunkSize {
		t.Errorf("queued %d, want %d", got, 8*ChunkSize)
	}
	g.openGate()
	if r := harness.Recv(t, blocked, "Write"); r.n != 10 || r.err != nil {
		t.Fatalf("Write = %d, %v", r.n, r.err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// Spare chunks come only from the unused half of the budget: once other
// connections hold half of it, max_pending is a hard limit again, and
// connections within their max_pending still get chunks.
func TestCoalesceSparePendingYieldsToBudget(t *testing.T) {
	lwNoLeaks(t)
	limits := lwSpareLimits(8)
	// another connection, blocked, holds 4 of the 8 chunks
	other := lwWrapShared(lwNewGate(t), limits)
	lwFlushing(t, other, []byte{1})
	if _, err := other.Write(make([]byte, 2*ChunkSize)); err != nil {
		t.Fatal(err)
	}
	otherSpare := lwAsyncWrite(other, make([]byte, 2*ChunkSize))
	harness.WaitUntil(t, "the other connection to hold half the budget", func() bool { return limits.budget.used.Load() >= 4 })
	lwNotYet(t, otherSpare, "the other connection's Write beyond half the budget")

	g := lwNewGate(t)
	c := lwWrapShared(g, limits)
	lwFlushing(t, c, []byte{1})
	if r := harness.Recv(t, lwAsyncWrite(c, make([]byte, 2*ChunkSize)), "Write within max_pending"); r.err != nil {
		t.Fatal(r.err)
	}
	blocked := lwAsyncWrite(c, make([]byte, 10))
	lwNotYet(t, blocked, "Write beyond max_pending with no chunk to spare")
	g.openGate()
	if r := harness.Recv(t, blocked, "Write"); r.n != 10 || r.err != nil {
		t.Fatalf("Write = %d, %v", r.n, r.err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = other.Close()
	<-otherSpare
}
