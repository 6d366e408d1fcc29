package fdcache

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// Two versions of a file of one size.
const (
	version1 = "build-0001\n"
	version2 = "build-0002\n"
)

func TestSameFileSeesWhatSizeAndTimesHide(t *testing.T) {
	if !haveChangeTime {
		t.Skip("no inode change time on this platform")
	}
	dir := t.TempDir()
	name := harness.WriteFile(t, filepath.Join(dir, "version.txt"), []byte(version1))
	stat := func() os.FileInfo {
		info, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	changes := []struct {
		desc   string
		change func() error
	}{
		{"rewrite in place, mtime restored", func() error { return harness.RewriteInPlace(name, version2) }},
		{"delete and re-create, mtime restored", func() error { return harness.Recreate(name, version1) }},
		{"rename over, mtime restored", func() error { return harness.RenameOver(name, version2) }},
	}
	for _, tc := range changes {
		before := stat()
		if err := tc.change(); err != nil {
			t.Fatal(err)
		}
		after := stat()
		if before.Size() != after.Size() || !before.ModTime().Equal(after.ModTime()) {
			t.Fatalf("%s: the test must keep size and mtime", tc.desc)
		}
		if SameFile(before, after) {
			t.Errorf("%s: not told apart", tc.desc)
		}
	}
	if a, b := stat(), stat(); !SameFile(a, b) {
		t.Error("an unchanged file compares as changed")
	}
}

func TestRacyContentIsComparedOnRevalidation(t *testing.T) {
	dir := t.TempDir()
	c, clock := newTestCache(t, testLimits())
	name := harness.WriteFile(t, filepath.Join(dir, "page.txt"), []byte(version1))
	e := mustLookup(t, c, name)
	if e.data == nil || !e.racy.Load() {
		t.Fatalf("a file changed just now must be held in memory and marked racy (data %v, racy %v)", e.data != nil, e.racy.Load())
	}
	// what a copy taken just before a write in the same clock tick holds:
	// other bytes under the same size and times
	e.data = []byte(version2)
	clock.Advance(time.Second)
	if again := mustLookup(t, c, name); again == e || string(readEntry(t, c, again)) != version1 {
		t.Fatal("racy content that differs from the file was kept")
	}
	// a racy entry whose bytes match is kept
	kept := mustLookup(t, c, name)
	clock.Advance(time.Second)
	if mustLookup(t, c, name) != kept {
		t.Fatal("racy content that matches the file was dropped")
	}
}
