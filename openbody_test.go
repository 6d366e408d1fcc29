package h2file

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/h2file/caddy-h2file/internal/fdcache"
	"github.com/h2file/caddy-h2file/internal/harness"
)

// hookedFS is osFS with a hook that runs before each Open, numbered from 1:
// a way to replace a file exactly between a stat and an open.
type hookedFS struct {
	opens  int
	onOpen func(n int)
}

func (f *hookedFS) Open(name string) (fs.File, error) {
	f.opens++
	f.onOpen(f.opens)
	return os.Open(name)
}

func (f *hookedFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// TestBodyOpenedAfterAReplaceDescribesItself: when the path a response
// opens is no longer the file its entry's stat saw (deleted and created
// again, or renamed over, in between), the response's size and ETag are the
// opened file's. Before, a Range went out with the old size in its
// Content-Range and the new file's bytes (TestWrongBytesUnderMutation saw
// it on a loaded CI box), and a whole GET announced the old length.
func TestBodyOpenedAfterAReplaceDescribesItself(t *testing.T) {
	oldContent := bytes.Repeat([]byte("old version\n"), 500) // 6,000 bytes
	newContent := bytes.Repeat([]byte("NEW\n"), 1000)        // 4,000 bytes
	check := func(t *testing.T, h *Handler, e *cacheEntry, fsys fs.FS, name string) {
		t.Helper()
		rb, opened, err := h.openBody(fsys, e, nil, new(responseBody))
		if err != nil {
			t.Fatalf("openBody: %v", err)
		}
		defer rb.Close()
		info, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if opened.Info().Size() != int64(len(newContent)) || entityTag(opened) != calculateEtag(info) {
			t.Errorf("response describes %d bytes with ETag %s, the file opened has %d and ETag %s",
				opened.Info().Size(), entityTag(opened), len(newContent), calculateEtag(info))
		}
		if rb.body == nil || rb.body.Size() != int64(len(newContent)) {
			t.Errorf("body announces %+v bytes, want %d", rb.body, len(newContent))
		}
		got, err := io.ReadAll(rb.reader)
		if err != nil || !bytes.Equal(got, newContent) || rb.truncated() {
			t.Errorf("body: %d bytes, err %v, truncated %v; want the new %d bytes", len(got), err, rb.truncated(), len(newContent))
		}
		if opened == e {
			t.Error("the entry of the old file was kept")
		}
	}

	t.Run("cache: deleted before its open, created again before the response's", func(t *testing.T) {
		c := newFileCache(fdcache.Limits{MaxFiles: 100, MaxMemory: 1 << 20, SmallFileMax: 1 << 10, Revalidate: time.Second, Inactive: time.Hour}, zap.NewNop())
		t.Cleanup(c.Close)
		name := harness.WriteFile(t, filepath.Join(t.TempDir(), "page.txt"), oldContent)
		fsys := &hookedFS{onOpen: func(n int) {
			switch n {
			case 1: // the cache's own open, after its stat
				if err := os.Remove(name); err != nil {
					t.Fatal(err)
				}
			case 2: // the response's open
				harness.WriteFile(t, name, newContent)
			}
		}}
		e, err := c.Lookup(fsys, "", name)
		if err != nil || e.Info().Size() != int64(len(oldContent)) {
			t.Fatalf("lookup: %+v, %v; want an entry of the old file", e, err)
		}
		if held, ok := e.Open(); ok {
			held.Close()
			t.Fatal("the cache holds content of a file it could not open")
		}
		check(t, &Handler{cache: c, logger: zap.NewNop()}, e, fsys, name)
	})

	t.Run("no cache: renamed over between stat and open", func(t *testing.T) {
		dir := t.TempDir()
		name := harness.WriteFile(t, filepath.Join(dir, "page.txt"), oldContent)
		h := &Handler{logger: zap.NewNop()}
		e, err := h.lookup(time.Time{}, harness.OSFS{}, "", name)
		if err != nil {
			t.Fatal(err)
		}
		harness.WriteFile(t, filepath.Join(dir, "next"), newContent)
		if err := os.Rename(filepath.Join(dir, "next"), name); err != nil {
			t.Fatal(err)
		}
		check(t, h, e, harness.OSFS{}, name)
	})

	t.Run("the same file keeps its entry", func(t *testing.T) {
		name := harness.WriteFile(t, filepath.Join(t.TempDir(), "page.txt"), oldContent)
		h := &Handler{logger: zap.NewNop()}
		e, err := h.lookup(time.Time{}, harness.OSFS{}, "", name)
		if err != nil {
			t.Fatal(err)
		}
		rb, opened, err := h.openBody(harness.OSFS{}, e, nil, new(responseBody))
		if err != nil {
			t.Fatal(err)
		}
		defer rb.Close()
		if opened != e {
			t.Error("an unchanged file got a new entry")
		}
	})
}
