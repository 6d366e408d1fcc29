package h2

// Handlers that wait for the connection (its send window, or room in the
// batch) wait in line: the first in line is woken when either frees up,
// and while others wait, each takes at most fairShare bytes a turn and
// goes back in line. Without the line, the goroutines woken together
// raced for the lock, and a stream could lose that race for seconds to
// others sending large bodies (a 200-byte response reset by its 6 s write
// deadline, with 100 streams on a connection under the race detector).
//
// Who is first follows the streams' RFC 9218 priorities (priority.go), as
// x/net's default write scheduler orders its frames: the lowest urgency
// first; within it, the non-incremental stream opened first and the
// incremental stream that waited longest take turns with each other.

// fairShare is the most a stream sends in one turn while others wait
// for the connection.
const fairShare = 32 << 10

// turnLocked reports whether st may take the connection's window and
// room now: nobody waits ahead of it.
func (c *conn) turnLocked(st *stream) bool {
	return len(c.waitq) == 0 || c.first == st
}

// queueLocked puts st in line, unless it is in it, and reports whether
// it has just been put first (its priority may put it ahead of those
// waiting): then it should try again instead of waiting to be woken.
func (c *conn) queueLocked(st *stream) (first bool) {
	if st.queued {
		return false
	}
	st.queued = true
	c.queueSeq++
	st.queuedAt = c.queueSeq
	c.waitq = append(c.waitq, st)
	c.pickFirstLocked()
	return c.first == st
}

// leaveQueueLocked takes st out of the line and wakes the new first.
// When st was first, its turn is over: the other kind of stream (of
// incremental and non-incremental) goes first next time, at one urgency.
func (c *conn) leaveQueueLocked(st *stream) {
	if !st.queued {
		return
	}
	st.queued = false
	if c.first == st {
		c.incrementalNext = !c.incrementalNext
	}
	c.waitq = removeStream(c.waitq, st)
	c.pickFirstLocked()
	c.dispatchLocked()
}

// turnTakenLocked ends st's turn at the connection. A stream with more
// to send goes back in line at once, in its priority's place, so that a
// less urgent one does not take the window while st writes the batch
// (the lock is released during the write).
func (c *conn) turnTakenLocked(st *stream, more bool) {
	c.leaveQueueLocked(st)
	if more && len(c.waitq) > 0 {
		c.queueLocked(st)
	}
}

// pickFirstLocked finds who is first in line.
func (c *conn) pickFirstLocked() {
	var incremental, sequential *stream
	for _, st := range c.waitq {
		if st.prio.incremental {
			if incremental == nil || st.prio.urgency < incremental.prio.urgency ||
				(st.prio.urgency == incremental.prio.urgency && st.queuedAt < incremental.queuedAt) {
				incremental = st
			}
		} else if sequential == nil || st.prio.urgency < sequential.prio.urgency ||
			(st.prio.urgency == sequential.prio.urgency && st.id < sequential.id) {
			sequential = st
		}
	}
	switch {
	case incremental == nil:
		c.first = sequential
	case sequential == nil:
		c.first = incremental
	case incremental.prio.urgency < sequential.prio.urgency:
		c.first = incremental
	case sequential.prio.urgency < incremental.prio.urgency:
		c.first = sequential
	case c.incrementalNext:
		c.first = incremental
	default:
		c.first = sequential
	}
}

// dispatchLocked gives the first in line its turn, as the connection's
// window or room may have freed up: a handler waiting in writeBody is
// woken and takes it; for a stream whose handler is not writing, what it
// buffered ahead is sent from here, and the line goes on to the next
// while the first can send. What it puts into the batch is written by
// the goroutine writing now, or by one of its own (kickLocked).
func (c *conn) dispatchLocked() {
	if c.dispatching {
		return // the loop below goes on with the new first
	}
	c.dispatching = true
	sent := false
	for st := c.first; st != nil; st = c.first {
		if st.writing {
			st.cond.Broadcast()
			break
		}
		if !c.sendPendingLocked(st) && c.first == st {
			break // it waits for the connection's window or room
		}
		sent = true
	}
	c.dispatching = false
	if sent {
		c.kickLocked()
	}
}

// removeStream removes st from list, not keeping the order.
func removeStream(list []*stream, st *stream) []*stream {
	for i, x := range list {
		if x == st {
			last := len(list) - 1
			list[i] = list[last]
			list[last] = nil
			return list[:last]
		}
	}
	return list
}

// flushIfIdleLocked writes the batch if it holds frames and nobody is
// writing, and reports whether it did.
func (c *conn) flushIfIdleLocked() bool {
	if len(c.batch.buf) == 0 || c.inWrite || c.closed {
		return false
	}
	c.flushLocked()
	return true
}
