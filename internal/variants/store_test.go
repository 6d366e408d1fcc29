package variants

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// produced returns a produce func that makes n bytes of b and counts its
// calls in calls.
func produced(b byte, n int, calls *atomic.Int64) func() ([]byte, error) {
	return func() ([]byte, error) {
		calls.Add(1)
		return bytes.Repeat([]byte{b}, n), nil
	}
}

func TestGetMakesOnceThenHits(t *testing.T) {
	s := New(Limits{MaxBytes: 1 << 20, MaxVariant: 1 << 20}, nil)
	var calls atomic.Int64
	for i := range 3 {
		data, err := s.Get("v1", "gzip", 100, produced('g', 40, &calls))
		if err != nil || len(data) != 40 || data[0] != 'g' {
			t.Fatalf("Get %d = %q, %v", i, data, err)
		}
	}
	if _, err := s.Get("v1", "zstd", 100, produced('z', 30, &calls)); err != nil {
		t.Fatal(err)
	}
	want := Stats{Hits: 2, Misses: 2, Made: 2, Held: 2, Bytes: 70, Saved: (100 - 40) + (100 - 30)}
	if got := s.Stats(); got != want || calls.Load() != 2 {
		t.Errorf("stats %+v after %d calls to produce, want %+v after 2", got, calls.Load(), want)
	}
}

// TestConcurrentMissesMakeOnce: requests that find a variant missing at
// the same time wait for the one that makes it, and all get its bytes.
func TestConcurrentMissesMakeOnce(t *testing.T) {
	s := New(Limits{MaxBytes: 1 << 20, MaxVariant: 1 << 20}, nil)
	release := make(chan struct{})
	var calls atomic.Int64
	produce := func() ([]byte, error) {
		calls.Add(1)
		<-release
		return []byte("compressed"), nil
	}
	const n = 20
	results := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			data, err := s.Get("v", "gzip", 1000, produce)
			if err != nil {
				t.Error(err)
			}
			results[i] = data
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Misses < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if calls.Load() != 1 {
		t.Errorf("produce called %d times for %d concurrent misses, want once", calls.Load(), n)
	}
	for i, r := range results {
		if string(r) != "compressed" {
			t.Errorf("request %d got %q", i, r)
		}
	}
}

// TestBudgetDropsLeastRecentlyUsed: variants beyond MaxBytes push out
// the least recently used; one larger than MaxVariant is served, not kept.
func TestBudgetDropsLeastRecentlyUsed(t *testing.T) {
	s := New(Limits{MaxBytes: 100, MaxVariant: 60}, nil)
	var calls atomic.Int64
	get := func(version string, n int) {
		t.Helper()
		if data, err := s.Get(version, "gzip", 200, produced('x', n, &calls)); err != nil || len(data) != n {
			t.Fatalf("Get(%s) = %d bytes, %v; want %d", version, len(data), err, n)
		}
	}
	get("a", 40)
	get("b", 40)
	get("a", 40) // a is now the most recently used
	get("c", 40) // pushes out b
	if st := s.Stats(); st.Held != 2 || st.Bytes != 80 || st.Dropped != 1 {
		t.Fatalf("after a, b, a, c in 100 bytes: %+v, want 2 held (a, c), 80 bytes, 1 dropped", st)
	}
	before := calls.Load()
	get("a", 40)
	get("c", 40)
	if calls.Load() != before {
		t.Error("a or c was made again: the budget dropped the wrong one")
	}
	get("b", 40)
	if calls.Load() != before+1 {
		t.Error("b was still held")
	}
	get("big", 61) // over MaxVariant
	get("big", 61)
	if st := s.Stats(); st.Bytes > 100 || calls.Load() != before+3 {
		t.Errorf("a variant over MaxVariant: %+v, %d makes; want it made each time and never held", st, calls.Load()-before)
	}
}

// TestForgetDropsEveryCoding: a forgotten version's variants go, their
// bytes leave the budget, and one being made then is not kept.
func TestForgetDropsEveryCoding(t *testing.T) {
	s := New(Limits{MaxBytes: 1 << 20, MaxVariant: 1 << 20}, nil)
	var calls atomic.Int64
	s.Get("old", "gzip", 100, produced('g', 10, &calls))
	s.Get("old", "zstd", 100, produced('z', 10, &calls))
	s.Get("other", "gzip", 100, produced('o', 10, &calls))
	s.Forget("old")
	if st := s.Stats(); st.Held != 1 || st.Bytes != 10 || st.Saved != 90 {
		t.Fatalf("after Forget: %+v, want only the other file's variant", st)
	}

	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan []byte)
	go func() {
		data, _ := s.Get("changing", "gzip", 100, func() ([]byte, error) {
			close(started)
			<-release
			return []byte("from the bytes read"), nil
		})
		done <- data
	}()
	<-started
	s.Forget("changing") // the file changed while it was compressed
	close(release)
	if data := <-done; string(data) != "from the bytes read" {
		t.Errorf("the request that made it got %q", data)
	}
	s.Get("changing", "gzip", 100, produced('n', 10, &calls))
	if calls.Load() != 4 {
		t.Error("a variant made while its version was forgotten was kept")
	}
}

func TestProduceErrorKeepsNothing(t *testing.T) {
	s := New(Limits{MaxBytes: 1 << 20, MaxVariant: 1 << 20}, nil)
	boom := errors.New("read failed")
	if _, err := s.Get("v", "gzip", 100, func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want %v", err, boom)
	}
	var calls atomic.Int64
	if data, err := s.Get("v", "gzip", 100, produced('g', 5, &calls)); err != nil || len(data) != 5 || calls.Load() != 1 {
		t.Errorf("after a failed make: %q, %v, %d makes; want it made anew", data, err, calls.Load())
	}
	if st := s.Stats(); st.Made != 1 || st.Held != 1 {
		t.Errorf("stats %+v: a failed make counted or kept", st)
	}
}
