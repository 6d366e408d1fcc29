package h2file

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestReplaceAllMatchesCaddy compares replaceAll with Caddy's own
// ReplaceAll, on a replacer prepared as for a real request, for inputs
// that take the shortcut and inputs that do not.
func TestReplaceAllMatchesCaddy(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "https://example.com/a/b.txt?q=1", nil)
	req.Header.Set("X-Dir", "/srv/from-header")
	repl := caddy.NewReplacer()
	req = caddyhttp.PrepareRequest(req, repl, httptest.NewRecorder(), nil)
	caddyhttp.SetVar(req.Context(), "root", "/srv/www")
	caddyhttp.SetVar(req.Context(), "empty", "")
	caddyhttp.SetVar(req.Context(), "number", 42)
	caddyhttp.SetVar(req.Context(), "fail", errors.New("an error"))
	caddyhttp.SetVar(req.Context(), "nothing", nil)
	repl.Set("static.dir", "/srv/static")

	inputs := []string{
		"", "{", "}", "{}", "{{}}", "/srv/www", ".",
		"{http.vars.root}", "{http.vars.empty}", "{http.vars.number}",
		"{http.vars.fail}", "{http.vars.nothing}", "{http.vars.missing}",
		"{http.request.header.X-Dir}", "{http.request.uri.path}",
		"{http.request.uri.query.q}", "{static.dir}", "{unknown.placeholder}",
		"{http.vars.root}/sub", "/base/{http.vars.root}", "{http.vars.root}{http.vars.root}",
		`\{http.vars.root}`, `{http.vars.root\}`, `{http.vars\.root}`,
		"{file./nonexistent}", "{http.vars.root", "http.vars.root}", "{ }",
	}
	for _, in := range inputs {
		for _, empty := range []string{".", ""} {
			want := repl.ReplaceAll(in, empty)
			if got := replaceAll(repl, in, empty); got != want {
				t.Errorf("replaceAll(%q, %q) = %q, Caddy's ReplaceAll gives %q", in, empty, got, want)
			}
		}
	}
	if key, ok := lonePlaceholder("{http.vars.root}"); !ok || key != "http.vars.root" {
		t.Errorf("lonePlaceholder({http.vars.root}) = %q, %v; want the shortcut", key, ok)
	}
}

// BenchmarkReplaceAllRoot resolves file_server's default root both ways.
func BenchmarkReplaceAllRoot(b *testing.B) {
	req := httptest.NewRequest(http.MethodGet, "https://example.com/", nil)
	repl := caddy.NewReplacer()
	req = caddyhttp.PrepareRequest(req, repl, httptest.NewRecorder(), nil)
	caddyhttp.SetVar(req.Context(), "root", "/srv/www/site")
	for _, c := range []struct {
		name string
		f    func() string
	}{
		{"caddy", func() string { return repl.ReplaceAll("{http.vars.root}", ".") }},
		{"h2file", func() string { return replaceAll(repl, "{http.vars.root}", ".") }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c.f() != "/srv/www/site" {
					b.Fatal("wrong root")
				}
			}
		})
	}
}
