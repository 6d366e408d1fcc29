package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestCeilingServesTheFilesBytes checks that a GET gets a file's bytes and
// length, a HEAD its length alone, and a missing path or another method
// reaches the next handler.
func TestCeilingServesTheFilesBytes(t *testing.T) {
	root := t.TempDir()
	body := strings.Repeat("ceiling", 5000)
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "d", "f.bin"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Ceiling{Root: root}
	if err := c.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
	for _, tc := range []struct {
		method, path string
		status       int
		length, body string
	}{
		{http.MethodGet, "/d/f.bin", 200, "35000", body},
		{http.MethodHead, "/d/f.bin", 200, "35000", ""},
		{http.MethodGet, "/d/../d/f.bin", 200, "35000", body},
		{http.MethodGet, "/d/missing", http.StatusTeapot, "", ""},
		{http.MethodPost, "/d/f.bin", http.StatusTeapot, "", ""},
	} {
		rec := httptest.NewRecorder()
		if err := c.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil), next); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tc.status || rec.Header().Get("Content-Length") != tc.length || rec.Body.String() != tc.body {
			t.Errorf("%s %s: status %d, Content-Length %q, %d body bytes; want %d, %q, %d",
				tc.method, tc.path, rec.Code, rec.Header().Get("Content-Length"), rec.Body.Len(), tc.status, tc.length, len(tc.body))
		}
	}
}

// TestCeilingServesGzipSidecars checks that a file with a .gz sidecar is
// answered with the sidecar's bytes when the request accepts gzip, and
// with its own bytes otherwise, Vary and Content-Type set either way.
func TestCeilingServesGzipSidecars(t *testing.T) {
	root := t.TempDir()
	plain, gz := strings.Repeat("body{}", 1000), "not really gzip"
	if err := os.WriteFile(filepath.Join(root, "a.css"), []byte(plain), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a.css.gz"), []byte(gz), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Ceiling{Root: root}
	if err := c.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ accept, encoding, body string }{
		{"gzip, deflate, br, zstd", "gzip", gz},
		{"br", "", plain},
		{"", "", plain},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/a.css", nil)
		req.Header.Set("Accept-Encoding", tc.accept)
		if err := c.ServeHTTP(rec, req, nil); err != nil {
			t.Fatal(err)
		}
		h := rec.Header()
		if h.Get("Content-Encoding") != tc.encoding || rec.Body.String() != tc.body || h.Get("Vary") != "Accept-Encoding" ||
			!strings.HasPrefix(h.Get("Content-Type"), "text/css") || h.Get("Content-Length") != strconv.Itoa(len(tc.body)) {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, Vary %q, Content-Type %q, Content-Length %q, body %q; want %q and %d bytes",
				tc.accept, h.Get("Content-Encoding"), h.Get("Vary"), h.Get("Content-Type"), h.Get("Content-Length"), rec.Body.String()[:min(20, rec.Body.Len())], tc.encoding, len(tc.body))
		}
	}
}

// TestCeilingCaddyfile checks the directive's block and its errors.
func TestCeilingCaddyfile(t *testing.T) {
	var c Ceiling
	if err := c.UnmarshalCaddyfile(caddyfile.NewTestDispenser("bench_ceiling {\n\troot /srv\n}")); err != nil || c.Root != "/srv" {
		t.Errorf("bench_ceiling { root /srv }: root %q, error %v", c.Root, err)
	}
	for _, bad := range []string{"bench_ceiling x", "bench_ceiling {\n\troot\n}", "bench_ceiling {\n\troot /a /b\n}", "bench_ceiling {\n\tdir /a\n}"} {
		if err := new(Ceiling).UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if err := new(Ceiling).Provision(caddy.Context{}); err == nil {
		t.Error("Provision without a root: no error")
	}
}
