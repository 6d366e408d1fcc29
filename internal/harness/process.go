package harness

// What the process holds, for the harness (see package caddysite):
// descriptors, goroutines, memory.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// OpenFDs counts this process's open file descriptors (the test is
// skipped where they cannot be counted).
func OpenFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(entries)
}

// OpenFDsNow counts this process's open file descriptors, 0 if unknown.
func OpenFDsNow() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	return len(entries)
}

// FDsOpenOn counts this process's descriptors open on files under dir.
func FDsOpenOn(t testing.TB, dir string) int {
	return FDsMatching(t, func(target string) bool { return strings.HasPrefix(target, dir+"/") })
}

// DescribeFDs lists what this process's descriptors point to, for
// failure messages.
func DescribeFDs() string {
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

// GoroutineDump is the goroutine profile, for failure messages; cut at
// 64,000 characters (12,000 once cut off x/net's serve loop, which sorts
// late, and made a client's idle connection look like a server's leak).
func GoroutineDump() string {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	if b.Len() > 64000 {
		return b.String()[:64000] + "\n..."
	}
	return b.String()
}

// HogDescriptors opens /dev/null until the process is out of descriptors
// and returns the files, for the caller to close.
func HogDescriptors(t testing.TB) []*os.File {
	t.Helper()
	var hog []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
				t.Fatal(err)
			}
			return hog
		}
		hog = append(hog, f)
	}
}

// ProcStatusKiB returns a field of /proc/self/status in KiB (0 if
// unknown).
func ProcStatusKiB(field string) uint64 {
	return PidStatusKiB("self", field)
}

// PidStatusKiB returns a field of /proc/<pid>/status in KiB (0 if
// unknown); pid is a number or "self".
func PidStatusKiB(pid, field string) uint64 {
	f, err := os.Open("/proc/" + pid + "/status")
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

// InotifyFDs counts this process's inotify descriptors.
func InotifyFDs(t testing.TB) int {
	t.Helper()
	return FDsMatching(t, func(target string) bool { return target == "anon_inode:inotify" })
}
