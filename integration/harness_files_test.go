package integration

// Site files for the harness (see harness_test.go): trees of fixtures,
// files of random content and fetching them with a check of every byte.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// writeTree writes files (slash-separated path under dir → content),
// making the directories they need.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// linkTree makes symbolic links (path under dir → target).
func linkTree(t testing.TB, dir string, links map[string]string) {
	t.Helper()
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
}

// setMtimes sets the modification (and access) time of everything under
// dir but symbolic links to mtime, so that ETags and Last-Modified are
// stable.
func setMtimes(t testing.TB, dir string, mtime time.Time) {
	t.Helper()
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.Mode()&os.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(path, mtime, mtime)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// siteFile is a file of a test site, with what fetchFile checks.
type siteFile struct {
	path string // URL path
	size int64
	sum  [32]byte
}

// writeSiteFiles writes n files of random content under root, named
// /<prefix><i>.bin, with the given sizes.
func writeSiteFiles(t *testing.T, root, prefix string, n int, size func(i int) int) []siteFile {
	t.Helper()
	files := make([]siteFile, n)
	for i := range n {
		content := harness.RandomBytes(t, size(i))
		name := fmt.Sprintf("%s%d.bin", prefix, i)
		harness.WriteFile(t, filepath.Join(root, name), content)
		files[i] = siteFile{path: "/" + name, size: int64(len(content)), sum: sha256.Sum256(content)}
	}
	return files
}

// fetchFile GETs f from base and checks status, length and bytes.
func fetchFile(ctx context.Context, c *http.Client, base string, f siteFile) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+f.path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return fmt.Errorf("%s: reading body after %d bytes: %w", f.path, n, err)
	}
	if resp.StatusCode != http.StatusOK || n != f.size || !bytes.Equal(h.Sum(nil), f.sum[:]) {
		return fmt.Errorf("%s: status %d, %d bytes (want 200, %d bytes), content matches: %v",
			f.path, resp.StatusCode, n, f.size, bytes.Equal(h.Sum(nil), f.sum[:]))
	}
	return nil
}

// diffWriteFile writes one file, making its directory. A compatibility
// shim over writeTree, for suites written before the harness.
func diffWriteFile(t *testing.T, name, content string) {
	t.Helper()
	writeTree(t, filepath.Dir(name), map[string]string{filepath.Base(name): content})
}
