package h2file

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

// testClock is a clock the test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// osFS is the local file system as Caddy's default one: absolute or
// relative OS paths, not rooted.
type osFS struct{}

func (osFS) Open(name string) (fs.File, error)     { return os.Open(name) }
func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// testLimits are roomy limits; tests shrink what they test.
func testLimits() cacheLimits {
	return cacheLimits{
		maxFiles:     100,
		maxMemory:    1 << 20,
		smallFileMax: 1 << 10,
		revalidate:   time.Second,
		inactive:     time.Hour,
	}
}

// newTestCache makes a cache with its own metrics and a hand-moved clock,
// closed when the test ends.
func newTestCache(t *testing.T, limits cacheLimits) (*fileCache, *testClock) {
	t.Helper()
	clock := &testClock{now: time.Unix(1_700_000_000, 0)}
	c := newFileCache(limits, zap.NewNop(), newCacheMetrics(), clock.Now)
	t.Cleanup(c.close)
	return c, clock
}

// writeFile writes a file and dates it an hour back, so that the cache
// treats it as settled (see settleTime).
func writeFile(t *testing.T, name string, content []byte) string {
	t.Helper()
	if err := os.WriteFile(name, content, 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(name, past, past); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestCacheKeepsRecentFilesOnDisk checks that a small file modified less
// than settleTime ago is read from its descriptor, not copied into memory
// (the copy could be of a write in progress), and copied once settled.
func TestCacheKeepsRecentFilesOnDisk(t *testing.T) {
	name := filepath.Join(t.TempDir(), "fresh.txt")
	if err := os.WriteFile(name, []byte("just written"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, clock := newTestCache(t, testLimits())
	e := mustLookup(t, c, name)
	if e.data != nil || e.file == nil {
		t.Fatal("a file modified just now was copied into memory")
	}
	if got := readEntry(t, c, e); string(got) != "just written" {
		t.Fatalf("read %q", got)
	}
	past := time.Now().Add(-time.Minute)
	os.Chtimes(name, past, past)
	clock.Advance(time.Second)
	if e = mustLookup(t, c, name); e.data == nil {
		t.Fatal("a settled small file was not copied into memory after revalidation")
	}
}

// readEntry reads an entry's whole content as a request would.
func readEntry(t *testing.T, c *fileCache, e *cacheEntry) []byte {
	t.Helper()
	h := &Handler{cache: c, logger: zap.NewNop()}
	rb, _, err := h.openBody(osFS{}, e, nil)
	if err != nil {
		t.Fatalf("openBody(%s): %v", e.key.name, err)
	}
	defer rb.Close()
	data, err := io.ReadAll(rb.reader)
	if err != nil {
		t.Fatalf("reading %s: %v", e.key.name, err)
	}
	return data
}

func mustLookup(t *testing.T, c *fileCache, name string) *cacheEntry {
	t.Helper()
	e, err := c.lookup(osFS{}, "", name)
	if err != nil {
		t.Fatalf("lookup(%s): %v", name, err)
	}
	return e
}

func cached(c *fileCache, name string) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[cacheKey{name: name}]
}

func TestCacheHitNeedsNoFileSystem(t *testing.T) {
	dir := t.TempDir()
	big := writeFile(t, filepath.Join(dir, "big.bin"), bytes.Repeat([]byte("b"), 4096))
	small := writeFile(t, filepath.Join(dir, "small.txt"), []byte("small"))
	c, _ := newTestCache(t, testLimits())

	first := mustLookup(t, c, big)
	if first.file == nil || first.data != nil {
		t.Fatalf("a file above small_file_max must be held open, not in memory: file=%v data=%d", first.file, len(first.data))
	}
	if s := mustLookup(t, c, small); s.data == nil || s.file != nil {
		t.Fatalf("a small file must be held in memory and its descriptor closed")
	}
	// remove the small file from disk: within the revalidate interval, a
	// hit of a file in memory must not touch the file system at all (one
	// held open costs one fstat, which would see the unlink)
	os.Remove(small)
	if again := mustLookup(t, c, big); again != first {
		t.Fatal("second lookup within the interval was not a hit")
	}
	if got := readEntry(t, c, mustLookup(t, c, small)); string(got) != "small" {
		t.Fatalf("in-memory content = %q", got)
	}
	if got := readEntry(t, c, first); len(got) != 4096 {
		t.Fatalf("cached descriptor served %d bytes, want 4096", len(got))
	}
	if hits := testutil.ToFloat64(c.metrics.hits); hits != 2 {
		t.Fatalf("hits = %v, want 2", hits)
	}
	if misses := testutil.ToFloat64(c.metrics.misses); misses != 2 {
		t.Fatalf("misses = %v, want 2", misses)
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	limits := testLimits()
	limits.maxFiles = 3
	limits.smallFileMax = 0 // all held open
	c, _ := newTestCache(t, limits)
	var names []string
	for i := range 4 {
		names = append(names, writeFile(t, filepath.Join(dir, fmt.Sprintf("f%d", i)), []byte{byte(i)}))
	}
	mustLookup(t, c, names[0])
	first := mustLookup(t, c, names[1])
	mustLookup(t, c, names[2])
	mustLookup(t, c, names[0]) // 0 is now more recent than 1
	mustLookup(t, c, names[3]) // evicts 1, the least recently used

	if cached(c, names[1]) != nil {
		t.Fatal("least recently used entry was not evicted")
	}
	for _, n := range []string{names[0], names[2], names[3]} {
		if cached(c, n) == nil {
			t.Fatalf("%s evicted, want it kept", n)
		}
	}
	if _, err := first.file.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("evicted entry's descriptor not closed: %v", err)
	}
	if got := testutil.ToFloat64(c.metrics.openFiles); got != 3 {
		t.Fatalf("open files gauge = %v, want 3", got)
	}
}

func TestCacheMemoryBudget(t *testing.T) {
	dir := t.TempDir()
	limits := testLimits()
	limits.maxMemory = 250
	limits.smallFileMax = 100
	c, _ := newTestCache(t, limits)
	var names []string
	for i := range 5 {
		names = append(names, writeFile(t, filepath.Join(dir, fmt.Sprintf("m%d", i)), bytes.Repeat([]byte{'a' + byte(i)}, 100)))
	}
	for _, n := range names {
		e := mustLookup(t, c, n)
		if got := readEntry(t, c, e); !bytes.Equal(got, bytes.Repeat([]byte{got[0]}, 100)) || len(got) != 100 {
			t.Fatalf("content of %s wrong", n)
		}
	}
	c.mu.Lock()
	mem := c.memBytes
	c.mu.Unlock()
	if mem > limits.maxMemory {
		t.Fatalf("memory held %d > budget %d", mem, limits.maxMemory)
	}
	if mem != 200 {
		t.Fatalf("memory held %d, want the 2 most recent files (200)", mem)
	}
	if got := testutil.ToFloat64(c.metrics.memoryBytes); got != 200 {
		t.Fatalf("memory gauge = %v, want 200", got)
	}

	// max_memory off: small files are held open instead
	limits.maxMemory = 0
	off, _ := newTestCache(t, limits)
	if e := mustLookup(t, off, names[0]); e.data != nil || e.file == nil {
		t.Fatal("with max_memory off, a small file must be held open, not in memory")
	}
}

func TestCacheInactiveEntriesExpire(t *testing.T) {
	dir := t.TempDir()
	limits := testLimits()
	limits.inactive = time.Minute
	limits.smallFileMax = 0
	c, clock := newTestCache(t, limits)
	old := writeFile(t, filepath.Join(dir, "old"), []byte("old"))
	fresh := writeFile(t, filepath.Join(dir, "fresh"), []byte("fresh"))
	oldEntry := mustLookup(t, c, old)
	clock.Advance(40 * time.Second)
	mustLookup(t, c, fresh)
	clock.Advance(30 * time.Second) // old: 70s unused, fresh: 30s
	c.sweep(clock.Now())
	if cached(c, old) != nil {
		t.Fatal("entry unused for longer than inactive was kept")
	}
	if cached(c, fresh) == nil {
		t.Fatal("recently used entry was dropped")
	}
	if _, err := oldEntry.file.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("expired entry's descriptor not closed: %v", err)
	}
}
