package harness

// Site files for the harness (see package caddysite): trees of fixtures,
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
)

// WriteTree writes files (slash-separated path under dir → content),
// making the directories they need.
func WriteTree(t testing.TB, dir string, files map[string]string) {
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

// LinkTree makes symbolic links (path under dir → target).
func LinkTree(t testing.TB, dir string, links map[string]string) {
	t.Helper()
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
}

// SetMtimes sets the modification (and access) time of everything under
// dir but symbolic links to mtime, so that ETags and Last-Modified are
// stable.
func SetMtimes(t testing.TB, dir string, mtime time.Time) {
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

// SiteFile is a file of a test site, with what FetchFile checks.
type SiteFile struct {
	Path string // URL path
	Size int64
	Sum  [32]byte // SHA-256 of the content
}

// WriteSiteFiles writes n files of random content under root, named
// /<prefix><i>.bin, with the given sizes.
func WriteSiteFiles(t *testing.T, root, prefix string, n int, size func(i int) int) []SiteFile {
	t.Helper()
	files := make([]SiteFile, n)
	for i := range n {
		content := RandomBytes(t, size(i))
		name := fmt.Sprintf("%s%d.bin", prefix, i)
		WriteFile(t, filepath.Join(root, name), content)
		files[i] = SiteFile{Path: "/" + name, Size: int64(len(content)), Sum: sha256.Sum256(content)}
	}
	return files
}

// FetchFile GETs f from base and checks status, length and bytes.
func FetchFile(ctx context.Context, c *http.Client, base string, f SiteFile) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+f.Path, nil)
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
		return fmt.Errorf("%s: reading body after %d bytes: %w", f.Path, n, err)
	}
	if resp.StatusCode != http.StatusOK || n != f.Size || !bytes.Equal(h.Sum(nil), f.Sum[:]) {
		return fmt.Errorf("%s: status %d, %d bytes (want 200, %d bytes), content matches: %v",
			f.Path, resp.StatusCode, n, f.Size, bytes.Equal(h.Sum(nil), f.Sum[:]))
	}
	return nil
}

// WriteFileNow writes one file, making its directory, dated now (not
// settled, unlike WriteFile).
func WriteFileNow(t testing.TB, name, content string) {
	t.Helper()
	WriteTree(t, filepath.Dir(name), map[string]string{filepath.Base(name): content})
}
