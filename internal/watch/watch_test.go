package watch

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

// newTestWatcher starts a watcher whose events are applied by Sync alone,
// closed when the test ends; it skips where there are no events for dir.
func newTestWatcher(t *testing.T, dir string) *Watcher {
	t.Helper()
	b, err := NewBackend()
	if err != nil {
		t.Skipf("no file system events here: %v", err)
	}
	if !b.Local(dir) {
		b.Close()
		t.Skip("no file system events for the test's directory")
	}
	w := NewWithBackend(b, zap.NewNop(), NewMetrics(), dir)
	w.StartIdle()
	t.Cleanup(w.Close)
	return w
}

// TestSubGoesStaleOnChangeAndReleasesItsWatches follows one Sub: watched
// with a watch per directory down to its file, stale after a write that
// completed before Sync, and without watches once released.
func TestSubGoesStaleOnChangeAndReleasesItsWatches(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "sub", "a.txt")
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newTestWatcher(t, dir)
	var s, other Sub
	w.Watch(&s, name)
	w.Watch(&other, filepath.Join(dir, "b.txt")) // missing: its creation is an event on dir
	if !s.Watched() || !other.Watched() {
		t.Fatal("paths on a local file system were not watched")
	}
	w.Sync()
	if s.Stale() || other.Stale() {
		t.Fatal("stale before any change")
	}
	if err := os.WriteFile(name, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.Sync()
	if !s.Stale() {
		t.Fatal("a write that completed before Sync did not mark the Sub stale")
	}
	if other.Stale() {
		t.Fatal("a write to another file marked an unrelated Sub stale")
	}
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.Sync()
	if !other.Stale() {
		t.Fatal("creating a missing path did not mark its Sub stale")
	}
	s.Release()
	other.Release()
	if got := testutil.ToFloat64(w.metrics.Watches); got != 0 {
		t.Fatalf("%v watches left after every Sub was released", got)
	}
}

// TestWatchRelativePaths resolves a relative name against the watcher's
// working directory.
func TestWatchRelativePaths(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newTestWatcher(t, dir)
	var s Sub
	w.Watch(&s, "r.txt")
	if err := os.Remove(filepath.Join(dir, "r.txt")); err != nil {
		t.Fatal(err)
	}
	w.Sync()
	if !s.Stale() {
		t.Fatal("deleting a file watched by a relative name did not mark it stale")
	}
	s.Release()
}

// countingBackend counts the reads of the kernel's queue.
type countingBackend struct {
	Backend
	drains atomic.Int64
}

func (b *countingBackend) Drain(events []Event) ([]Event, error) {
	b.drains.Add(1)
	return b.Backend.Drain(events)
}

// TestSyncSince: a lookup as of an instant before the last read of the
// queue began needs no read of its own, and one as of an instant after
// it does, and sees a change completed before that instant.
func TestSyncSince(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(name, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	real, err := NewBackend()
	if err != nil {
		t.Skipf("no file system events here: %v", err)
	}
	if !real.Local(dir) {
		real.Close()
		t.Skip("no file system events for the test's directory")
	}
	b := &countingBackend{Backend: real}
	w := NewWithBackend(b, zap.NewNop(), NewMetrics(), dir)
	w.StartIdle()
	t.Cleanup(w.Close)
	var s Sub
	w.Watch(&s, name)
	defer s.Release()

	arrived := afterTick()
	w.SyncSince(arrived) // no read since it arrived: one now
	w.SyncSince(arrived) // the read just done began after it arrived
	if n := b.drains.Load(); n != 1 {
		t.Fatalf("%d reads of the queue for two lookups of one request; want 1", n)
	}
	if err := os.WriteFile(name, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	later := afterTick() // after the change
	w.SyncSince(later)
	if n := b.drains.Load(); n != 2 || !s.Stale() {
		t.Fatalf("%d reads, stale %v, for a request that arrived after a change; want 2 reads, stale", n, s.Stale())
	}
	w.SyncSince(time.Time{}) // no instant: a read
	if n := b.drains.Load(); n != 3 {
		t.Fatalf("%d reads after a lookup without an instant; want 3", n)
	}
}

// afterTick returns now, once the monotonic clock has moved past it, so
// that what happens next is strictly later on that clock.
func afterTick() time.Time {
	t := time.Now()
	for !time.Now().After(t) {
	}
	return t
}
