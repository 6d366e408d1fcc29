package h2

import (
	"os"
	"time"

	"golang.org/x/net/http2"
)

// A stream's deadlines are kept by one goroutine of the process, which
// looks at the listed connections' streams every deadlineTick while any
// connection is listed: a deadline is kept within that much. A
// connection is listed while one of its open streams has a write
// deadline (WriteTimeout, or the handler's SetWriteDeadline, as Caddy
// sets one around its writes) or a handler waits with a read deadline:
// x/net's write timer runs from the HEADERS until the stream closes,
// whether the handler writes or not. A connection stays listed while it
// serves such streams, so a request costs no listing of its own; a timer
// armed and stopped per request or per wait made the Go runtime rescan
// every timer of the process (see workers.go).

// deadlineTick is how often the listed connections are looked at.
const deadlineTick = 10 * time.Millisecond

// deadlineWatch lists the connections with deadlines to keep.
var deadlineWatch = sweeper[*conn]{period: deadlineTick, visit: (*conn).keepDeadlines}

// The waits of a stream's handler: a body read and a write may wait at
// the same time (a handler that reads the body on one goroutine while it
// writes on another), each until its own deadline.
const (
	readWait = iota
	writeWait
	waitKinds
)

// watchDeadlines lists c on deadlineWatch unless it is listed. It is
// called after a deadline is stored, and needs no lock.
func (c *conn) watchDeadlines() {
	if !c.deadlinesWatched.Load() && c.deadlinesWatched.CompareAndSwap(false, true) {
		deadlineWatch.add(c)
	}
}

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
	st.c.watchDeadlines()
	st.cond.Wait()
	st.waitUntil[kind] = 0
}

// keepDeadlines keeps the deadlines of c's streams (keepDeadlinesLocked)
// and reports whether c stays listed.
func (c *conn) keepDeadlines(now int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		c.deadlinesWatched.Store(false)
		return false
	}
	keep := false
	for _, st := range c.streams {
		if st.keepDeadlinesLocked(now) {
			keep = true
		}
	}
	if keep {
		return true
	}
	// Unlisted, unless a write deadline was set meanwhile. A handler
	// stores its deadline without c.mu, then lists c if it finds c
	// unlisted: one that found c still listed stored its deadline before
	// the flag was cleared, so the look below sees it.
	if hook := c.srv.onNoDeadlineSeen; hook != nil {
		hook(c)
	}
	c.deadlinesWatched.Store(false)
	for _, st := range c.streams {
		if st.writeDeadline.Load() != 0 {
			return c.deadlinesWatched.CompareAndSwap(false, true)
		}
	}
	return false
}

// keepDeadlinesLocked resets st if its write deadline has passed (as
// x/net's timer does: INTERNAL_ERROR, the handler's context cancelled),
// wakes its handler if a wait's deadline has passed, and reports whether
// st has a deadline still to keep.
func (st *stream) keepDeadlinesLocked(now int64) bool {
	keep := false
	if d := st.writeDeadline.Load(); d != 0 {
		if now >= d {
			st.c.resetStreamLocked(st, http2.ErrCodeInternal, os.ErrDeadlineExceeded)
			return false
		}
		keep = true
	}
	for _, d := range st.waitUntil {
		switch {
		case d == 0:
			// not waiting: a later wait lists c again
		case now >= d:
			st.cond.Broadcast() // the other wait, if any, waits again
		default:
			keep = true
		}
	}
	return keep
}
