package fdcache

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// TestDroppedHookSeesEveryExit: the owner hears of an entry that is
// evicted, removed, found changed or let go when the cache closes, once
// each, and of no entry still listed.
func TestDroppedHookSeesEveryExit(t *testing.T) {
	dir := t.TempDir()
	limits := testLimits()
	limits.MaxFiles = 2
	limits.SmallFileMax = 0
	clock := &testClock{now: time.Unix(1_700_000_000, 0)}
	var mu sync.Mutex
	var dropped []*cacheEntry
	c := New(limits, Options[testMeta]{
		Describe: func(name string, info fs.FileInfo) testMeta { return testMeta{name: name, size: info.Size()} },
		Logger:   zap.NewNop(),
		Now:      clock.Now,
		Dropped: func(e *cacheEntry) {
			mu.Lock()
			dropped = append(dropped, e)
			mu.Unlock()
		},
	})
	was := func(e *cacheEntry) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(dropped, e)
	}
	var names []string
	for i := range 3 {
		names = append(names, harness.WriteFile(t, filepath.Join(dir, fmt.Sprintf("f%d", i)), []byte{byte(i)}))
	}
	e0, e1 := mustLookup(t, c, names[0]), mustLookup(t, c, names[1])
	e2 := mustLookup(t, c, names[2]) // evicts f0
	if !was(e0) || was(e1) || was(e2) {
		t.Fatalf("after an eviction: dropped %v, want only f0's entry", dropped)
	}
	c.Remove(e1)
	if !was(e1) {
		t.Fatal("a removed entry was not reported")
	}
	if err := harness.RewriteInPlace(names[2], "changed"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * limits.Revalidate)
	if e := mustLookup(t, c, names[2]); e == e2 || !was(e2) {
		t.Fatalf("a changed file's entry: same entry again %v, reported %v", e == e2, was(e2))
	}
	last := mustLookup(t, c, names[2])
	c.Close()
	if !was(last) {
		t.Error("an entry let go when the cache closed was not reported")
	}
	mu.Lock()
	defer mu.Unlock()
	for i, e := range dropped {
		if slices.Index(dropped, e) != i {
			t.Errorf("%s reported twice", e.Name())
		}
	}
}

// TestHandleUnchanged: a handle on an open file tells when the file was
// rewritten in place since the entry's stat; one on memory never changes.
func TestHandleUnchanged(t *testing.T) {
	dir := t.TempDir()
	limits := testLimits()
	limits.SmallFileMax = 4
	c, _ := newTestCache(t, limits)
	big := harness.WriteFile(t, filepath.Join(dir, "big.bin"), bytes.Repeat([]byte("b"), 4096))
	small := harness.WriteFile(t, filepath.Join(dir, "small.txt"), []byte("sm"))
	for _, name := range []string{big, small} {
		e := mustLookup(t, c, name)
		h, ok := e.Open()
		if !ok {
			t.Fatalf("%s: no handle", name)
		}
		if !h.Unchanged(e.Info()) {
			t.Errorf("%s: changed before any change", name)
		}
		if err := os.WriteFile(name, []byte("rewritten in place"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, want := h.Unchanged(e.Info()), h.Bytes() != nil; got != want {
			t.Errorf("%s (in memory: %v): Unchanged %v after a rewrite in place", name, h.Bytes() != nil, got)
		}
		h.Close()
	}
}
