package integration

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	h2file "github.com/h2file/caddy-h2file"
	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
	"github.com/h2file/caddy-h2file/internal/variants"
)

// compressSite serves one root twice behind `encode` (diffEncodeSettings):
// under /fs/ with file_server, under /h2/ with h2_file_server and the same
// settings in its compress option, with the recommended wrappers.
func compressSite(t *testing.T, root string, extra map[string]any) *caddysite.Server {
	t.Helper()
	route := func(prefix string, file map[string]any) map[string]any {
		enc := diffEncodeSettings()
		enc["handler"] = "encode"
		return map[string]any{
			"match": []any{map[string]any{"path": []string{prefix + "/*"}}},
			"handle": []any{
				map[string]any{"handler": "rewrite", "strip_path_prefix": prefix},
				enc,
				file,
			},
		}
	}
	compress := diffEncodeSettings()
	for k, v := range extra {
		compress[k] = v
	}
	return caddysite.Start(t, caddysite.Config{
		Routes: []any{
			route("/fs", map[string]any{"handler": "file_server", "root": root}),
			// entries idle for the cache's default minute are dropped,
			// and their variants made again: a test slowed past that
			// (122 s under -race on a loaded machine) made 28 of 16
			route("/h2", caddysite.H2FileServer(root, map[string]any{"compress": compress, "cache": map[string]any{"inactive": "1h"}})),
		},
		Wrappers: engineWrappers(),
	})
}

// compressStats returns a function that reads the counts of the
// compressed-variant store of the running config's one h2_file_server:
// the site's own, where the caddy_h2file_compress_* metrics add up every
// store in the process.
func compressStats(t *testing.T) func() variants.Stats {
	t.Helper()
	app, err := caddy.ActiveContext().AppIfConfigured("http")
	if err != nil {
		t.Fatal(err)
	}
	var found []*h2file.Handler
	for _, srv := range app.(*caddyhttp.App).Servers {
		for _, r := range srv.Routes {
			for _, h := range r.Handlers {
				if h, ok := h.(*h2file.Handler); ok {
					found = append(found, h)
				}
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d h2_file_server handlers running, want 1", len(found))
	}
	return found[0].VariantStats
}

// compressFiles writes the suite's files: text of several types and
// sizes (under minimum_length, over max_file_size), an image encode does
// not compress, an empty file.
func compressFiles(t *testing.T, root string) []string {
	js := strings.Repeat("function f(a, b) { return a + b * 42; } // some script\n", 2000)
	files := map[string][]byte{
		"app.js":     []byte(js),
		"style.css":  []byte(strings.Repeat(".c { color: #123456; margin: 0 auto; }\n", 500)),
		"index.html": []byte("<!doctype html><title>x</title>" + strings.Repeat("<p>hello world</p>", 200)),
		"small.txt":  []byte(strings.Repeat("s", 300)),
		"edge.txt":   []byte(strings.Repeat("e", 513)),
		"big.js":     []byte(strings.Repeat(js, 4)),
		"image.png":  harness.RandomBytes(t, 20_000),
		// compressed bodies of 512 to 2048 bytes: net/http frames them by
		// how they are written (a Content-Length, or chunked on HTTP/1.1)
		"mid.js":   []byte("// " + hex.EncodeToString(harness.RandomBytes(t, 600))),
		"mid2.css": []byte("/* " + hex.EncodeToString(harness.RandomBytes(t, 1500)) + " */"),
		// and about 4 KiB, where HTTP/2's response buffer ends
		"mid3.css":  []byte("/* " + hex.EncodeToString(harness.RandomBytes(t, 3700)) + " */"),
		"large.css": []byte("/* " + hex.EncodeToString(harness.RandomBytes(t, 20_000)) + " */"),
		"empty.txt": nil,
	}
	var names []string
	for name, content := range files {
		harness.WriteFile(t, filepath.Join(root, name), content)
		names = append(names, name)
	}
	return names
}

// TestCompressAgainstEncode compares h2_file_server's compressed variants
// with encode + file_server, over HTTP/2 and HTTP/1.1 with TLS: status,
// every header but Date, and the decoded body, for GET and HEAD, every
// kind of Accept-Encoding, ranges and conditional requests (with the
// variant's own ETag too), each asked twice (made, then held).
func TestCompressAgainstEncode(t *testing.T) {
	root := t.TempDir()
	names := compressFiles(t, root)
	srv := compressSite(t, root, map[string]any{"max_file_size": 200_000})
	accepts := []string{"", "gzip", "zstd", "gzip, zstd", "zstd;q=0.5, gzip", "gzip;q=0.5, zstd;q=0.9", "br", "identity",
		"*", "gzip;q=0", "gzip, deflate, br, zstd", "GZIP", "zstd;q=0, gzip;q=0"}
	stats := compressStats(t)
	for _, proto := range []string{"h2", "h1"} {
		client := srv.Client(t, proto)
		for _, name := range names {
			for _, accept := range accepts {
				for _, method := range []string{http.MethodGet, http.MethodHead} {
					for try := range 2 {
						headers := [][2]string{}
						if accept != "" {
							headers = append(headers, [2]string{"Accept-Encoding", accept})
						}
						fs, h2 := compressPair(t, client, method, srv, name, headers)
						if d := diffCompare(fs, h2); d != "" {
							t.Errorf("%s %s %s (try %d), Accept-Encoding %q:\n  %s", proto, method, name, try, accept, d)
						}
						// conditional requests and ranges, with what the
						// response carried
						for _, cond := range [][2]string{
							{"If-None-Match", fs.header.Get("Etag")},
							{"If-None-Match", strings.Replace(fs.header.Get("Etag"), "-gzip", "", 1)},
							{"If-Modified-Since", fs.header.Get("Last-Modified")},
							{"Range", "bytes=0-99"},
						} {
							if cond[1] == "" {
								continue
							}
							fs, h2 := compressPair(t, client, method, srv, name, append(headers, cond))
							if d := diffCompare(fs, h2); d != "" {
								t.Errorf("%s %s %s, Accept-Encoding %q, %s %q:\n  %s", proto, method, name, accept, cond[0], cond[1], d)
							}
						}
					}
				}
			}
		}
	}
	// app.js, style.css, index.html, edge.txt, mid.js, mid2.css, mid3.css
	// and large.css, in zstd and gzip: each made once (in the
	// background), then held
	harness.WaitUntil(t, "16 variants to be made", func() bool { return stats().Made >= 16 })
	if got := stats().Made; got != 16 {
		t.Errorf("%v variants made, want 16 (8 files x 2 codings, once each); %+v", got, stats())
	}
	if stats().Hits == 0 {
		t.Error("no response was served from a held variant")
	}
}

// compressPair asks the file_server and h2_file_server halves of srv.
func compressPair(t *testing.T, c *http.Client, method string, srv *caddysite.Server, name string, headers [][2]string) (fs, h2 diffResponse) {
	t.Helper()
	site := diffSite{port: compressPort(t, srv), tls: true}
	fs = diffDo(diffClient{c: c}, method, site, "/fs/"+name, headers)
	h2 = diffDo(diffClient{c: c}, method, site, "/h2/"+name, headers)
	if fs.err != nil || h2.err != nil {
		t.Fatalf("%s %s: %v, %v", method, name, fs.err, h2.err)
	}
	return diffNormalize(fs, site.port), diffNormalize(h2, site.port)
}

// compressPort is the port srv listens on.
func compressPort(t *testing.T, srv *caddysite.Server) int {
	_, port, err := net.SplitHostPort(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCompressOnceForConcurrentRequests: many first requests for one file
// compress it once (encode answers them meanwhile), and all get its bytes.
func TestCompressOnceForConcurrentRequests(t *testing.T) {
	root := t.TempDir()
	content := []byte(strings.Repeat("body { font: 12px sans-serif; }\n", 30_000))
	harness.WriteFile(t, filepath.Join(root, "site.css"), content)
	srv := compressSite(t, root, nil)
	stats := compressStats(t)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			r := diffDo(diffClient{c: srv.H2}, http.MethodGet, diffSite{port: compressPort(t, srv), tls: true},
				"/h2/site.css", [][2]string{{"Accept-Encoding", "zstd"}})
			body, err := diffDecode("zstd", r.body)
			switch {
			case r.err != nil || err != nil:
				errs <- fmt.Errorf("%v, %v", r.err, err)
			case r.header.Get("Content-Encoding") != "zstd" || !bytes.Equal(body, content):
				errs <- fmt.Errorf("Content-Encoding %q, %d bytes decoded, want zstd and the file's %d",
					r.header.Get("Content-Encoding"), len(body), len(content))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	harness.WaitUntil(t, "the variant to be made", func() bool { return stats().Made >= 1 })
	if got := stats().Made; got != 1 {
		t.Errorf("32 concurrent first requests made %v variants, want 1", got)
	}
}

// TestCompressOversizedOnce: a file whose variant is over the limit (64
// KiB of random bytes, whose gzip is larger than the file, under a
// max_file_size of the file's size) is compressed once for a variant, not
// again for every request; encode answers each request, whole.
func TestCompressOversizedOnce(t *testing.T) {
	root := t.TempDir()
	content := harness.RandomBytes(t, 64<<10)
	harness.WriteFile(t, filepath.Join(root, "noise.css"), content)
	srv := compressSite(t, root, map[string]any{"max_file_size": len(content)})
	stats := compressStats(t)
	site := diffSite{port: compressPort(t, srv), tls: true}
	for i := range 6 {
		r := diffDo(diffClient{c: srv.H2}, http.MethodGet, site, "/h2/noise.css", [][2]string{{"Accept-Encoding", "gzip"}})
		body, err := diffDecode("gzip", r.body)
		if r.err != nil || err != nil || !bytes.Equal(body, content) {
			t.Fatalf("request %d: %v, %v, %d bytes decoded, want the file's %d", i, r.err, err, len(body), len(content))
		}
		if i == 0 {
			harness.WaitUntil(t, "the variant to be made", func() bool { return stats().Made >= 1 })
		} else {
			time.Sleep(50 * time.Millisecond) // time for a make the request began
		}
	}
	if st := stats(); st.Made != 1 || st.Held != 0 {
		t.Errorf("6 requests for a file whose variant is over the limit: %+v, want 1 made and none held", st)
	}
}

// TestCompressFreshAfterChange: a variant goes with its file's version.
// Once a variant of the file is served, a rename-over (which keeps the
// modification time), a change of the modification time alone and a
// rewrite in place that keeps the size and the modification time are each
// followed by responses of the new bytes, and never of the old ones again:
// from encode until a variant of the new version is made, then from that
// variant, and the old version's variant is let go (the site's store then
// holds one variant).
func TestCompressFreshAfterChange(t *testing.T) {
	root := t.TempDir()
	name := filepath.Join(root, "app.js")
	v1 := strings.Repeat("var one = 1; // first version\n", 2000)
	harness.WriteFile(t, name, []byte(v1))
	srv := compressSite(t, root, nil)
	stats := compressStats(t)
	site := diffSite{port: compressPort(t, srv), tls: true}
	fetch := func() (string, error) {
		r := diffDo(diffClient{c: srv.H2}, http.MethodGet, site, "/h2/app.js", [][2]string{{"Accept-Encoding", "gzip"}})
		if r.err != nil {
			return "", r.err
		}
		body, err := diffDecode("gzip", r.body)
		return string(body), err
	}
	// settled waits until the responses are of want (the first ones after
	// a change may be of the old bytes: the cache sees the change when the
	// watcher reports it), then until one is served from a variant (a hit
	// of the site's own store: the requests go one at a time) while the
	// store holds that variant alone and has let go of dropped variants in
	// all (the old version's is the one more than before the change); a
	// response of other bytes meanwhile fails the test. It waits on the
	// site's own store, for this response: a count of variants made also
	// moves with the variant of an earlier version, made in the background
	// after the waiting began.
	settled := func(version, want string, dropped int64) {
		t.Helper()
		harness.WaitUntil(t, "the "+version+" to be served", func() bool {
			body, err := fetch()
			return err == nil && body == want
		})
		harness.Eventually(t, 10*time.Second, func() error {
			hits := stats().Hits
			if body, err := fetch(); err != nil || body != want {
				t.Fatalf("after the %s was served: %d decoded bytes (%v), want its %d", version, len(body), err, len(want))
			}
			switch st := stats(); {
			case st.Dropped < dropped:
				return fmt.Errorf("the variant before the %s is still held (%+v)", version, st)
			case st.Hits == hits:
				return fmt.Errorf("the %s is not served from a variant (%+v)", version, st)
			case st.Held != 1:
				return fmt.Errorf("%d variants held after the %s was served from one, want it alone (%+v)", st.Held, version, st)
			}
			return nil
		})
	}
	settled("first version", v1, 0)

	v2 := strings.Repeat("var two = 2; // second version\n", 2000)
	dropped := stats().Dropped
	if err := harness.RenameOver(name, v2); err != nil {
		t.Fatal(err)
	}
	settled("renamed-over file", v2, dropped+1)

	dropped = stats().Dropped
	harness.SetMtimes(t, root, deployEpoch)
	settled("file with a new modification time", v2, dropped+1)

	// same size, same modification time, new bytes
	v3 := strings.Replace(v2, "two", "TWO", 1)
	dropped = stats().Dropped
	if err := harness.RewriteInPlace(name, v3); err != nil {
		t.Fatal(err)
	}
	settled("rewritten file", v3, dropped+1)
}

// TestCompressBrotli: with brotli on, a client that accepts br but not
// zstd gets br (where encode answers gzip: the one documented
// difference), marked in the ETag, which then matches for a 304; every
// other header is encode's, and one that accepts zstd still gets zstd.
func TestCompressBrotli(t *testing.T) {
	root := t.TempDir()
	content := strings.Repeat("function g(x) { return x * x; } // brotli\n", 3000)
	harness.WriteFile(t, filepath.Join(root, "app.js"), []byte(content))
	srv := compressSite(t, root, map[string]any{"brotli": map[string]any{}})
	// the first request is answered by encode, and makes the variant
	harness.WaitUntil(t, "the br variant to be served", func() bool {
		_, h2 := compressPair(t, srv.H2, http.MethodGet, srv, "app.js", [][2]string{{"Accept-Encoding", "gzip, br"}})
		return h2.header.Get("Content-Encoding") == "br"
	})
	for _, proto := range []string{"h2", "h1"} {
		c := srv.Client(t, proto)
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			fs, h2 := compressPair(t, c, method, srv, "app.js", [][2]string{{"Accept-Encoding", "gzip, br"}})
			if fs.header.Get("Content-Encoding") != "gzip" || h2.header.Get("Content-Encoding") != "br" {
				t.Fatalf("%s %s: Content-Encoding %q from encode, %q from the variant; want gzip and br",
					proto, method, fs.header.Get("Content-Encoding"), h2.header.Get("Content-Encoding"))
			}
			if want := strings.Replace(fs.header.Get("Etag"), "-gzip", "-br", 1); h2.header.Get("Etag") != want {
				t.Errorf("%s %s: ETag %q, want %q", proto, method, h2.header.Get("Etag"), want)
			}
			for _, k := range []string{"Content-Encoding", "Etag", "Content-Length"} {
				fs.header.Del(k)
				h2.header.Del(k)
			}
			if method == http.MethodGet {
				body, err := diffDecode("br", h2.body)
				if err != nil || string(body) != content {
					t.Errorf("%s: br body decodes to %d bytes (%v), want the file's %d", proto, len(body), err, len(content))
				}
				fs.body, h2.body = nil, nil
			}
			if d := diffCompare(fs, h2); d != "" {
				t.Errorf("%s %s: besides the coding:\n  %s", proto, method, d)
			}
		}
		_, h2 := compressPair(t, c, http.MethodGet, srv, "app.js", [][2]string{{"Accept-Encoding", "gzip, br"}})
		_, again := compressPair(t, c, http.MethodGet, srv, "app.js", [][2]string{{"Accept-Encoding", "gzip, br"}, {"If-None-Match", h2.header.Get("Etag")}})
		if again.status != http.StatusNotModified {
			t.Errorf("%s: If-None-Match with the br variant's ETag: status %d, want 304", proto, again.status)
		}
		fs, h2 := compressPair(t, c, http.MethodGet, srv, "app.js", [][2]string{{"Accept-Encoding", "gzip, deflate, br, zstd"}})
		if d := diffCompare(fs, h2); d != "" || h2.header.Get("Content-Encoding") != "zstd" {
			t.Errorf("%s: a client that accepts zstd (got %q):\n  %s", proto, h2.header.Get("Content-Encoding"), d)
		}
	}
}

// TestCompressStaysInBudget: under a mixed load of many files, in both
// codings, the variants held stay within max_memory (least recently used
// out), and every response decodes to its file.
func TestCompressStaysInBudget(t *testing.T) {
	root := t.TempDir()
	const files, budget = 60, 256 << 10
	contents := make([]string, files)
	for i := range contents {
		// 64 KB of hex digits, which compress to about half: 8 variants fit
		contents[i] = "/* " + hex.EncodeToString(harness.RandomBytes(t, 32<<10)) + " */\n"
		harness.WriteFile(t, filepath.Join(root, fmt.Sprintf("f%d.css", i)), []byte(contents[i]))
	}
	// the shared gauge, which every store in the process moves, before
	held := testutil.ToFloat64(variants.SharedMetrics.MemoryBytes)
	srv := compressSite(t, root, map[string]any{"max_memory": budget})
	stats := compressStats(t)
	site := diffSite{port: compressPort(t, srv), tls: true}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for round := range 3 {
				for i := range files {
					coding := []string{"gzip", "zstd"}[(i+w+round)%2]
					r := diffDo(diffClient{c: srv.H2}, http.MethodGet, site, fmt.Sprintf("/h2/f%d.css", (i*7+w)%files), [][2]string{{"Accept-Encoding", coding}})
					body, err := diffDecode(coding, r.body)
					if r.err != nil || err != nil || string(body) != contents[(i*7+w)%files] {
						select {
						case errs <- fmt.Errorf("f%d.css in %s: %v, %v, %d bytes decoded", (i*7+w)%files, coding, r.err, err, len(body)):
						default:
						}
						return
					}
					if held := stats().Bytes; held > budget {
						select {
						case errs <- fmt.Errorf("variants hold %v bytes, over max_memory %d", held, budget):
						default:
						}
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if stats().Dropped == 0 {
		t.Error("120 variants in a budget for about 8 evicted none")
	}
	// the config's variants go with it, and the shared gauge forgets them
	caddysite.StopCaddy(t)
	if st := stats(); st.Held != 0 || st.Bytes != 0 {
		t.Errorf("the store holds %d variants of %d bytes after Caddy stopped", st.Held, st.Bytes)
	}
	if now := testutil.ToFloat64(variants.SharedMetrics.MemoryBytes); now != held {
		t.Errorf("variants hold %v bytes after Caddy stopped, %v before it started", now, held)
	}
}
