package fdcache

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// TestCacheOutOfDescriptors runs itself in a subprocess with a low
// RLIMIT_NOFILE: the cache must give back idle descriptors and keep
// serving, and when nothing is left, fail the lookup cleanly.
func TestCacheOutOfDescriptors(t *testing.T) {
	if os.Getenv("H2FILE_EMFILE_CHILD") == "1" {
		emfileChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCacheOutOfDescriptors$", "-test.v")
	cmd.Env = append(os.Environ(), "H2FILE_EMFILE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("EMFILE-CHILD-OK")) {
		t.Fatalf("child did not run its checks:\n%s", out)
	}
}

func emfileChild(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for i := range 64 {
		names = append(names, harness.WriteFile(t, filepath.Join(dir, "f"+strconv.Itoa(i)), bytes.Repeat([]byte{'x'}, 100+i)))
	}
	limits := testLimits()
	limits.SmallFileMax = 0 // hold every file open
	limits.MaxFiles = 1000  // more than the process may open
	c, _ := newTestCache(t, limits)

	if _, err := harness.LowerOpenFileLimit(harness.OpenFDsNow()+24, true); err != nil {
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	// more files than descriptors left: the cache must close idle ones
	for round := range 3 {
		for i, name := range names {
			e := mustLookup(t, c, name)
			if got := readEntry(t, c, e); len(got) != 100+i {
				t.Fatalf("round %d, %s: %d bytes", round, name, len(got))
			}
		}
	}
	if testutilEvictions(c) == 0 {
		t.Fatal("no descriptor was given back although the limit was reached")
	}

	// exhaust the rest with descriptors the cache does not own
	fresh := harness.WriteFile(t, filepath.Join(dir, "fresh"), []byte("fresh"))
	c.shrinkIdleFiles()
	hog := harness.HogDescriptors(t)
	e, err := c.Lookup(harness.OSFS{}, "", fresh)
	if err != nil || e == nil || e.file != nil || !e.unlisted {
		t.Fatalf("lookup with no descriptor left: entry %+v, err %v; want an unlisted entry", e, err)
	}
	if _, ok := e.Open(); ok {
		t.Fatal("a handle on an entry the cache could not open")
	}
	if f, err := os.Open(fresh); !IsTooManyFiles(err) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("open with no descriptor left: %v; want EMFILE", err)
	}
	for _, f := range hog {
		f.Close()
	}
	if got := readEntry(t, c, mustLookup(t, c, names[0])); len(got) != 100 {
		t.Fatalf("after descriptors came back: %d bytes", len(got))
	}
	fmt.Println("EMFILE-CHILD-OK")
}

func testutilEvictions(c *fileCache) float64 {
	return testutil.ToFloat64(c.metrics.Evictions)
}
