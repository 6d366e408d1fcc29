package fdcache

// Cache tests: revalidation after files are renamed over or changed in
// place (the fixture is in cache_test.go).

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

	"github.com/h2file/caddy-h2file/internal/harness"
)

func TestCacheRevalidatesAfterRenameOver(t *testing.T) {
	dir := t.TempDir()
	name := harness.WriteFile(t, filepath.Join(dir, "app.js"), []byte("version one"))
	limits := testLimits()
	limits.SmallFileMax = 0 // exercise the descriptor, not memory
	c, _ := newTestCache(t, limits)
	v1 := mustLookup(t, c, name)

	// an atomic deploy: same size, mtime forced equal, new inode
	tmp := harness.WriteFile(t, filepath.Join(dir, ".app.js.tmp"), []byte("version two"))
	mtime := v1.info.ModTime()
	os.Chtimes(tmp, mtime, mtime)
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}

	// a request streaming the old file keeps consistent old bytes
	inFlight, ok := v1.Open()
	if !ok {
		t.Fatal("no handle on a cached descriptor")
	}
	// the old file's change time moved when it was unlinked: the fstat of
	// its descriptor sees it at once, without waiting for revalidate
	v2 := mustLookup(t, c, name)
	if v2 == v1 {
		t.Fatal("a file renamed over the cached one was not noticed")
	}
	if got := readEntry(t, c, v2); string(got) != "version two" {
		t.Fatalf("after revalidation got %q", got)
	}
	if got, _ := io.ReadAll(io.NewSectionReader(&inFlight, 0, inFlight.Size())); string(got) != "version one" {
		t.Fatalf("in-flight response read %q, want the old bytes", got)
	}
	if _, err := v1.file.ReadAt(make([]byte, 1), 0); err != nil {
		t.Fatalf("old descriptor closed under a running request: %v", err)
	}
	inFlight.Close()
	if _, err := v1.file.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("old descriptor not closed after its last request: %v", err)
	}
	if got := testutil.ToFloat64(c.metrics.Revalidations); got != 0 {
		t.Fatalf("revalidations = %v, want 0 (the fstat decided)", got)
	}
}

func TestCacheRevalidatesInPlaceChanges(t *testing.T) {
	dir := t.TempDir()
	c, clock := newTestCache(t, testLimits())
	name := harness.WriteFile(t, filepath.Join(dir, "page.html"), []byte("before"))
	mustLookup(t, c, name)

	cases := []struct {
		desc   string
		change func()
		check  func(*cacheEntry, error)
	}{
		{"rewrite in place (new size)", func() { harness.WriteFile(t, name, []byte("after, longer")) }, func(e *cacheEntry, err error) {
			if err != nil || string(readEntry(t, c, e)) != "after, longer" {
				t.Fatalf("rewrite not seen: %v", err)
			}
		}},
		{"touch (new mtime)", func() {
			future := time.Now().Add(time.Hour)
			os.Chtimes(name, future, future)
		}, func(e *cacheEntry, err error) {
			if err != nil || e.info.ModTime().Before(time.Now()) {
				t.Fatalf("new mtime not seen: %v", err)
			}
		}},
		{"permission change", func() { os.Chmod(name, 0o600) }, func(e *cacheEntry, err error) {
			if err != nil || e.info.Mode().Perm() != 0o600 {
				t.Fatalf("new mode not seen: %v %v", err, e.info.Mode())
			}
		}},
		{"delete", func() { os.Remove(name) }, func(e *cacheEntry, err error) {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("deleted file still served: %v", err)
			}
		}},
		{"recreate", func() { harness.WriteFile(t, name, []byte("reborn")) }, func(e *cacheEntry, err error) {
			if err != nil || string(readEntry(t, c, e)) != "reborn" {
				t.Fatalf("recreated file not seen: %v", err)
			}
		}},
	}
	for _, tc := range cases {
		before := cached(c, name)
		tc.change()
		clock.Advance(time.Second)
		e, err := c.Lookup(harness.OSFS{}, "", name)
		if e == before {
			t.Fatalf("%s: entry kept after the change", tc.desc)
		}
		tc.check(e, err)
	}
}

func TestCacheMissesAreBounded(t *testing.T) {
	dir := t.TempDir()
	limits := testLimits()
	limits.MaxFiles = 50
	c, _ := newTestCache(t, limits)
	for i := range 2000 {
		if _, err := c.Lookup(harness.OSFS{}, "", filepath.Join(dir, fmt.Sprintf("missing-%d", i))); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("missing file: %v", err)
		}
	}
	c.mu.Lock()
	n := c.lru.Len()
	c.mu.Unlock()
	if n > limits.MaxFiles {
		t.Fatalf("%d entries for random misses, limit %d", n, limits.MaxFiles)
	}
	// a cached miss is a hit, and a file that appears is seen after the interval
	name := filepath.Join(dir, "missing-1999")
	c.Lookup(harness.OSFS{}, "", name)
	harness.WriteFile(t, name, []byte("now here"))
	if _, err := c.Lookup(harness.OSFS{}, "", name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("cached miss within the interval: %v", err)
	}
}

func TestCacheRefcountUnderConcurrentReadersAndEviction(t *testing.T) {
	dir := t.TempDir()
	limits := testLimits()
	limits.MaxFiles = 4
	limits.SmallFileMax = 0
	c, clock := newTestCache(t, limits)
	var names [][]byte
	for i := range 12 {
		content := bytes.Repeat([]byte{byte('A' + i)}, 8192+i)
		harness.WriteFile(t, filepath.Join(dir, fmt.Sprintf("r%d", i)), content)
		names = append(names, content)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				n := (g + i) % len(names)
				e, err := c.Lookup(harness.OSFS{}, "", filepath.Join(dir, fmt.Sprintf("r%d", n)))
				if err != nil {
					errs <- err
					return
				}
				got, err := readNoFatal(c, e)
				if err != nil || !bytes.Equal(got, names[n]) {
					errs <- fmt.Errorf("file r%d: %d bytes, err %v", n, len(got), err)
					return
				}
				if i%50 == 0 {
					clock.Advance(time.Second) // force revalidations too
					c.shrinkIdleFiles()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.Close()
	if got := testutil.ToFloat64(c.metrics.OpenFiles); got != 0 {
		t.Fatalf("%v descriptors still open after close with no requests", got)
	}
}

// TestHandleSizeNow: a handle on a cached descriptor tells the size the
// file has now (a response reading it checks a full read against it, see
// send.Body.Read); one on content in memory, that content's size.
func TestHandleSizeNow(t *testing.T) {
	dir := t.TempDir()
	big := harness.WriteFile(t, filepath.Join(dir, "big.bin"), make([]byte, 10000))
	small := harness.WriteFile(t, filepath.Join(dir, "small.txt"), []byte("small"))
	limits := testLimits()
	limits.SmallFileMax = 100
	c, _ := newTestCache(t, limits)
	h, ok := mustLookup(t, c, big).Open()
	if !ok || h.Bytes() != nil {
		t.Fatal("no handle on a cached descriptor")
	}
	defer h.Close()
	if err := os.Truncate(big, 4097); err != nil {
		t.Fatal(err)
	}
	if n, ok := h.SizeNow(); !ok || n != 4097 || h.Size() != 10000 {
		t.Fatalf("after a truncate: SizeNow %d, %v, Size %d; want 4097, 10000", n, ok, h.Size())
	}
	m, ok := mustLookup(t, c, small).Open()
	if !ok || m.Bytes() == nil {
		t.Fatal("no handle on content in memory")
	}
	if n, ok := m.SizeNow(); !ok || n != 5 {
		t.Fatalf("memory: SizeNow %d, %v", n, ok)
	}
}
