package harness

import (
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/watch"
)

// WriteFile writes a file, creating its directory, and dates it an hour
// back, so that the open-file cache treats it as settled (a file modified
// within the last second is read from disk, not copied into memory). It
// returns name.
func WriteFile(t testing.TB, name string, content []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, content, 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(name, past, past); err != nil {
		t.Fatal(err)
	}
	return name
}

// RewriteInPlace writes content into the existing file (same inode) and
// restores its modification time, as a build with normalised times does.
func RewriteInPlace(name, content string) error {
	info, err := os.Stat(name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(name, info.ModTime(), info.ModTime())
}

// Recreate deletes name and writes it again with content, restoring its
// modification time.
func Recreate(name, content string) error {
	info, err := os.Stat(name)
	if err != nil {
		return err
	}
	if err := os.Remove(name); err != nil {
		return err
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Chtimes(name, info.ModTime(), info.ModTime())
}

// RenameOver writes content beside name and renames it over name, with
// the old modification time.
func RenameOver(name, content string) error {
	info, err := os.Stat(name)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(name), ".tmp-"+filepath.Base(name))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	if err := os.Chtimes(tmp, info.ModTime(), info.ModTime()); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// FDsMatching counts this process's descriptors whose target (as
// /proc/self/fd shows it) satisfies match; it skips the test where
// descriptors cannot be listed.
func FDsMatching(t testing.TB, match func(target string) bool) int {
	t.Helper()
	return PidFDsMatching(t, "self", match)
}

// PidFDsMatching counts the descriptors of process pid (a number or
// "self") whose target (as /proc/<pid>/fd shows it) satisfies match; it
// skips the test where descriptors cannot be listed.
func PidFDsMatching(t testing.TB, pid string, match func(target string) bool) int {
	t.Helper()
	dir := filepath.Join("/proc", pid, "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("cannot list descriptors: %v", err)
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil && match(target) {
			n++
		}
	}
	return n
}

// FileEventsAvailable reports whether the open-file cache gets file system
// events for files in dir: the platform has them and dir is on a local
// file system.
func FileEventsAvailable(dir string) bool {
	b, err := watch.NewBackend()
	if err != nil {
		return false
	}
	defer b.Close()
	return b.Local(dir)
}

// OSFS is the local file system as Caddy's default one is: absolute or
// relative OS paths, not rooted.
type OSFS struct{}

// Open opens an OS path.
func (OSFS) Open(name string) (fs.File, error) { return os.Open(name) }

// Stat stats an OS path.
func (OSFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// RandomBytes returns n random bytes.
func RandomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
