package h2file

// What the process holds, for the harness (see harness_test.go):
// descriptors, goroutines, memory.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
)

// openFDs counts this process's open file descriptors (the test is
// skipped where they cannot be counted).
func openFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(entries)
}

// openFDsNow counts this process's open file descriptors, 0 if unknown.
func openFDsNow() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	return len(entries)
}

// fdsOpenOn counts this process's descriptors open on files under dir.
func fdsOpenOn(t testing.TB, dir string) int {
	return fdsMatching(t, func(target string) bool { return strings.HasPrefix(target, dir+"/") })
}

// fdsMatching counts this process's descriptors whose target (as
// /proc/self/fd shows it) satisfies match; it skips the test where
// descriptors cannot be listed.
func fdsMatching(t testing.TB, match func(target string) bool) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list descriptors: %v", err)
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && match(target) {
			n++
		}
	}
	return n
}

// describeFDs lists what this process's descriptors point to, for
// failure messages.
func describeFDs() string {
	entries, _ := os.ReadDir("/proc/self/fd")
	count := map[string]int{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue
		}
		if i := strings.Index(target, ":["); i > 0 {
			target = target[:i] // socket:[inode] -> socket
		}
		count[target]++
	}
	var b strings.Builder
	for k, v := range count {
		fmt.Fprintf(&b, "  %4d %s\n", v, k)
	}
	return b.String()
}

// goroutineDump is the goroutine profile, for failure messages; cut at
// 64,000 characters (12,000 once cut off x/net's serve loop, which sorts
// late, and made a client's idle connection look like a server's leak).
func goroutineDump() string {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	if b.Len() > 64000 {
		return b.String()[:64000] + "\n..."
	}
	return b.String()
}

// hogDescriptors opens /dev/null until the process is out of descriptors
// and returns the files, for the caller to close.
func hogDescriptors(t testing.TB) []*os.File {
	t.Helper()
	var hog []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !isTooManyFiles(err) {
				t.Fatal(err)
			}
			return hog
		}
		hog = append(hog, f)
	}
}

// procStatusKiB returns a field of /proc/self/status in KiB (0 if
// unknown).
func procStatusKiB(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kib, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kib
		}
	}
	return 0
}
