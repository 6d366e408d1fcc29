package h2

import "time"

// A handler that waits with a deadline (a write waiting for the window or
// its turn, a body read waiting for DATA) is woken at the deadline by one
// goroutine of the process, which looks at the listed waits every
// deadlineTick while any is listed: a deadline is kept within that much.
// A timer armed and stopped per wait (per write of a busy stream, as
// Caddy sets a write deadline for each chunk) made the Go runtime rescan
// every timer of the process (see workers.go).

// deadlineTick is how often waits with a deadline are looked at.
const deadlineTick = 10 * time.Millisecond

// deadlineWaits lists the streams that wait, or waited since the last
// tick, with a deadline.
var deadlineWaits = sweeper[*stream]{period: deadlineTick, visit: (*stream).wakeIfDue}

// waitUntilLocked waits on st.cond, and no later than the deadline d
// (Unix nanoseconds; 0: none) give or take deadlineTick. The caller
// checks the deadline when it wakes.
func (st *stream) waitUntilLocked(d int64) {
	if d == 0 {
		st.cond.Wait()
		return
	}
	st.waitUntil = d
	if !st.waitListed {
		st.waitListed = true
		deadlineWaits.add(st)
	}
	st.cond.Wait()
	st.waitUntil = 0
}

// wakeIfDue wakes st's handler if its wait's deadline has passed, and
// reports whether st stays listed (it still waits, before its deadline).
func (st *stream) wakeIfDue(now int64) bool {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case st.waitUntil == 0:
		// not waiting: a later wait lists it again
	case now >= st.waitUntil:
		st.cond.Broadcast()
	default:
		return true
	}
	st.waitListed = false
	return false
}
