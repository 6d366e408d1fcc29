package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
	"github.com/h2file/caddy-h2file/internal/harness/h2client"
)

// TestTruncatedFileAbortsResponse shrinks a file while it is being sent:
// the client must see a broken response, never a clean short body.
func TestTruncatedFileAbortsResponse(t *testing.T) {
	root := t.TempDir()
	const size = 64 << 20
	content := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	srv := caddysite.StartTestCaddy(t, caddysite.H2FileServer(root, nil))

	for _, proto := range []struct {
		name   string
		client *http.Client
		major  int
	}{{"HTTP/2", srv.H2, 2}, {"HTTP/1.1", srv.H1, 1}} {
		t.Run(proto.name, func(t *testing.T) {
			file := fmt.Sprintf("big%d.bin", proto.major)
			name := harness.WriteFile(t, filepath.Join(root, file), content)
			resp, err := proto.client.Get(srv.URL + "/" + file)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.ProtoMajor != proto.major || resp.ContentLength != size {
				t.Fatalf("proto %d, Content-Length %d", resp.ProtoMajor, resp.ContentLength)
			}
			head := make([]byte, 1<<20)
			if _, err := io.ReadFull(resp.Body, head); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(name, 8<<20); err != nil {
				t.Fatal(err)
			}
			rest, err := io.ReadAll(resp.Body)
			got := int64(len(head) + len(rest))
			if err == nil {
				t.Fatalf("read %d of %d announced bytes and a clean end of body; want an error", got, size)
			}
			if got >= size {
				t.Fatalf("read %d bytes, more than the file had", got)
			}
			if !bytes.Equal(append(head, rest...), content[:got]) {
				t.Fatal("bytes before the abort differ from the file")
			}

			// the next request sees the truncated file, whole
			resp2, err := proto.client.Get(srv.URL + "/" + file)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp2.Body)
			resp2.Body.Close()
			if err != nil || len(body) != 8<<20 || !bytes.Equal(body, content[:8<<20]) {
				t.Fatalf("after truncation: %d bytes, %v", len(body), err)
			}
		})
	}
}

// TestTruncatedFileResetsHTTP2Stream checks the wire: a file that shrinks
// while it is sent ends its stream with RST_STREAM, never with a clean
// END_STREAM after fewer bytes than the Content-Length announced (which
// x/net would send if the handler just returned).
func TestTruncatedFileResetsHTTP2Stream(t *testing.T) {
	root := t.TempDir()
	const size = 64 << 20
	name := harness.WriteFile(t, filepath.Join(root, "shrinks.bin"), bytes.Repeat([]byte("x"), size))
	srv := caddysite.StartTestCaddy(t, caddysite.H2FileServer(root, nil))
	end := h2client.GetOnce(t, strings.TrimPrefix(srv.URL, "https://"), "/shrinks.bin", 1<<20, func() {
		if err := os.Truncate(name, 4<<20); err != nil {
			t.Fatal(err)
		}
	})
	if end.Status != "200" || !end.Reset || end.Ended || end.N >= size {
		t.Fatalf("file truncated while sent: %v; want RST_STREAM", end)
	}
}

// TestCacheReloadUnderLoad reloads the config through the admin API while
// requests run: no request may fail, and afterwards the descriptors the
// caches hold are within bounds, and none once Caddy stops.
func TestCacheReloadUnderLoad(t *testing.T) {
	root := t.TempDir()
	var files [][]byte
	for i := range 40 {
		// half small (in memory), half held open
		content := bytes.Repeat([]byte{byte('a' + i%26)}, 1000+i*4000)
		harness.WriteFile(t, filepath.Join(root, fmt.Sprintf("f%d.bin", i)), content)
		files = append(files, content)
	}
	baseline := harness.FDsOpenOn(t, root)
	// a cache of its own, not shared with other tests' configs
	srv := caddysite.StartTestCaddy(t, caddysite.H2FileServer(root, map[string]any{"cache": map[string]any{"max_files": 32}}))
	config := func(maxFiles int) []byte {
		var cfg map[string]any
		if err := json.Unmarshal([]byte(srv.MustAPI(http.MethodGet, "/config/", nil)), &cfg); err != nil {
			t.Fatal(err)
		}
		handler := cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)["test"].(map[string]any)["routes"].([]any)[0].(map[string]any)["handle"].([]any)[0].(map[string]any)
		handler["cache"] = map[string]any{"max_files": maxFiles}
		out, _ := json.Marshal(cfg)
		return out
	}

	var failures atomic.Int64
	var requests atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := i % len(files)
				resp, err := getAcrossHandover(srv.H2, fmt.Sprintf("%s/f%d.bin", srv.URL, n))
				if err != nil {
					failures.Add(1)
					t.Errorf("request: %v", err)
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				requests.Add(1)
				if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, files[n]) {
					failures.Add(1)
					t.Errorf("f%d: status %d, %d bytes, %v", n, resp.StatusCode, len(body), err)
				}
			}
		}()
	}
	for i := range 12 {
		maxFiles := 8 + 8*(i%3) // three cache configurations in turn
		if code, msg, err := srv.API(http.MethodPost, "/load", config(maxFiles)); err != nil || code != 200 {
			t.Fatalf("reload %d: %d %s %v", i, code, msg, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if requests.Load() < 50 || failures.Load() > 0 {
		t.Fatalf("%d requests, %d failures", requests.Load(), failures.Load())
	}
	// the last config uses max_files 24 (i=11 → 8+8*2); earlier caches are
	// closed once their config is gone
	if n := harness.FDsOpenOn(t, root) - baseline; n > 24 {
		t.Fatalf("%d descriptors open on the site after reloads, bound 24", n)
	}
	caddysite.StopTestCaddy(t)
	if n := harness.FDsOpenOn(t, root) - baseline; n != 0 {
		t.Fatalf("%d descriptors still open on the site after Caddy stopped", n)
	}
}

// getAcrossHandover GETs url, and again (up to 3 tries) when the
// connection was reset or closed before any response: a config reload makes
// Caddy open a new listener on the port (SO_REUSEPORT) and close the old
// one, which resets the connections the kernel had queued on it, unread,
// whatever the handler (file_server's alike). Those requests were never
// served; any other error, and any wrong answer, stays a failure.
func getAcrossHandover(c *http.Client, url string) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := c.Get(url)
		if err != nil && attempt < 3 && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF)) {
			continue
		}
		return resp, err
	}
}
