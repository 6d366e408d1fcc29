package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
