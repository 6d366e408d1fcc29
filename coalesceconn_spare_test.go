package h2file

// The default max_pending is elastic: a connection may queue up to
// sparePending bytes while the wrapper's budget is less than half used.

import (
	"context"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// lwSpareLimits are limits with 2 chunks of max_pending, 8 of spare
// pending, and a budget of maxChunks chunks.
func lwSpareLimits(maxChunks int64) *coalesceLimits {
	l := newCoalesceLimits(2*coalesceChunkSize, maxChunks*coalesceChunkSize, time.Second)
	l.sparePending = 8 * coalesceChunkSize
	return l
}

// With chunks to spare, a Write beyond max_pending is queued up to spare
// pending without waiting; beyond that it waits for the flusher.
func TestCoalesceSparePending(t *testing.T) {
	lwNoLeaks(t)
	g := lwNewGate(t)
	c := lwWrapShared(g, lwSpareLimits(100))
	lwFlushing(t, c, []byte{1}) // in flight, blocked in the gate
	if r := lwRecv(t, lwAsyncWrite(c, make([]byte, 8*coalesceChunkSize)), "Write within spare pending"); r.err != nil {
		t.Fatal(r.err)
	}
	blocked := lwAsyncWrite(c, make([]byte, 10))
	lwNotYet(t, blocked, "Write beyond spare pending")
	if got := lwQueued(c); got != 8*coalesceChunkSize {
		t.Errorf("queued %d, want %d", got, 8*coalesceChunkSize)
	}
	g.openGate()
	if r := lwRecv(t, blocked, "Write"); r.n != 10 || r.err != nil {
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
	if _, err := other.Write(make([]byte, 2*coalesceChunkSize)); err != nil {
		t.Fatal(err)
	}
	otherSpare := lwAsyncWrite(other, make([]byte, 2*coalesceChunkSize))
	waitUntil(t, "the other connection to hold half the budget", func() bool { return limits.budget.used.Load() >= 4 })
	lwNotYet(t, otherSpare, "the other connection's Write beyond half the budget")

	g := lwNewGate(t)
	c := lwWrapShared(g, limits)
	lwFlushing(t, c, []byte{1})
	if r := lwRecv(t, lwAsyncWrite(c, make([]byte, 2*coalesceChunkSize)), "Write within max_pending"); r.err != nil {
		t.Fatal(r.err)
	}
	blocked := lwAsyncWrite(c, make([]byte, 10))
	lwNotYet(t, blocked, "Write beyond max_pending with no chunk to spare")
	g.openGate()
	if r := lwRecv(t, blocked, "Write"); r.n != 10 || r.err != nil {
		t.Fatalf("Write = %d, %v", r.n, r.err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = other.Close()
	<-otherSpare
}

// Only the default max_pending is elastic; one set explicitly is a hard
// limit.
func TestCoalesceSparePendingOnlyByDefault(t *testing.T) {
	for _, tc := range []struct {
		maxPending      int64
		wantMax, wantSp int
	}{
		{0, defaultCoalesceMaxPending, coalesceSparePending},
		{defaultCoalesceMaxPending, defaultCoalesceMaxPending, 0},
		{32 << 10, 32 << 10, 0},
	} {
		w := &CoalesceWrapper{MaxPending: tc.maxPending}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := w.Provision(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if w.limits.maxPending != tc.wantMax || w.limits.sparePending != tc.wantSp {
			t.Errorf("max_pending %d: limits %d, spare %d; want %d, %d", tc.maxPending, w.limits.maxPending, w.limits.sparePending, tc.wantMax, tc.wantSp)
		}
	}
}
