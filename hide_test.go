package h2file

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// TestHidePlaceholdersPerRequest checks that hide entries with
// placeholders are resolved per request, and static ones once.
func TestHidePlaceholdersPerRequest(t *testing.T) {
	root := t.TempDir()
	harness.WriteFile(t, filepath.Join(root, "a.txt"), []byte("a"))
	harness.WriteFile(t, filepath.Join(root, "b.txt"), []byte("b"))
	harness.WriteFile(t, filepath.Join(root, "c.bak"), []byte("c"))
	h := &Handler{Root: root, Hide: []string{"{http.vars.secret}", "*.bak"}}
	if err := cfgProvision(t, h); err != nil {
		t.Fatal(err)
	}
	static := &Handler{Root: root, Hide: []string{filepath.Join(root, "a.txt")}}
	if err := cfgProvision(t, static); err != nil {
		t.Fatal(err)
	}
	status := func(h *Handler, path, secret string) int {
		w := httptest.NewRecorder()
		req := caddyhttp.PrepareRequest(httptest.NewRequest(http.MethodGet, path, nil), caddy.NewReplacer(), w, nil)
		caddyhttp.SetVar(req.Context(), "secret", secret)
		err := h.ServeHTTP(w, req, nil)
		var herr caddyhttp.HandlerError
		if errors.As(err, &herr) {
			return herr.StatusCode
		}
		if err != nil {
			t.Fatal(err)
		}
		return w.Code
	}
	for _, tc := range []struct {
		h            *Handler
		path, secret string
		want         int
	}{
		{h, "/a.txt", "a.txt", 404},
		{h, "/b.txt", "a.txt", 200},
		{h, "/a.txt", "b.txt", 200},
		{h, "/b.txt", "b.txt", 404},
		{h, "/c.bak", "a.txt", 404},
		{static, "/a.txt", "", 404},
		{static, "/b.txt", "", 200},
	} {
		if got := status(tc.h, tc.path, tc.secret); got != tc.want {
			t.Errorf("GET %s with secret %q: %d, want %d", tc.path, tc.secret, got, tc.want)
		}
	}
}
