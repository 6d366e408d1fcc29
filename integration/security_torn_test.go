package integration

// Security suite, part 2 (see security_test.go): no torn snapshot kept
// in the cache.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// TestWrongBytesTornSnapshot rewrites a file that the cache holds in
// memory in place, with one pwrite of the same size, while requests make
// the cache load it again; then, once the write is over and the revalidate
// interval has passed, every response must be the file's new content. A
// snapshot read while the write ran has the stat of the file after the
// write (the write sets the modification time before it copies bytes, and
// the size does not change), so the cache must not keep such a snapshot: it
// would serve bytes that never were on disk for as long as the file is
// requested. The file is large (small_file_max is raised) so that the write
// takes milliseconds, not microseconds.
func TestWrongBytesTornSnapshot(t *testing.T) {
	root := t.TempDir()
	const size = 24 << 20
	srv := caddysite.StartTestCaddy(t, caddysite.H2FileServer(root, map[string]any{"cache": map[string]any{
		"small_file_max": 32 << 20, "max_memory": 256 << 20, "revalidate": "1ms",
	}}))
	name := filepath.Join(root, "big.txt")
	version := func(n int) []byte {
		b := bytes.Repeat([]byte(fmt.Sprintf("version %d of big.txt; ", n)), size/len("version 0 of big.txt; ")+1)
		return b[:size]
	}
	if err := os.WriteFile(name, version(0), 0o644); err != nil {
		t.Fatal(err)
	}
	get := func(method string, hdrs ...string) (*http.Response, []byte, error) {
		req, err := http.NewRequest(method, srv.URL+"/big.txt", nil)
		if err != nil {
			return nil, nil, err
		}
		for i := 0; i+1 < len(hdrs); i += 2 {
			req.Header.Set(hdrs[i], hdrs[i+1])
		}
		resp, err := srv.H2.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	const tail = 1 << 20
	tailRange := fmt.Sprintf("bytes=%d-", size-tail)
	if _, body, err := get(http.MethodGet, "Range", tailRange); err != nil || !bytes.Equal(body, version(0)[size-tail:]) {
		t.Fatalf("first GET: %d bytes, %v", len(body), err)
	}
	// the write and the cache's read race: attempts until one shows the
	// fault or the deadline passes. A cache that never keeps a torn
	// snapshot passes every attempt.
	deadline := time.Now().Add(5 * time.Second)
	attempts := 0
	for n := 1; time.Now().Before(deadline); n++ {
		attempts++
		next := version(n)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		// HEAD requests look the file up (and load it again once it
		// changed) without sending it
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					get(http.MethodHead) //nolint:errcheck // only to load the cache
				}
			}()
		}
		time.Sleep(10 * time.Millisecond)
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = f.WriteAt(next, 0)
		took := time.Since(start)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		time.Sleep(50 * time.Millisecond) // well past revalidate (1ms)

		info, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		etag := fmt.Sprintf(`"%s-%s"`, strconv.FormatInt(info.ModTime().UnixNano(), 36), strconv.FormatInt(info.Size(), 36))
		// a snapshot read while the write ran is the new bytes up to
		// where the read overtook the write, then the old ones: the tail
		// shows it, and is cheap to get
		resp, body, err := get(http.MethodGet, "Range", tailRange)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, next[size-tail:]) {
			if resp, body, err = get(http.MethodGet); err != nil {
				t.Fatal(err)
			}
		}
		if len(body) == size && !bytes.Equal(body, next) || len(body) == tail && !bytes.Equal(body, next[size-tail:]) || len(body) != size && len(body) != tail {
			// which 1 MiB blocks are the old and which the new version
			blocks := func(body []byte) string {
				var b []string
				prev := version(n - 1)
				for off := 0; off < len(body); off += 1 << 20 {
					end := min(off+1<<20, len(body))
					switch {
					case bytes.Equal(body[off:end], next[off:end]):
						b = append(b, "new")
					case bytes.Equal(body[off:end], prev[off:end]):
						b = append(b, "old")
					default:
						b = append(b, "mixed")
					}
				}
				return strings.Join(b, " ")
			}
			first := blocks(body)
			// and it stays so
			time.Sleep(time.Second)
			still := 0
			for range 5 {
				if _, again, err := get(http.MethodGet, "Range", tailRange); err == nil && !bytes.Equal(again, next[size-tail:]) {
					still++
				}
			}
			t.Fatalf("attempt %d: 50ms after a same-size rewrite in place (pwrite took %v), GET /big.txt has ETag %q (the file's: %q) and %d bytes that never were the file's: 1 MiB blocks [%s]; 1s later, %d of 5 GETs still send them (their last MiB)",
				attempts, took, resp.Header.Get("Etag"), etag, len(body), first, still)
		}
		if got := resp.Header.Get("Etag"); got != etag {
			t.Fatalf("attempt %d: ETag %q, file's %q", attempts, got, etag)
		}
	}
	t.Logf("%d same-size rewrites in place, each followed by the current content", attempts)
}
