package fdcache

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

	"github.com/h2file/caddy-h2file/internal/harness"
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

// testLimits are roomy limits; tests shrink what they test.
func testLimits() Limits {
	return Limits{
		MaxFiles:     100,
		MaxMemory:    1 << 20,
		SmallFileMax: 1 << 10,
		Revalidate:   time.Second,
		Inactive:     time.Hour,
	}
}

// testMeta is the metadata the tests' caches keep: what Describe saw.
type testMeta struct {
	name string
	size int64
}

// fileCache and cacheEntry are the tests' cache and entry types.
type (
	fileCache  = Cache[testMeta]
	cacheEntry = Entry[testMeta]
)

// newTestCache makes a cache with its own metrics and a hand-moved clock,
// closed when the test ends. No file system counts as local: a test that
// wants events sets isLocal (see newWatchedCache).
func newTestCache(t *testing.T, limits Limits) (*fileCache, *testClock) {
	t.Helper()
	clock := &testClock{now: time.Unix(1_700_000_000, 0)}
	c := New(limits, Options[testMeta]{
		Describe: func(name string, info fs.FileInfo) testMeta { return testMeta{name: name, size: info.Size()} },
		Logger:   zap.NewNop(),
		Metrics:  NewMetrics(),
		Now:      clock.Now,
	})
	t.Cleanup(c.Close)
	return c, clock
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

// readNoFatal reads an entry's whole content as a request would: through a
// handle, or from the file opened again when the cache holds no content.
func readNoFatal(c *fileCache, e *cacheEntry) ([]byte, error) {
	h, ok := e.Open()
	if !ok {
		return os.ReadFile(e.key.name)
	}
	defer h.Close()
	return io.ReadAll(io.NewSectionReader(&h, 0, h.Size()))
}

// readEntry reads an entry's whole content as a request would.
func readEntry(t *testing.T, c *fileCache, e *cacheEntry) []byte {
	t.Helper()
	data, err := readNoFatal(c, e)
	if err != nil {
		t.Fatalf("reading %s: %v", e.key.name, err)
	}
	return data
}

func mustLookup(t *testing.T, c *fileCache, name string) *cacheEntry {
	t.Helper()
	e, err := c.Lookup(harness.OSFS{}, "", name)
	if err != nil {
		t.Fatalf("lookup(%s): %v", name, err)
	}
	return e
}

func cached(c *fileCache, name string) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[key{name: name}]
}

func TestCacheHitNeedsNoFileSystem(t *testing.T) {
	dir := t.TempDir()
	big := harness.WriteFile(t, filepath.Join(dir, "big.bin"), bytes.Repeat([]byte("b"), 4096))
	small := harness.WriteFile(t, filepath.Join(dir, "small.txt"), []byte("small"))
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
	if hits := testutil.ToFloat64(c.metrics.Hits); hits != 2 {
		t.Fatalf("hits = %v, want 2", hits)
	}
	if misses := testutil.ToFloat64(c.metrics.Misses); misses != 2 {
		t.Fatalf("misses = %v, want 2", misses)
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	limits := testLimits()
	limits.MaxFiles = 3
	limits.SmallFileMax = 0 // all held open
	c, _ := newTestCache(t, limits)
	var names []string
	for i := range 4 {
		names = append(names, harness.WriteFile(t, filepath.Join(dir, fmt.Sprintf("f%d", i)), []byte{byte(i)}))
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
	if got := testutil.ToFloat64(c.metrics.OpenFiles); got != 3 {
		t.Fatalf("open files gauge = %v, want 3", got)
	}
}

func TestCacheMemoryBudget(t *testing.T) {
	dir := t.TempDir()
	limits := testLimits()
	limits.MaxMemory = 250
	limits.SmallFileMax = 100
	c, _ := newTestCache(t, limits)
	var names []string
	for i := range 5 {
		names = append(names, harness.WriteFile(t, filepath.Join(dir, fmt.Sprintf("m%d", i)), bytes.Repeat([]byte{'a' + byte(i)}, 100)))
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
	if mem > limits.MaxMemory {
		t.Fatalf("memory held %d > budget %d", mem, limits.MaxMemory)
	}
	if mem != 200 {
		t.Fatalf("memory held %d, want the 2 most recent files (200)", mem)
	}
	if got := testutil.ToFloat64(c.metrics.MemoryBytes); got != 200 {
		t.Fatalf("memory gauge = %v, want 200", got)
	}

	// max_memory off: small files are held open instead
	limits.MaxMemory = 0
	off, _ := newTestCache(t, limits)
	if e := mustLookup(t, off, names[0]); e.data != nil || e.file == nil {
		t.Fatal("with max_memory off, a small file must be held open, not in memory")
	}
}

func TestCacheInactiveEntriesExpire(t *testing.T) {
	dir := t.TempDir()
	limits := testLimits()
	limits.Inactive = time.Minute
	limits.SmallFileMax = 0
	c, clock := newTestCache(t, limits)
	old := harness.WriteFile(t, filepath.Join(dir, "old"), []byte("old"))
	fresh := harness.WriteFile(t, filepath.Join(dir, "fresh"), []byte("fresh"))
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
