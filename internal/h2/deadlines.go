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

// The waits of a stream's handler: a body read and a write may wait at
// the same time (a handler that reads the body on one goroutine while it
// writes on another), each until its own deadline.
const (
	readWait = iota
	writeWait
	waitKinds
)

// waitUntilLocked waits on st.cond, and no later than the deadline d
// (Unix nanoseconds; 0: none) give or take deadlineTick; kind is the
// wait's (readWait or writeWait). The caller checks the deadline when it
// wakes.
func (st *stream) waitUntilLocked(kind int, d int64) {
	if d == 0 {
		st.cond.Wait()
		return
	}
	st.waitUntil[kind] = d
	if !st.waitListed {
		st.waitListed = true
		deadlineWaits.add(st)
	}
	st.cond.Wait()
	st.waitUntil[kind] = 0
}

// wakeIfDue wakes st's handler if a wait's deadline has passed, and
// reports whether st stays listed (a wait goes on, before its deadline).
func (st *stream) wakeIfDue(now int64) bool {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	waiting := false
	for _, d := range st.waitUntil {
		switch {
		case d == 0:
			// not waiting: a later wait lists it again
		case now >= d:
			st.cond.Broadcast() // the other wait, if any, waits again
		default:
			waiting = true
		}
	}
	if waiting {
		return true
	}
	st.waitListed = false
	return false
}
