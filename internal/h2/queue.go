package h2

// Handlers that wait for the connection (its send window, or room in the
// batch) wait in line: the first in line is woken when either frees up,
// and while others wait, each takes at most fairShare bytes a turn and
// goes back to the end of the line. Without the line, the goroutines
// woken together raced for the lock, and a stream could lose that race
// for seconds to others sending large bodies (a 200-byte response reset
// by its 6 s write deadline, with 100 streams on a connection under the
// race detector).

// fairShare is the most a stream sends in one turn while others wait
// for the connection.
const fairShare = 32 << 10

// turnLocked reports whether st may take the connection's window and
// room now: nobody waits ahead of it.
func (c *conn) turnLocked(st *stream) bool {
	return len(c.waitq) == 0 || c.waitq[0] == st
}

// queueLocked puts st at the end of the line, unless it is in it.
func (c *conn) queueLocked(st *stream) {
	if !st.queued {
		st.queued = true
		c.waitq = append(c.waitq, st)
	}
}

// leaveQueueLocked takes st out of the line and wakes the new first.
func (c *conn) leaveQueueLocked(st *stream) {
	if !st.queued {
		return
	}
	st.queued = false
	for i, x := range c.waitq {
		if x == st {
			copy(c.waitq[i:], c.waitq[i+1:])
			c.waitq[len(c.waitq)-1] = nil
			c.waitq = c.waitq[:len(c.waitq)-1]
			break
		}
	}
	c.wakeQueueLocked()
}

// wakeQueueLocked wakes the first in line: the connection's window or
// room may have freed up.
func (c *conn) wakeQueueLocked() {
	if len(c.waitq) > 0 {
		c.waitq[0].cond.Broadcast()
	}
}

// flushIfIdleLocked writes the batch if it holds frames and nobody is
// writing, and reports whether it did.
func (c *conn) flushIfIdleLocked() bool {
	if len(c.batch.buf) == 0 || c.writing() || c.closed {
		return false
	}
	c.flushLocked()
	return true
}
