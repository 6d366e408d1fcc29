package integration

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// TestHTTP3 serves files with h2_file_server and file_server over HTTP/3
// (QUIC) and compares the answers: whole files, ranges, conditional
// requests and sidecars.
func TestHTTP3(t *testing.T) {
	root := t.TempDir()
	content := harness.RandomBytes(t, 300_000)
	harness.WriteFile(t, filepath.Join(root, "big.bin"), content)
	harness.WriteFile(t, filepath.Join(root, "small.txt"), []byte("small over QUIC"))
	srv := caddysite.Start(t, caddysite.Config{
		Protocols: []string{"h1", "h2", "h3"},
		NoAdmin:   true,
		Routes: []any{
			map[string]any{
				"match":  []any{map[string]any{"path": []string{"/stock/*"}}},
				"handle": []any{map[string]any{"handler": "rewrite", "strip_path_prefix": "/stock"}, map[string]any{"handler": "file_server", "root": root}},
			},
			map[string]any{"handle": []any{caddysite.H2FileServer(root, nil)}},
		},
	})
	client, base := srv.H3, srv.URL
	get := func(path string, header http.Header) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s over HTTP/3: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		if resp.ProtoMajor != 3 {
			t.Fatalf("GET %s: protocol %s, want HTTP/3", path, resp.Proto)
		}
		return resp, body
	}
	for _, tc := range []struct {
		path   string
		header http.Header
	}{
		{"/big.bin", nil},
		{"/small.txt", nil},
		{"/big.bin", http.Header{"Range": {"bytes=1000-199999"}}},
		{"/big.bin", http.Header{"Range": {"bytes=0-0,-5"}}},
		{"/missing", nil},
	} {
		ours, ourBody := get(tc.path, tc.header)
		stock, stockBody := get("/stock"+tc.path, tc.header)
		ourBody, stockBody = h3WithoutBoundary(ours, ourBody), h3WithoutBoundary(stock, stockBody)
		if ours.StatusCode != stock.StatusCode {
			t.Fatalf("%s %v: status %d, file_server %d", tc.path, tc.header, ours.StatusCode, stock.StatusCode)
		}
		for _, h := range []string{"Content-Length", "Content-Type", "Etag", "Last-Modified", "Accept-Ranges", "Content-Range", "Vary"} {
			if ours.Header.Get(h) != stock.Header.Get(h) {
				t.Errorf("%s %v: %s %q, file_server %q", tc.path, tc.header, h, ours.Header.Get(h), stock.Header.Get(h))
			}
		}
		if !bytes.Equal(ourBody, stockBody) {
			t.Errorf("%s %v: bodies differ (%d and %d bytes)", tc.path, tc.header, len(ourBody), len(stockBody))
		}
	}
	resp, body := get("/big.bin", nil)
	if !bytes.Equal(body, content) {
		t.Fatal("HTTP/3 body differs from the file")
	}
	etag := resp.Header.Get("Etag")
	if resp, _ := get("/big.bin", http.Header{"If-None-Match": {etag}}); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match over HTTP/3: %d", resp.StatusCode)
	}
}

// h3WithoutBoundary replaces a multipart response's random boundary, in its
// Content-Type and its body, with a fixed one.
func h3WithoutBoundary(resp *http.Response, body []byte) []byte {
	_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if boundary := params["boundary"]; err == nil && boundary != "" {
		resp.Header.Set("Content-Type", strings.ReplaceAll(resp.Header.Get("Content-Type"), boundary, "BOUNDARY"))
		body = bytes.ReplaceAll(body, []byte(boundary), []byte("BOUNDARY"))
	}
	return body
}
