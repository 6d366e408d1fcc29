package h2

import (
	"sync"
	"time"
)

// A response whose whole declared body is in the batch leaves the batch
// unwritten, so that its END_STREAM, added when the handler returns,
// goes in the same socket write (writeChunk); if the handler does not
// return soon, the batch is written anyway, by one goroutine of the
// process that wakes every deferredFlushDelay while any connection waits
// for it. A timer per connection, reset for every response, made the Go
// runtime rescan every timer of the process each millisecond
// (runtime.(*timers).adjust: half the CPU of a busy process with other
// sites' timers pending, issue 29); the flusher's own sleep is one timer
// armed per period, for the whole process.

// deferredFlushDelay is how long frames may wait in the batch for the
// rest of their response: a handler that wrote its whole declared body
// normally returns, and adds END_STREAM, within microseconds; one that
// does not still has its bytes sent within this.
const deferredFlushDelay = time.Millisecond

// deferredFlushes is the process's list of connections whose batch is to
// be written at the flusher's next wake-up.
var deferredFlushes flushList

type flushList struct {
	mu      sync.Mutex
	conns   []*conn
	spare   []*conn // the list the flusher went through last
	running bool    // the flusher runs
}

// deferFlushLocked leaves the batch for the next frames of the caller's
// stream (its END_STREAM), to be written within deferredFlushDelay if
// nothing else writes it first.
func (c *conn) deferFlushLocked() {
	if c.flushPending || c.closed {
		return
	}
	c.flushPending = true
	if !c.flushListed {
		c.flushListed = true
		deferredFlushes.add(c)
	}
}

// timedFlush has what a deferred flush left in the batch written, by a
// goroutine of the connection's (kickLocked): the flusher serves every
// connection, and must not wait for one client's socket.
func (c *conn) timedFlush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushListed = false
	if c.flushPending {
		c.flushPending = false
		c.kickLocked()
	}
}

// add lists c (its flushListed is set) and starts the flusher if it is
// not running. It is called with c.mu held; the flusher takes c.mu only
// after it has released l.mu.
func (l *flushList) add(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conns = append(l.conns, c)
	if !l.running {
		l.running = true
		go l.run()
	}
}

// run writes the listed connections' batches every deferredFlushDelay
// until a wake-up finds none.
func (l *flushList) run() {
	for {
		time.Sleep(deferredFlushDelay)
		l.mu.Lock()
		conns := l.conns
		if len(conns) == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		l.conns, l.spare = l.spare[:0], nil
		l.mu.Unlock()
		for i, c := range conns {
			c.timedFlush()
			conns[i] = nil
		}
		l.mu.Lock()
		l.spare = conns[:0]
		l.mu.Unlock()
	}
}
