package h2

import (
	"cmp"
	"slices"
	"sync"
)

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

// sendPendingLocked puts what st buffered ahead into the batch, as far as
// the windows and the batch allow, and reports whether it sent anything.
// While others wait in line for the connection (queue.go), only the
// first in line sends.
func (c *conn) sendPendingLocked(st *stream) bool {
	if len(st.pending) == 0 || st.closed || !c.turnLocked(st) {
		return false
	}
	n := min(int64(len(st.pending)), st.sendWindow, c.sendWindow, int64(c.roomLocked()))
	if n <= 0 {
		return false
	}
	sent := int(n)
	c.appendDataLocked(st, st.pending[:sent], false)
	rest := copy(st.pending, st.pending[sent:])
	st.pending = st.pending[:rest]
	c.pendingTotal -= sent
	if rest == 0 {
		c.releasePendingLocked(st)
	}
	st.cond.Broadcast() // the handler may buffer more, or end
	return true
}

// sendAllPendingLocked sends what every stream buffered ahead, as the
// windows allow (after a connection-level WINDOW_UPDATE or a larger
// SETTINGS_INITIAL_WINDOW_SIZE), and writes it.
func (c *conn) sendAllPendingLocked() {
	if len(c.waitq) > 0 {
		// the first in line goes first
		c.wakeQueueLocked()
		return
	}
	sent := false
	// the most urgent first (priority.go), then in the order opened
	streams := slices.SortedFunc(slices.Values(c.pendingStreams), func(a, b *stream) int {
		return cmp.Or(cmp.Compare(a.prio.urgency, b.prio.urgency), cmp.Compare(a.id, b.id))
	})
	for _, st := range streams {
		if c.sendPendingLocked(st) {
			sent = true
		}
	}
	if sent {
		c.flushLocked()
	}
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
	for i, x := range c.pendingStreams {
		if x == st {
			last := len(c.pendingStreams) - 1
			c.pendingStreams[i] = c.pendingStreams[last]
			c.pendingStreams[last] = nil
			c.pendingStreams = c.pendingStreams[:last]
			break
		}
	}
}
