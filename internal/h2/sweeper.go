package h2

import (
	"sync"
	"time"
)

// sweeper is a process-wide list that one goroutine goes through every
// period, while the list is not empty: visit is called on each item,
// without the list's lock, and the items it keeps stay listed. The
// deferred flushes (deferred.go) and the waits with a deadline
// (deadlines.go) use one each, in place of a timer per request.
type sweeper[T any] struct {
	period time.Duration
	visit  func(item T, now int64) (keep bool) // now: Unix nanoseconds

	mu      sync.Mutex
	items   []T
	spare   []T  // the slice the goroutine went through last
	running bool // the goroutine runs
}

// add lists x and starts the goroutine if it is not running. Callers
// may hold a connection's lock: the goroutine takes one only in visit,
// after it has released s.mu.
func (s *sweeper[T]) add(x T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = append(s.items, x)
	if !s.running {
		s.running = true
		go s.run()
	}
}

// run visits the items every period until a round leaves none.
func (s *sweeper[T]) run() {
	var keep []T
	for {
		time.Sleep(s.period)
		s.mu.Lock()
		items := s.items
		s.items, s.spare = s.spare[:0], nil
		s.mu.Unlock()
		now := time.Now().UnixNano()
		keep = keep[:0]
		for _, x := range items {
			if s.visit(x, now) {
				keep = append(keep, x)
			}
		}
		clear(items)
		s.mu.Lock()
		s.items = append(s.items, keep...)
		s.spare = items[:0]
		if len(s.items) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}
