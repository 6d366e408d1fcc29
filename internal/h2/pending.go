package h2

import "sync"

// Send-ahead: when the client's window for a stream is used up, a
// handler's next bytes
// (up to maxStreamPending) are copied into a buffer of the stream's and
// the handler goes on reading its body; the connection's goroutine sends
// them the moment a WINDOW_UPDATE opens the window, with no handler to
// wake first. Against a client with small windows (64 KB), every window
// otherwise waits for the handler's goroutine to be scheduled and its
// next chunk read before a byte goes out. The handler still ends its
// response itself, once its buffer is sent, so its write deadline and its
// handler slot hold as without the buffer.
const (
	// maxStreamPending is what one stream buffers ahead of its window.
	maxStreamPending = 64 << 10
	// maxConnPending bounds the buffers of one connection's streams.
	maxConnPending = 1 << 20
)

var pendingPool = sync.Pool{New: func() any { b := make([]byte, 0, maxStreamPending); return &b }}

// bufferAheadLocked copies as much of p as st and the connection may
// hold ahead of the window, and returns the rest.
func (c *conn) bufferAheadLocked(st *stream, p []byte) []byte {
	k := min(len(p), maxStreamPending-len(st.pending), maxConnPending-c.pendingTotal)
	if k <= 0 {
		return p
	}
	if st.pending == nil {
		st.pending = (*pendingPool.Get().(*[]byte))[:0]
		c.pendingStreams = append(c.pendingStreams, st)
	}
	st.pending = append(st.pending, p[:k]...)
	c.pendingTotal += k
	return p[k:]
}

// sendPendingLocked puts what st buffered ahead into the batch, as far
// as its turn at the connection, the windows and the batch allow, and
// reports whether it sent anything. A stream that has bytes left and
// window of its own stays in line, or is put in it, so that the line's
// dispatch sends the rest in its turn (queue.go), whether its handler
// waits or not; one whose own window is used up leaves the line, and
// the WINDOW_UPDATE that opens it sends (processWindowUpdate).
func (c *conn) sendPendingLocked(st *stream) bool {
	if len(st.pending) == 0 || st.closed {
		return false
	}
	if st.sendWindow <= 0 {
		c.leaveQueueLocked(st)
		return false
	}
	n := c.sendableLocked(st, len(st.pending))
	if n <= 0 {
		if c.queueLocked(st) {
			return c.sendPendingLocked(st) // first in line at once
		}
		return false
	}
	c.appendDataLocked(st, st.pending[:n], false)
	rest := copy(st.pending, st.pending[n:])
	st.pending = st.pending[:rest]
	c.pendingTotal -= n
	if rest == 0 {
		c.releasePendingLocked(st)
	}
	more := rest > 0 && st.sendWindow > 0
	c.turnTakenLocked(st, more)
	if more && !st.queued {
		c.queueLocked(st)
	}
	st.cond.Broadcast() // the handler may buffer more, or end
	return true
}

// queuePendingLocked puts in line every stream with bytes buffered ahead
// and window of its own (after SETTINGS raised the initial window, or a
// WINDOW_UPDATE opened the connection's), and lets the line's first go.
func (c *conn) queuePendingLocked() {
	for _, st := range c.pendingStreams {
		if st.sendWindow > 0 {
			c.queueLocked(st)
		}
	}
	c.dispatchLocked()
}

// releasePendingLocked gives st's buffer back (sent, or the stream
// closed).
func (c *conn) releasePendingLocked(st *stream) {
	if st.pending == nil {
		return
	}
	c.pendingTotal -= len(st.pending)
	b := st.pending[:0]
	st.pending = nil
	pendingPool.Put(&b)
	c.pendingStreams = removeStream(c.pendingStreams, st)
}
