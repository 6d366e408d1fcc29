package coalesce

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// ChunkSize is the size of the pooled buffers that pending bytes
// are kept in. It is the largest TLS record's plaintext, so that above
// TLS every full buffer becomes one full record.
const ChunkSize = 16 << 10

type chunk [ChunkSize]byte

var chunkPool = sync.Pool{New: func() any { return new(chunk) }}

// Counters that let tests prove nothing leaks: chunks taken from the pool
// and not yet returned, and flusher goroutines running.
var (
	chunksOut atomic.Int64
	flushers  atomic.Int64
)

func getChunk() *chunk {
	chunksOut.Add(1)
	Metrics.Buffered.Add(ChunkSize)
	return chunkPool.Get().(*chunk)
}

func putChunk(c *chunk) {
	chunksOut.Add(-1)
	Metrics.Buffered.Sub(ChunkSize)
	chunkPool.Put(c)
}

// Limits are the settings shared by the connections of one
// listener wrapper.
type Limits struct {
	maxPending int // most bytes queued for the next socket write, per connection
	// sparePending, when larger than maxPending, is how many a connection
	// may queue with chunks the budget spares (see budget.spare)
	sparePending int
	closeTimeout time.Duration
	budget       *budget
	logger       *zap.Logger
}

// NewLimits returns the limits of one wrapper: maxPending bytes queued per
// connection, maxTotal for all of them together (in whole chunks), and
// closeTimeout for Close to send what is queued.
func NewLimits(maxPending int, maxTotal int64, closeTimeout time.Duration) *Limits {
	return &Limits{
		maxPending:   max(maxPending, 1),
		closeTimeout: closeTimeout,
		budget:       newBudget(max(maxTotal/ChunkSize, 1)),
		logger:       zap.NewNop(),
	}
}

// SetSparePending lets a connection queue up to n bytes while less than
// half of max_total is in use (see spare); for the default max_pending.
func (l *Limits) SetSparePending(n int) { l.sparePending = n }

// SetLogger sets where the connections log.
func (l *Limits) SetLogger(logger *zap.Logger) { l.logger = logger }

// SparePending returns the bytes a connection may queue while the budget
// is less than half used (0: max_pending is a hard limit).
func (l *Limits) SparePending() int { return l.sparePending }

// MaxPending returns the bytes a connection may queue.
func (l *Limits) MaxPending() int { return l.maxPending }

// MaxTotal returns the bytes all the connections together may queue, in
// whole chunks.
func (l *Limits) MaxTotal() int64 { return l.budget.max * ChunkSize }

// CloseTimeout returns how long Close waits for queued bytes to be sent.
func (l *Limits) CloseTimeout() time.Duration { return l.closeTimeout }

// budget counts the chunks that the connections of one wrapper
// hold, against a limit.
type budget struct {
	max   int64
	used  atomic.Int64
	nwait atomic.Int64 // len(waiters), readable without mu

	mu      sync.Mutex
	waiters []chan struct{}
}

func newBudget(maxChunks int64) *budget {
	return &budget{max: maxChunks}
}

// take reserves one chunk. If none is left, it arranges for wake to be
// signalled when one is given back, and returns false.
func (b *budget) take(wake chan struct{}) bool {
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
func (b *budget) spare() bool {
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
func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.used.Add(-n)
	if b.nwait.Load() == 0 {
		return
	}
	b.mu.Lock()
	for i, w := range b.waiters {
		signal(w)
		b.waiters[i] = nil
	}
	b.waiters = b.waiters[:0]
	b.nwait.Store(0)
	b.mu.Unlock()
}

// signal wakes the goroutine waiting on ch, if any; ch has room
// for one signal, so a wake-up sent before the wait is not lost.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
