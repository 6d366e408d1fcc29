package fdcache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/watch"
)

// newWatchedCache is newTestCache with file system events for osFS, and
// the directory the test works in; it skips where there are no events.
func newWatchedCache(t *testing.T, limits Limits) (*fileCache, *testClock, string) {
	t.Helper()
	dir := t.TempDir()
	if !harness.FileEventsAvailable(dir) {
		t.Skip("no file system events here")
	}
	c, clock := newTestCache(t, limits)
	c.isLocal = func(fs.FS) bool { return true }
	b, err := watch.NewBackend()
	if err != nil {
		t.Fatal(err)
	}
	c.watcher.Store(startIdleWatcher(c, b, dir))
	return c, clock, dir
}

// startIdleWatcher makes a watcher on b whose event loop only waits for
// close: events are applied by lookups alone, so that a test sees what
// lookups guarantee without help from the loop.
func startIdleWatcher(c *fileCache, b watch.Backend, cwd string) *watch.Watcher {
	w := watch.NewWithBackend(b, c.logger, c.metrics.Watch, cwd)
	w.StartIdle()
	return w
}

func TestWatchedEntriesNeedNoStatAndSeeChangesAtOnce(t *testing.T) {
	c, clock, dir := newWatchedCache(t, testLimits())
	small := harness.WriteFile(t, filepath.Join(dir, "small.txt"), []byte("version-1"))
	big := harness.WriteFile(t, filepath.Join(dir, "big.bin"), []byte(strings.Repeat("1", 4096)))
	for _, name := range []string{small, big} {
		if e := mustLookup(t, c, name); !e.sub.Watched() {
			t.Fatalf("%s: not watched", name)
		}
	}
	clock.Advance(time.Hour)
	for _, name := range []string{small, big} {
		mustLookup(t, c, name)
	}
	if n := testutil.ToFloat64(c.metrics.Revalidations); n != 0 {
		t.Fatalf("watched entries were revalidated %v times", n)
	}

	// rewritten in place, size and mtime kept: seen by the very next lookup
	if err := harness.RewriteInPlace(small, "version-2"); err != nil {
		t.Fatal(err)
	}
	if err := harness.RewriteInPlace(big, strings.Repeat("2", 4096)); err != nil {
		t.Fatal(err)
	}
	if got := readEntry(t, c, mustLookup(t, c, small)); string(got) != "version-2" {
		t.Fatalf("small file after rewrite: %q", got)
	}
	if e := mustLookup(t, c, big); !sameFileNow(t, e, big) {
		t.Fatal("big file's entry describes the file before the rewrite")
	}
	if n := testutil.ToFloat64(c.metrics.Watch.EventDrops); n < 2 {
		t.Fatalf("event drops = %v, want at least 2", n)
	}
}

// sameFileNow reports whether e describes name as it is now.
func sameFileNow(t *testing.T, e *cacheEntry, name string) bool {
	t.Helper()
	info, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return SameFile(e.info, info)
}

func TestWatchSeesChangesThroughOtherPaths(t *testing.T) {
	c, _, dir := newWatchedCache(t, testLimits())
	// a hard link in another directory, written through there
	site := filepath.Join(dir, "site", "page.txt")
	other := filepath.Join(dir, "elsewhere", "page.txt")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	harness.WriteFile(t, site, []byte(version1))
	if err := os.Link(site, other); err != nil {
		t.Fatal(err)
	}
	// a symbolic link out of the site, whose target's parent moves
	releases := filepath.Join(dir, "releases")
	harness.WriteFile(t, filepath.Join(releases, "r1", "a.txt"), []byte(version1))
	if err := os.Symlink(filepath.Join(releases, "r1"), filepath.Join(dir, "site", "current")); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "site", "current", "a.txt")

	mustLookup(t, c, site)
	mustLookup(t, c, linked)
	if err := harness.RewriteInPlace(other, version2); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(releases, filepath.Join(dir, "old-releases")); err != nil {
		t.Fatal(err)
	}
	harness.WriteFile(t, filepath.Join(releases, "r1", "a.txt"), []byte(version2))
	for _, name := range []string{site, linked} {
		if got := readEntry(t, c, mustLookup(t, c, name)); string(got) != version2 {
			t.Errorf("%s: got %q after the change, want %q", name, got, version2)
		}
	}
}

func TestWatchSeesMissingPathsCreated(t *testing.T) {
	c, _, dir := newWatchedCache(t, testLimits())
	name := filepath.Join(dir, "a", "b", "c.txt")
	if _, err := c.Lookup(harness.OSFS{}, "", name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lookup of a missing path: %v", err)
	}
	if e := cached(c, name); e == nil || !e.sub.Watched() {
		t.Fatal("missing path not cached and watched")
	}
	harness.WriteFile(t, name, []byte(version1))
	if got := readEntry(t, c, mustLookup(t, c, name)); string(got) != version1 {
		t.Fatalf("created file: %q", got)
	}
}

func TestWatchesAreBoundedAndClosed(t *testing.T) {
	before := harness.InotifyFDs(t)
	limits := testLimits()
	limits.MaxFiles = 2
	c, _, dir := newWatchedCache(t, limits)
	for i := range 6 {
		mustLookup(t, c, harness.WriteFile(t, filepath.Join(mkdir(t, filepath.Join(dir, strconv.Itoa(i))), "f.txt"), []byte("x")))
	}
	// two entries: the directories from / down to theirs, and the files
	depth := len(strings.FieldsFunc(filepath.ToSlash(dir), func(r rune) bool { return r == '/' })) + 1
	if want := depth + 2 + 2; testutil.ToFloat64(c.metrics.Watch.Watches) != float64(want) {
		t.Errorf("%v watches for 2 entries, want %d", testutil.ToFloat64(c.metrics.Watch.Watches), want)
	}
	if harness.InotifyFDs(t) != before+1 {
		t.Errorf("inotify descriptors: %d, want %d", harness.InotifyFDs(t), before+1)
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed: // Close waits for the event loop to return
	case <-time.After(10 * time.Second):
		t.Fatal("event loop still running after close")
	}
	if got := testutil.ToFloat64(c.metrics.Watch.Watches); got != 0 {
		t.Errorf("watches gauge after close = %v", got)
	}
	if n := harness.InotifyFDs(t); n != before {
		t.Errorf("inotify descriptors after close: %d, want %d", n, before)
	}
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWatchOverflowDropsEverything(t *testing.T) {
	c, _, dir := newWatchedCache(t, testLimits())
	a := mustLookup(t, c, harness.WriteFile(t, filepath.Join(dir, "a.txt"), []byte("a")))
	b := mustLookup(t, c, harness.WriteFile(t, filepath.Join(dir, "b.txt"), []byte("b")))
	c.watcher.Load().Close()
	b2, err := watch.NewBackend()
	if err != nil {
		t.Fatal(err)
	}
	overflow := &injectBackend{Backend: b2}
	c.watcher.Store(startIdleWatcher(c, overflow, dir))
	a = mustLookup(t, c, a.key.name)
	b = mustLookup(t, c, b.key.name)
	overflow.inject(watch.Event{WD: -1, Overflow: true})
	c.watcher.Load().Sync()
	if !a.sub.Stale() || !b.sub.Stale() {
		t.Fatal("an overflow left entries in use")
	}
	if got := testutil.ToFloat64(c.metrics.Watch.EventOverflows); got != 1 {
		t.Fatalf("overflows = %v", got)
	}
	if again := mustLookup(t, c, a.key.name); again == a || !again.sub.Watched() {
		t.Fatal("after an overflow, the entry must be loaded and watched again")
	}
}

// injectBackend is a Backend that also reports the events a test injects.
type injectBackend struct {
	watch.Backend
	mu       sync.Mutex
	injected []watch.Event
}

func (b *injectBackend) inject(ev watch.Event) {
	b.mu.Lock()
	b.injected = append(b.injected, ev)
	b.mu.Unlock()
}

func (b *injectBackend) Drain(events []watch.Event) ([]watch.Event, error) {
	events, err := b.Backend.Drain(events)
	b.mu.Lock()
	events = append(events, b.injected...)
	b.injected = nil
	b.mu.Unlock()
	return events, err
}

// limitBackend is a watch.Backend that is out of watches.
type limitBackend struct {
	closed chan struct{}
	once   sync.Once
}

func (*limitBackend) Add(string) (int32, error)                     { return -1, watch.ErrWatchLimit }
func (*limitBackend) Remove(int32)                                  {}
func (*limitBackend) Drain(ev []watch.Event) ([]watch.Event, error) { return ev, nil }
func (b *limitBackend) Wait(func() bool) error                      { <-b.closed; return os.ErrClosed }
func (*limitBackend) Local(string) bool                             { return true }
func (b *limitBackend) Close() error                                { b.once.Do(func() { close(b.closed) }); return nil }

func TestWatchLimitFallsBackToRevalidation(t *testing.T) {
	c, clock, dir := newWatchedCache(t, testLimits())
	c.watcher.Load().Close()
	c.watcher.Store(startIdleWatcher(c, &limitBackend{closed: make(chan struct{})}, dir))
	name := harness.WriteFile(t, filepath.Join(dir, "a.txt"), []byte(version1))
	if e := mustLookup(t, c, name); e.sub.Watched() {
		t.Fatal("an entry that could not be watched is marked watched")
	}
	if got := testutil.ToFloat64(c.metrics.Watch.Unwatched); got != 1 {
		t.Fatalf("unwatched = %v", got)
	}
	if err := harness.RewriteInPlace(name, version2); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if got := readEntry(t, c, mustLookup(t, c, name)); string(got) != version2 {
		t.Fatalf("after Revalidate: %q (the change time must reveal the rewrite)", got)
	}
}

// TestWatchNeverServesWhatACompletedWriteReplaced: a lookup that begins
// after a write completed never gets what the write replaced; nor does a
// LookupSince for a request that arrived after it, though it shares the
// reads of the event queue that other lookups began after its arrival.
func TestWatchNeverServesWhatACompletedWriteReplaced(t *testing.T) {
	for _, lookup := range []struct {
		name string
		do   func(c *fileCache, name string) (*cacheEntry, error)
	}{
		{"Lookup", func(c *fileCache, name string) (*cacheEntry, error) { return c.Lookup(harness.OSFS{}, "", name) }},
		{"LookupSince", func(c *fileCache, name string) (*cacheEntry, error) {
			return c.LookupSince(time.Now(), harness.OSFS{}, "", name)
		}},
	} {
		t.Run(lookup.name, func(t *testing.T) { testNeverServesReplaced(t, lookup.do) })
	}
}

func testNeverServesReplaced(t *testing.T, lookup func(c *fileCache, name string) (*cacheEntry, error)) {
	c, _, dir := newWatchedCache(t, testLimits())
	name := harness.WriteFile(t, filepath.Join(dir, "v.txt"), []byte("000000"))
	mtime := time.Now().Add(-time.Hour)
	var written, lookups atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		// each version is written beside the file, dated an hour back (so
		// that the cache holds it in memory) and renamed over it
		tmp := filepath.Join(dir, ".v.txt")
		for i := int64(1); i <= 100; i++ {
			if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%06d", i)), 0o644); err != nil {
				t.Error(err)
				return
			}
			if err := os.Chtimes(tmp, mtime, mtime); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, name); err != nil {
				t.Error(err)
				return
			}
			written.Store(i)
			// let the readers look it up a few times before the next write
			for seen := lookups.Load(); lookups.Load() < seen+8; {
				runtime.Gosched()
			}
		}
	}()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				floor := written.Load()
				e, err := lookup(c, name)
				if err != nil {
					t.Error(err)
					return
				}
				lookups.Add(1)
				content, err := readNoFatal(c, e)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := strconv.ParseInt(string(content), 10, 64)
				if err == nil && got < floor {
					t.Errorf("served version %d after version %d was written", got, floor)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestReloadRechecksEntries(t *testing.T) {
	c, _, dir := newWatchedCache(t, testLimits())
	name := harness.WriteFile(t, filepath.Join(dir, "a.txt"), []byte("a"))
	e := mustLookup(t, c, name)
	c.RecheckAll()
	if again := mustLookup(t, c, name); again != e {
		t.Fatal("an unchanged entry must survive the recheck")
	}
	if got := testutil.ToFloat64(c.metrics.Revalidations); got != 1 {
		t.Fatalf("revalidations after a reload = %v, want 1", got)
	}

}
