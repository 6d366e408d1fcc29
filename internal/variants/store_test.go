package variants

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// put makes the variant of version in coding, n bytes of source bytes,
// as a caller that missed it would; false if another caller holds the
// claim or the variant is held.
func put(s *Store, version any, coding string, n int, source int64) bool {
	m, ok := s.Begin(version, coding)
	if ok {
		m.Done(bytes.Repeat([]byte{'x'}, n), source, nil)
	}
	return ok
}

func TestHeldAfterMade(t *testing.T) {
	s := New(Limits{MaxBytes: 1 << 20, MaxVariant: 1 << 20}, nil)
	if _, ok := s.Held("v1", "gzip"); ok {
		t.Fatal("held before it was made")
	}
	m, ok := s.Begin("v1", "gzip")
	if !ok {
		t.Fatal("Begin refused the first claim")
	}
	if _, again := s.Begin("v1", "gzip"); again {
		t.Fatal("a second claim while the first is making it")
	}
	m.Done([]byte("compressed"), 100, nil)
	if data, ok := s.Held("v1", "gzip"); !ok || string(data) != "compressed" {
		t.Fatalf("Held = %q, %v after Done", data, ok)
	}
	if _, again := s.Begin("v1", "gzip"); again {
		t.Fatal("a claim on a variant held")
	}
	put(s, "v1", "zstd", 30, 100)
	want := Stats{Hits: 1, Misses: 1, Made: 2, Held: 2, Bytes: 10 + 30, Saved: (100 - 10) + (100 - 30)}
	if got := s.Stats(); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// TestOneClaimForConcurrentMisses: of the requests that miss a variant at
// the same time, one makes it.
func TestOneClaimForConcurrentMisses(t *testing.T) {
	s := New(Limits{MaxBytes: 1 << 20, MaxVariant: 1 << 20}, nil)
	var claims atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 20 {
		wg.Go(func() {
			<-start
			if _, ok := s.Begin("v", "gzip"); ok {
				claims.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if claims.Load() != 1 {
		t.Errorf("%d claims for 20 concurrent misses, want 1", claims.Load())
	}
}

// TestBudgetDropsLeastRecentlyUsed: variants beyond MaxBytes push out
// the least recently used; one larger than MaxVariant is not kept.
func TestBudgetDropsLeastRecentlyUsed(t *testing.T) {
	s := New(Limits{MaxBytes: 100, MaxVariant: 60}, nil)
	put(s, "a", "gzip", 40, 200)
	put(s, "b", "gzip", 40, 200)
	s.Held("a", "gzip") // a is now the most recently used
	put(s, "c", "gzip", 40, 200)
	if st := s.Stats(); st.Held != 2 || st.Bytes != 80 || st.Dropped != 1 {
		t.Fatalf("after a, b, a, c in 100 bytes: %+v, want 2 held (a, c), 80 bytes, 1 dropped", st)
	}
	for v, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if _, ok := s.Held(v, "gzip"); ok != want {
			t.Errorf("%s held: %v, want %v", v, ok, want)
		}
	}
	put(s, "big", "gzip", 61, 200) // over MaxVariant
	if _, ok := s.Held("big", "gzip"); ok {
		t.Error("a variant over MaxVariant was kept")
	}
	if st := s.Stats(); st.Bytes > 100 {
		t.Errorf("%d bytes held, over the budget of 100", st.Bytes)
	}
}

// TestOversizedIsNotMadeAgain: a variant found over the limits is not
// claimed again for its version, until the version is forgotten.
func TestOversizedIsNotMadeAgain(t *testing.T) {
	s := New(Limits{MaxBytes: 100, MaxVariant: 60}, nil)
	if !put(s, "big", "gzip", 61, 200) {
		t.Fatal("Begin refused the first claim")
	}
	if put(s, "big", "gzip", 61, 200) {
		t.Error("a variant over MaxVariant was claimed again")
	}
	if !put(s, "big", "zstd", 50, 200) {
		t.Error("another coding of the version was refused")
	}
	s.Forget("big")
	if !put(s, "big", "gzip", 61, 200) {
		t.Error("no new claim after Forget")
	}
	s.Close()
	if st := s.Stats(); st.Made != 3 || st.Held != 0 {
		t.Errorf("stats %+v, want 3 made and none held", st)
	}
	if len(s.oversized) != 0 {
		t.Errorf("%d oversized variants remembered after Close", len(s.oversized))
	}
}

// TestForgetDropsEveryCoding: a forgotten version's variants go, their
// bytes leave the budget, and one being made then is not kept.
func TestForgetDropsEveryCoding(t *testing.T) {
	s := New(Limits{MaxBytes: 1 << 20, MaxVariant: 1 << 20}, nil)
	put(s, "old", "gzip", 10, 100)
	put(s, "old", "zstd", 10, 100)
	put(s, "other", "gzip", 10, 100)
	s.Forget("old")
	if st := s.Stats(); st.Held != 1 || st.Bytes != 10 || st.Saved != 90 {
		t.Fatalf("after Forget: %+v, want only the other file's variant", st)
	}
	m, _ := s.Begin("changing", "gzip")
	s.Forget("changing") // the file changed while it was compressed
	m.Done([]byte("from the bytes read"), 100, nil)
	if _, ok := s.Held("changing", "gzip"); ok {
		t.Error("a variant made while its version was forgotten was kept")
	}
	if !put(s, "changing", "gzip", 5, 100) {
		t.Error("no new claim after Forget")
	}
}

func TestFailedMakeKeepsNothing(t *testing.T) {
	s := New(Limits{MaxBytes: 1 << 20, MaxVariant: 1 << 20}, nil)
	m, _ := s.Begin("v", "gzip")
	m.Done(nil, 100, errors.New("read failed"))
	if _, ok := s.Held("v", "gzip"); ok {
		t.Fatal("a failed make was kept")
	}
	if !put(s, "v", "gzip", 5, 100) {
		t.Fatal("no new claim after a failed make")
	}
	if st := s.Stats(); st.Made != 1 || st.Held != 1 {
		t.Errorf("stats %+v: a failed make counted or kept", st)
	}
}

// TestCloseDropsEverything: a closed store holds nothing, keeps nothing
// made afterwards, and gives its bytes back to the shared metrics.
func TestCloseDropsEverything(t *testing.T) {
	m := NewMetrics()
	s := New(Limits{MaxBytes: 1 << 20, MaxVariant: 1 << 20}, m)
	put(s, "a", "gzip", 10, 100)
	late, _ := s.Begin("b", "gzip")
	s.Close()
	late.Done([]byte("made after Close"), 100, nil)
	if st := s.Stats(); st.Held != 0 || st.Bytes != 0 {
		t.Errorf("after Close: %+v, want nothing held", st)
	}
	if got := testutil.ToFloat64(m.MemoryBytes); got != 0 {
		t.Errorf("memory gauge %v after Close, want 0", got)
	}
}
