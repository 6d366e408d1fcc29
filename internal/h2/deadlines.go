package h2

import (
	"sync"
	"time"
)

// A handler that waits with a deadline (a write waiting for the window or
// its turn, a body read waiting for DATA) is woken at the deadline by one
// goroutine of the process, which looks at the listed waits every
// deadlineTick while any is listed: a deadline is kept within that much.
// A timer armed and stopped per wait (per write of a busy stream, as
// Caddy sets a write deadline for each chunk) made the Go runtime rescan
// every timer of the process (see workers.go).

// deadlineTick is how often waits with a deadline are looked at.
const deadlineTick = 10 * time.Millisecond

// deadlineWaits is the process's list of streams that wait, or waited
// since the last tick, with a deadline.
var deadlineWaits waitList

type waitList struct {
	mu      sync.Mutex
	streams []*stream
	running bool // the watcher runs
}

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

// add lists st (its waitListed is set) and starts the watcher if it is
// not running. It is called with st.c.mu held; the watcher takes a
// connection's lock only after it has released l.mu.
func (l *waitList) add(st *stream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.streams = append(l.streams, st)
	if !l.running {
		l.running = true
		go l.run()
	}
}

// run wakes, every deadlineTick, the listed waits whose deadline has
// passed, and drops from the list the streams no longer waiting, until
// the list is empty.
func (l *waitList) run() {
	var keep []*stream
	for {
		time.Sleep(deadlineTick)
		l.mu.Lock()
		streams := l.streams
		l.streams = nil
		l.mu.Unlock()
		now := time.Now().UnixNano()
		keep = keep[:0]
		for _, st := range streams {
			if st.wakeIfDue(now) {
				keep = append(keep, st)
			}
		}
		clear(streams)
		l.mu.Lock()
		l.streams = append(l.streams, keep...)
		if len(l.streams) == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
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
