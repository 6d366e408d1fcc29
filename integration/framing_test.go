package integration

// HTTP/1.1 framing: a response that http.ServeContent sends without a
// Content-Length (a Content-Encoding is set and no range is served) is
// framed by net/http from the way its body arrives. h2_file_server must
// frame every such response, and every other, as file_server does:
// Content-Length or chunked, for every size, from memory, from a cached
// descriptor or from a file of its own, GET and HEAD, over plain TCP and
// over TLS. HTTP/2 (over TLS) is compared too: there the server adds a
// Content-Length or not, depending on how the body arrives.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// framingSizes are the body sizes tried: around net/http's 512-byte sniff
// copy and its 2048-byte buffer before chunking, and beyond.
var framingSizes = []int{0, 1, 511, 512, 513, 1028, 2047, 2048, 2049, 4095, 4096, 5000}

// framingHandlers are the file handlers compared, chosen by the X-h2file.Handler
// request header: file_server, and h2_file_server with bodies from memory,
// from cached descriptors, without the cache, and in writes smaller than
// net/http's buffers.
var framingHandlers = []struct {
	name  string
	extra map[string]any
}{
	{"file_server", nil},
	{"memory", nil},
	{"descriptor", map[string]any{"cache": map[string]any{"small_file_max": 1}}},
	{"uncached", map[string]any{"cache": map[string]any{"disabled": true}}},
	{"small writes", map[string]any{"write_chunk": 1000}},
}

// framingRoutes serves root with each of framingHandlers; a request with
// X-Set-Encoding gets a Content-Encoding from a headers handler first.
func framingRoutes(root string) []any {
	routes := []any{map[string]any{
		"match": []any{map[string]any{"header": map[string][]string{"X-Set-Encoding": {"1"}}}},
		"handle": []any{map[string]any{
			"handler":  "headers",
			"response": map[string]any{"set": map[string][]string{"Content-Encoding": {"gzip"}}},
		}},
	}}
	for _, fh := range framingHandlers {
		handler := caddysite.H2FileServer(root, fh.extra)
		if fh.name == "file_server" {
			handler["handler"] = "file_server"
		}
		handler["precompressed"] = map[string]any{"gzip": map[string]any{}}
		handler["precompressed_order"] = []string{"gzip"}
		routes = append(routes, map[string]any{
			"match":    []any{map[string]any{"header": map[string][]string{"X-Handler": {fh.name}}}},
			"handle":   []any{handler},
			"terminal": true,
		})
	}
	return []any{map[string]any{"handler": "subroute", "routes": routes}}
}

// framingFixture writes f<size>.txt and its sidecar f<size>.txt.gz (of the
// same size, other bytes) for every size, settled in the past so that
// small files are held in memory.
func framingFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	old := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, size := range framingSizes {
		for _, name := range []string{fmt.Sprintf("f%d.txt", size), fmt.Sprintf("f%d.txt.gz", size)} {
			content := bytes.Repeat([]byte(name[len(name)-3:]), size/3+1)[:size]
			path := filepath.Join(root, name)
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// framingResponse is what framing and content a response had.
type framingResponse struct {
	status           int
	contentLength    int64
	transferEncoding []string
	header           http.Header
	body             []byte
}

func (r framingResponse) String() string {
	return fmt.Sprintf("%d Content-Length=%d Transfer-Encoding=%q body=%d bytes header=%v",
		r.status, r.contentLength, r.transferEncoding, len(r.body), r.header)
}

// framingCase is one kind of request.
type framingCase struct {
	name    string
	headers map[string]string
	// noLength marks requests that ServeContent answers without a
	// Content-Length, so that net/http chooses the framing
	noLength bool
}

var framingCases = []framingCase{
	{name: "plain"},
	{name: "encoding set before", headers: map[string]string{"X-Set-Encoding": "1"}, noLength: true},
	{name: "sidecar", headers: map[string]string{"Accept-Encoding": "gzip"}},
	{
		// file_server sets the sidecar's Content-Length only without a
		// Range header; an If-Range that does not match ignores the range
		name:     "sidecar, range ignored",
		headers:  map[string]string{"Accept-Encoding": "gzip", "Range": "bytes=0-0", "If-Range": `"nomatch"`},
		noLength: true,
	},
	{name: "range", headers: map[string]string{"Range": "bytes=0-0"}},
}

func TestFramingMatchesFileServer(t *testing.T) {
	root := framingFixture(t)
	for _, transport := range []string{"plain", "tls"} {
		t.Run(transport, func(t *testing.T) {
			var srv *caddysite.Server
			if transport == "plain" {
				srv = caddysite.StartPlainCaddy(t, framingRoutes(root)...)
			} else {
				srv = caddysite.StartTestCaddy(t, framingRoutes(root)...)
			}
			framingWaitReady(t, srv)
			clients := map[string]*http.Client{"HTTP/1.1": srv.H1}
			if srv.H2 != nil {
				// HTTP/2 has no chunking, but a Content-Length may be
				// added by the server or not, by how the body arrives
				clients["HTTP/2"] = srv.H2
			}
			chunkedSizes := map[int]bool{}
			for proto, client := range clients {
				for _, tc := range framingCases {
					for _, method := range []string{http.MethodGet, http.MethodHead} {
						for _, size := range framingSizes {
							target := fmt.Sprintf("%s/f%d.txt", srv.URL, size)
							// twice: the first request fills the cache
							for round := range 2 {
								want := framingDo(t, client, method, target, "file_server", tc.headers)
								if want.transferEncoding != nil && tc.noLength && method == http.MethodGet {
									chunkedSizes[size] = true
								}
								for _, fh := range framingHandlers[1:] {
									got := framingDo(t, client, method, target, fh.name, tc.headers)
									if d := framingDiff(want, got); d != "" {
										t.Errorf("%s: %s %s, %s, %s, round %d: %s\nfile_server:    %v\nh2_file_server: %v",
											proto, method, target, tc.name, fh.name, round, d, want, got)
									}
								}
							}
						}
					}
				}
			}
			// the sizes where net/http's choice depends on the copy must
			// be among those tried, or the test proves nothing
			if transport == "plain" && (!chunkedSizes[512] || chunkedSizes[511]) {
				t.Errorf("file_server chunked sizes %v: want 512 and up, not 511", slices.Sorted(maps.Keys(chunkedSizes)))
			}
		})
	}
}

// framingWaitReady waits until the server answers (TLS needs its
// certificate loaded).
func framingWaitReady(t *testing.T, srv *caddysite.Server) {
	t.Helper()
	// over TLS, Caddy's default protocols include HTTP/3, whose listener
	// Caddy starts in the background: until it serves, responses carry no
	// Alt-Svc, and the first request of a pair could differ from the second
	overTLS := strings.HasPrefix(srv.URL, "https://")
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := srv.H1.Get(srv.URL + "/f0.txt")
		if err == nil {
			resp.Body.Close()
			if !overTLS || resp.Header.Get("Alt-Svc") != "" {
				return
			}
			err = errors.New("no Alt-Svc yet: HTTP/3 not serving")
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// framingDo sends one request to the handler named handler.
func framingDo(t *testing.T, c *http.Client, method, target, handler string, headers map[string]string) framingResponse {
	t.Helper()
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Handler", handler)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s (%s): %v", method, target, handler, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s (%s): reading body: %v", method, target, handler, err)
	}
	h := resp.Header.Clone()
	h.Del("Date")
	return framingResponse{
		status:           resp.StatusCode,
		contentLength:    resp.ContentLength,
		transferEncoding: resp.TransferEncoding,
		header:           h,
		body:             body,
	}
}

// framingDiff describes how two responses differ, "" if they do not.
func framingDiff(want, got framingResponse) string {
	switch {
	case want.status != got.status:
		return "status differs"
	case want.contentLength != got.contentLength || !slices.Equal(want.transferEncoding, got.transferEncoding):
		return "framing differs"
	case !bytes.Equal(want.body, got.body):
		return "body differs"
	}
	for k, v := range want.header {
		if !slices.Equal(v, got.header[k]) {
			return "header " + k + " differs"
		}
	}
	for k := range got.header {
		if _, ok := want.header[k]; !ok {
			return "extra header " + k
		}
	}
	return ""
}
