package h2file

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/quic-go/quic-go/http3"
)

// TestHTTP3 serves files with h2_file_server and file_server over HTTP/3
// (QUIC) and compares the answers: whole files, ranges, conditional
// requests and sidecars.
func TestHTTP3(t *testing.T) {
	root := t.TempDir()
	content := randomBytes(t, 300_000)
	writeFile(t, filepath.Join(root, "big.bin"), content)
	writeFile(t, filepath.Join(root, "small.txt"), []byte("small over QUIC"))
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	certPEM, keyPEM := selfSignedCert(t)
	port := freePort(t)
	cfg := map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps": map[string]any{
			"http": map[string]any{
				"grace_period": 1,
				"servers": map[string]any{
					"h3": map[string]any{
						"listen":    []string{fmt.Sprintf("127.0.0.1:%d", port)},
						"protocols": []string{"h1", "h2", "h3"},
						"routes": []any{
							map[string]any{
								"match":  []any{map[string]any{"path": []string{"/stock/*"}}},
								"handle": []any{map[string]any{"handler": "rewrite", "strip_path_prefix": "/stock"}, map[string]any{"handler": "file_server", "root": root}},
							},
							map[string]any{"handle": []any{h2FileServer(root, nil)}},
						},
						"tls_connection_policies": []any{map[string]any{}},
						"automatic_https":         map[string]any{"disable": true},
					},
				},
			},
			"tls": map[string]any{"certificates": map[string]any{
				"load_pem": []any{map[string]any{"certificate": string(certPEM), "key": string(keyPEM)}},
			}},
		},
	}
	raw, _ := json.Marshal(cfg)
	if err := caddy.Load(raw, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopTestCaddy(t) })

	tr := &http3.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // test certificate
	t.Cleanup(func() { tr.Close() })
	client := &http.Client{Transport: tr}
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
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
