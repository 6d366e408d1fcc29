package h2file

import (
	"context"
	"errors"
	"fmt"
	"io"
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

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// disableFileEventsForTest makes caches created until the returned function
// is called work without file system events, as on platforms without them.
func disableFileEventsForTest() func() {
	fileEventsDisabled.Store(true)
	return func() { fileEventsDisabled.Store(false) }
}

// fileEventsAvailable reports whether caches get file system events for
// files in dir.
func fileEventsAvailable(dir string) bool {
	b, err := newWatchBackend()
	if err != nil {
		return false
	}
	defer b.close()
	return b.local(dir)
}

// newWatchedCache is newTestCache with file system events for osFS, and
// the directory the test works in; it skips where there are no events.
func newWatchedCache(t *testing.T, limits cacheLimits) (*fileCache, *testClock, string) {
	t.Helper()
	dir := t.TempDir()
	if !fileEventsAvailable(dir) {
		t.Skip("no file system events here")
	}
	c, clock := newTestCache(t, limits)
	c.isLocal = func(fs.FS) bool { return true }
	b, err := newWatchBackend()
	if err != nil {
		t.Fatal(err)
	}
	c.watcher.Store(startIdleWatcher(c, b, dir))
	return c, clock, dir
}

// startIdleWatcher makes a watcher on b whose event loop only waits for
// close: events are applied by lookups alone, so that a test sees what
// lookups guarantee without help from the loop.
func startIdleWatcher(c *fileCache, b watchBackend, cwd string) *dirWatcher {
	w := newDirWatcherWith(b, c.logger, c.metrics, cwd)
	go func() {
		defer close(w.done)
		_ = b.wait(func() bool { return w.failed.Load() })
	}()
	return w
}

// inotifyFDs counts this process's inotify descriptors.
func inotifyFDs(t *testing.T) int {
	t.Helper()
	return fdsMatching(t, func(target string) bool { return target == "anon_inode:inotify" })
}

func TestWatchedEntriesNeedNoStatAndSeeChangesAtOnce(t *testing.T) {
	c, clock, dir := newWatchedCache(t, testLimits())
	small := writeFile(t, filepath.Join(dir, "small.txt"), []byte("version-1"))
	big := writeFile(t, filepath.Join(dir, "big.bin"), []byte(strings.Repeat("1", 4096)))
	for _, name := range []string{small, big} {
		if e := mustLookup(t, c, name); e.watcher == nil {
			t.Fatalf("%s: not watched", name)
		}
	}
	clock.Advance(time.Hour)
	for _, name := range []string{small, big} {
		mustLookup(t, c, name)
	}
	if n := testutil.ToFloat64(c.metrics.revalidations); n != 0 {
		t.Fatalf("watched entries were revalidated %v times", n)
	}

	// rewritten in place, size and mtime kept: seen by the very next lookup
	if err := rewriteInPlace(small, "version-2"); err != nil {
		t.Fatal(err)
	}
	if err := rewriteInPlace(big, strings.Repeat("2", 4096)); err != nil {
		t.Fatal(err)
	}
	if got := readEntry(t, c, mustLookup(t, c, small)); string(got) != "version-2" {
		t.Fatalf("small file after rewrite: %q", got)
	}
	if e := mustLookup(t, c, big); !sameFileNow(t, e, big) {
		t.Fatal("big file's entry describes the file before the rewrite")
	}
	if n := testutil.ToFloat64(c.metrics.eventDrops); n < 2 {
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
	return sameFile(e.info, info)
}

func TestWatchSeesChangesThroughOtherPaths(t *testing.T) {
	c, _, dir := newWatchedCache(t, testLimits())
	// a hard link in another directory, written through there
	site := filepath.Join(dir, "site", "page.txt")
	other := filepath.Join(dir, "elsewhere", "page.txt")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	putFile(t, site, release1, deployMode{settled: true})
	if err := os.Link(site, other); err != nil {
		t.Fatal(err)
	}
	// a symbolic link out of the site, whose target's parent moves
	releases := filepath.Join(dir, "releases")
	putFile(t, filepath.Join(releases, "r1", "a.txt"), release1, deployMode{settled: true})
	if err := os.Symlink(filepath.Join(releases, "r1"), filepath.Join(dir, "site", "current")); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "site", "current", "a.txt")

	mustLookup(t, c, site)
	mustLookup(t, c, linked)
	if err := rewriteInPlace(other, release2); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(releases, filepath.Join(dir, "old-releases")); err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(releases, "r1", "a.txt"), release2, deployMode{settled: true})
	for _, name := range []string{site, linked} {
		if got := readEntry(t, c, mustLookup(t, c, name)); string(got) != release2 {
			t.Errorf("%s: got %q after the change, want %q", name, got, release2)
		}
	}
}

func TestWatchSeesMissingPathsCreated(t *testing.T) {
	c, _, dir := newWatchedCache(t, testLimits())
	name := filepath.Join(dir, "a", "b", "c.txt")
	if _, err := c.lookup(osFS{}, "", name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lookup of a missing path: %v", err)
	}
	if e := cached(c, name); e == nil || e.watcher == nil {
		t.Fatal("missing path not cached and watched")
	}
	putFile(t, name, release1, deployMode{settled: true})
	if got := readEntry(t, c, mustLookup(t, c, name)); string(got) != release1 {
		t.Fatalf("created file: %q", got)
	}
}

func TestWatchesAreBoundedAndClosed(t *testing.T) {
	before := inotifyFDs(t)
	limits := testLimits()
	limits.maxFiles = 2
	c, _, dir := newWatchedCache(t, limits)
	for i := range 6 {
		mustLookup(t, c, writeFile(t, filepath.Join(mkdir(t, filepath.Join(dir, strconv.Itoa(i))), "f.txt"), []byte("x")))
	}
	w := c.watcher.Load()
	w.mu.Lock()
	watched := len(w.byWd)
	w.mu.Unlock()
	// two entries: the directories from / down to theirs, and the files
	depth := len(splitPath(dir)) + 1
	if want := depth + 2 + 2; watched != want {
		t.Errorf("%d watches for 2 entries, want %d", watched, want)
	}
	if got := testutil.ToFloat64(c.metrics.watches); int(got) != watched {
		t.Errorf("watches gauge = %v, want %d", got, watched)
	}
	if inotifyFDs(t) != before+1 {
		t.Errorf("inotify descriptors: %d, want %d", inotifyFDs(t), before+1)
	}
	c.close()
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		t.Fatal("event loop still running after close")
	}
	if got := testutil.ToFloat64(c.metrics.watches); got != 0 {
		t.Errorf("watches gauge after close = %v", got)
	}
	if n := inotifyFDs(t); n != before {
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
	a := mustLookup(t, c, writeFile(t, filepath.Join(dir, "a.txt"), []byte("a")))
	b := mustLookup(t, c, writeFile(t, filepath.Join(dir, "b.txt"), []byte("b")))
	w := c.watcher.Load()
	w.mu.Lock()
	w.applyLocked(watchEvent{wd: -1, overflow: true})
	w.mu.Unlock()
	if !a.stale.Load() || !b.stale.Load() {
		t.Fatal("an overflow left entries in use")
	}
	if got := testutil.ToFloat64(c.metrics.eventOverflows); got != 1 {
		t.Fatalf("overflows = %v", got)
	}
	if again := mustLookup(t, c, a.key.name); again == a || again.watcher == nil {
		t.Fatal("after an overflow, the entry must be loaded and watched again")
	}
}

// limitBackend is a watchBackend that is out of watches.
type limitBackend struct {
	closed chan struct{}
	once   sync.Once
}

func (*limitBackend) add(string) (int32, error)                   { return -1, errWatchLimit }
func (*limitBackend) remove(int32)                                {}
func (*limitBackend) drain(ev []watchEvent) ([]watchEvent, error) { return ev, nil }
func (b *limitBackend) wait(func() bool) error                    { <-b.closed; return os.ErrClosed }
func (*limitBackend) local(string) bool                           { return true }
func (b *limitBackend) close() error                              { b.once.Do(func() { close(b.closed) }); return nil }

func TestWatchLimitFallsBackToRevalidation(t *testing.T) {
	c, clock, dir := newWatchedCache(t, testLimits())
	c.watcher.Load().close()
	c.watcher.Store(startIdleWatcher(c, &limitBackend{closed: make(chan struct{})}, dir))
	name := writeFile(t, filepath.Join(dir, "a.txt"), []byte(release1))
	if e := mustLookup(t, c, name); e.watcher != nil {
		t.Fatal("an entry that could not be watched is marked watched")
	}
	if got := testutil.ToFloat64(c.metrics.unwatched); got != 1 {
		t.Fatalf("unwatched = %v", got)
	}
	if err := rewriteInPlace(name, release2); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if got := readEntry(t, c, mustLookup(t, c, name)); string(got) != release2 {
		t.Fatalf("after revalidate: %q (the change time must reveal the rewrite)", got)
	}
}

func TestWatchNeverServesWhatACompletedWriteReplaced(t *testing.T) {
	c, _, dir := newWatchedCache(t, testLimits())
	name := writeFile(t, filepath.Join(dir, "v.txt"), []byte("000000"))
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
				e, err := c.lookup(osFS{}, "", name)
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

// readNoFatal is readEntry for goroutines other than the test's.
func readNoFatal(c *fileCache, e *cacheEntry) ([]byte, error) {
	h := &Handler{cache: c, logger: c.logger}
	rb, _, err := h.openBody(osFS{}, e, nil)
	if err != nil {
		return nil, err
	}
	defer rb.Close()
	return io.ReadAll(rb.reader)
}

func TestReloadRechecksEntries(t *testing.T) {
	c, _, dir := newWatchedCache(t, testLimits())
	name := writeFile(t, filepath.Join(dir, "a.txt"), []byte("a"))
	e := mustLookup(t, c, name)
	c.recheckAll()
	if again := mustLookup(t, c, name); again != e {
		t.Fatal("an unchanged entry must survive the recheck")
	}
	if got := testutil.ToFloat64(c.metrics.revalidations); got != 1 {
		t.Fatalf("revalidations after a reload = %v, want 1", got)
	}

	// through Provision: a second config with the same cache settings
	provision := func() *Handler {
		h := &Handler{Root: dir}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		t.Cleanup(cancel)
		if err := h.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Cleanup() })
		return h
	}
	first := provision()
	gen := first.cache.generation.Load()
	if second := provision(); second.cache != first.cache || second.cache.generation.Load() == gen {
		t.Fatal("a config reusing the cache did not make it recheck its entries")
	}
}
