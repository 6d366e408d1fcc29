package watch

import (
	"os"
	"path/filepath"
	"testing"

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
