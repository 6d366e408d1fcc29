package h2file

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// coalesceChunkSize is the size of the pooled buffers that pending bytes
// are kept in. It is the largest TLS record's plaintext, so that above
// TLS every full buffer becomes one full record.
const coalesceChunkSize = 16 << 10

type coalesceChunk [coalesceChunkSize]byte

var coalesceChunkPool = sync.Pool{New: func() any { return new(coalesceChunk) }}

// Counters that let tests prove nothing leaks: chunks taken from the pool
// and not yet returned, and flusher goroutines running.
var (
	coalesceChunksOut atomic.Int64
	coalesceFlushers  atomic.Int64
)

func getCoalesceChunk() *coalesceChunk {
	coalesceChunksOut.Add(1)
	coalesceStats.buffered.Add(coalesceChunkSize)
	return coalesceChunkPool.Get().(*coalesceChunk)
}

func putCoalesceChunk(c *coalesceChunk) {
	coalesceChunksOut.Add(-1)
	coalesceStats.buffered.Sub(coalesceChunkSize)
	coalesceChunkPool.Put(c)
}

// coalesceLimits are the settings shared by the connections of one
// listener wrapper.
type coalesceLimits struct {
	maxPending int // most bytes queued for the next socket write, per connection
	// sparePending, when larger than maxPending, is how many a connection
	// may queue with chunks the budget spares (see coalesceBudget.spare)
	sparePending int
	closeTimeout time.Duration
	budget       *coalesceBudget
	logger       *zap.Logger
}

func newCoalesceLimits(maxPending int, maxTotal int64, closeTimeout time.Duration) *coalesceLimits {
	return &coalesceLimits{
		maxPending:   max(maxPending, 1),
		closeTimeout: closeTimeout,
		budget:       newCoalesceBudget(max(maxTotal/coalesceChunkSize, 1)),
		logger:       zap.NewNop(),
	}
}

// coalesceBudget counts the chunks that the connections of one wrapper
// hold, against a limit.
type coalesceBudget struct {
	max   int64
	used  atomic.Int64
	nwait atomic.Int64 // len(waiters), readable without mu

	mu      sync.Mutex
	waiters []chan struct{}
}

func newCoalesceBudget(maxChunks int64) *coalesceBudget {
	return &coalesceBudget{max: maxChunks}
}

// take reserves one chunk. If none is left, it arranges for wake to be
// signalled when one is given back, and returns false.
func (b *coalesceBudget) take(wake chan struct{}) bool {
	for {
		if u := b.used.Load(); u < b.max {
			if b.used.CompareAndSwap(u, u+1) {
				return true
			}
			continue
		}
		b.mu.Lock()
		b.waiters = append(b.waiters, wake)
		b.nwait.Store(int64(len(b.waiters)))
		b.mu.Unlock()
		// a chunk given back before we were registered would not wake us
		if b.used.Load() >= b.max {
			return false
		}
	}
}

// spare reserves one chunk beyond a connection's max_pending, without
// waiting: only while less than half of the budget is used, so that spare
// chunks never take from what connections within their max_pending need.
func (b *coalesceBudget) spare() bool {
	for {
		u := b.used.Load()
		if u >= b.max/2 {
			return false
		}
		if b.used.CompareAndSwap(u, u+1) {
			return true
		}
	}
}

// give returns n chunks and wakes the writers waiting for one.
func (b *coalesceBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.used.Add(-n)
	if b.nwait.Load() == 0 {
		return
	}
	b.mu.Lock()
	for i, w := range b.waiters {
		coalesceSignal(w)
		b.waiters[i] = nil
	}
	b.waiters = b.waiters[:0]
	b.nwait.Store(0)
	b.mu.Unlock()
}

// coalesceSignal wakes the goroutine waiting on ch, if any; ch has room
// for one signal, so a wake-up sent before the wait is not lost.
func coalesceSignal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
