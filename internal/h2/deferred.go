package h2

import "time"

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

// deferredFlushes lists the connections whose batch is to be written at
// the flusher's next wake-up.
var deferredFlushes = sweeper[*conn]{
	period: deferredFlushDelay,
	visit:  func(c *conn, _ int64) bool { c.timedFlush(); return false },
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
