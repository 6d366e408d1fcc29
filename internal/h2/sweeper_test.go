package h2

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestSweeper: items stay listed while visit keeps them, each is
// visited once per period, and the goroutine stops once none is left,
// and starts again for the next item.
func TestSweeper(t *testing.T) {
	var visits [3]atomic.Int32
	s := sweeper[int]{period: time.Millisecond, visit: func(i int, _ int64) bool {
		return visits[i].Add(1) < int32(i+1) // item i is kept for i+1 visits
	}}
	stopped := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.running && len(s.items) == 0
	}
	for round := range 2 {
		for i := range visits {
			visits[i].Store(0)
			s.add(i)
		}
		deadline := time.Now().Add(5 * time.Second)
		for !stopped() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if !stopped() {
			t.Fatalf("round %d: the sweeper still runs", round)
		}
		for i := range visits {
			if n := visits[i].Load(); n != int32(i+1) {
				t.Errorf("round %d: item %d visited %d times, want %d", round, i, n, i+1)
			}
		}
	}
}
