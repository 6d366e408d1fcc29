package integration

// FuzzServeRequest (see fuzz_test.go): h2_file_server's ServeHTTP against
// file_server's on fuzzed method, path and headers.

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/h2file/caddy-h2file/internal/harness"
)

func FuzzServeRequest(f *testing.F) {
	fx := fzBuildFixture(f)
	fsrv, h2s := fzHandlers(f, fx.root)

	info, err := os.Stat(filepath.Join(fx.root, "hello.txt"))
	if err != nil {
		f.Fatal(err)
	}
	helloEtag := fileServerETag(info)
	lastMod := info.ModTime().UTC().Format(http.TimeFormat)
	placeholder := regexp.MustCompile(`\{(etag|lastmod):[^}]*\}`)
	expand := func(v string) string {
		return placeholder.ReplaceAllStringFunc(v, func(m string) string {
			if strings.HasPrefix(m, "{etag") {
				return helloEtag
			}
			return lastMod
		})
	}
	type seed struct {
		method, target, rng, ifRange, inm, im, ims, ius, ae string
		h1                                                  bool
	}
	var seeds []seed
	for i, p := range append(harness.HostilePaths(f, "../testdata"), harness.GeneratedHostilePaths()...) {
		seeds = append(seeds, seed{method: "GET", target: p, h1: i%2 == 1})
		seeds = append(seeds, seed{method: "GET", target: p, ae: "br, zstd, gzip", rng: "bytes=0-3,5-"})
	}
	for _, e := range harness.Corpus(f, "../testdata") {
		s := seed{method: e.Method, target: e.Target}
		for _, h := range e.Headers {
			v := expand(h[1])
			switch strings.ToLower(h[0]) {
			case "range":
				s.rng = v
			case "if-range":
				s.ifRange = v
			case "if-none-match":
				s.inm = v
			case "if-match":
				s.im = v
			case "if-modified-since":
				s.ims = v
			case "if-unmodified-since":
				s.ius = v
			case "accept-encoding":
				s.ae = v
			}
		}
		seeds = append(seeds, s, seed{s.method, s.target, s.rng, s.ifRange, s.inm, s.im, s.ims, s.ius, s.ae, true})
	}
	seeds = append(seeds,
		seed{method: "GET", target: "/big.bin", rng: "bytes=0-0,-1,50000-50100", ifRange: helloEtag},
		seed{method: "GET", target: "/big.bin", rng: "bytes=100-", h1: true},
		seed{method: "GET", target: "/style.css", rng: "bytes=2-5", ae: "gzip;q=0.5, br;q=0.9, zstd"},
		seed{method: "HEAD", target: "/dir/", ae: "gzip", inm: "*"},
		seed{method: "GET", target: "/hello.txt", im: helloEtag, ius: lastMod, ims: lastMod},
	)
	for _, s := range seeds {
		f.Add(s.method, s.target, s.rng, s.ifRange, s.inm, s.im, s.ims, s.ius, s.ae, s.h1)
	}

	// the harness serves the site, and its checks can fail
	{
		t := f
		get := func(h caddyhttp.MiddlewareHandler, target string) diffResponse {
			u, _ := url.ParseRequestURI(target)
			return fzServe(t, h, http.MethodGet, u, target, http.Header{}, false)
		}
		for _, h := range append([]caddyhttp.MiddlewareHandler{fsrv}, h2s...) {
			if r := get(h, "/hello.txt"); r.status != 200 || string(r.body) != "Hello, fuzz!\n" {
				t.Fatalf("GET /hello.txt: %d %q", r.status, r.body)
			}
			if r := get(h, "/x.secret"); r.status != 404 {
				t.Fatalf("GET /x.secret: %d", r.status)
			}
		}
		if fzCheckBody(fx, diffResponse{status: 200, body: []byte("not a file")}, http.MethodGet) == nil {
			t.Fatal("a body that is no file passes")
		}
		if fzCheckBody(fx, diffResponse{status: 206, header: http.Header{"Content-Range": {"bytes 1-3/13"}}, body: []byte("ell")}, http.MethodGet) != nil {
			t.Fatal("a right range fails")
		}
		if fzCheckBody(fx, diffResponse{status: 206, header: http.Header{"Content-Range": {"bytes 1-3/13"}}, body: []byte("ELL")}, http.MethodGet) == nil {
			t.Fatal("a wrong range passes")
		}
		secret, err := os.ReadFile(filepath.Join(fx.root, "x.secret"))
		if err != nil || !fzMarker.Match(secret) {
			t.Fatalf("x.secret has no marker: %q %v", secret, err)
		}
		if diffCompare(get(fsrv, "/hello.txt"), get(h2s[0], "/dir/page.txt")) == "" {
			t.Fatal("different responses compare equal")
		}
	}

	f.Fuzz(func(t *testing.T, method, target, rng, ifRange, inm, im, ims, ius, ae string, h1 bool) {
		u, err := url.ParseRequestURI(target)
		if err != nil || method == "" || strings.ContainsAny(method, " \t\r\n") {
			return // no server passes such a request on
		}
		hdr := http.Header{}
		for _, h := range [][2]string{
			{"Range", rng}, {"If-Range", ifRange}, {"If-None-Match", inm}, {"If-Match", im},
			{"If-Modified-Since", ims}, {"If-Unmodified-Since", ius}, {"Accept-Encoding", ae},
		} {
			if h[1] != "" {
				hdr.Set(h[0], h[1])
			}
		}
		want := fzServe(t, fsrv, method, u, target, hdr, h1)
		if !slices.Contains(fzStatuses, want.status) {
			t.Fatalf("file_server: status %d", want.status)
		}
		for i, h2 := range h2s {
			got := fzServe(t, h2, method, u, target, hdr, h1)
			name := []string{"cache", "cache without memory", "no cache"}[i]
			if !slices.Contains(fzStatuses, got.status) {
				t.Fatalf("h2_file_server (%s): status %d", name, got.status)
			}
			for _, r := range []diffResponse{want, got} {
				if m := fzMarker.Find(r.body); m != nil {
					t.Fatalf("h2_file_server (%s) or file_server served %s: %s %q\n%s", name, m, method, target, diffFormat(r))
				}
			}
			if err := fzCheckBody(fx, got, method); err != nil {
				t.Fatalf("h2_file_server (%s): %s %q: %v\n%s", name, method, target, err, diffFormat(got))
			}
			if diff := diffCompare(diffNormalize(want, -1), diffNormalize(got, -1)); diff != "" {
				t.Fatalf("h2_file_server (%s) differs from file_server: %s %q %v h1=%v:\n  %s\nfile_server:\n%s\nh2_file_server:\n%s",
					name, method, target, hdr, h1, diff, diffFormat(diffNormalize(want, -1)), diffFormat(diffNormalize(got, -1)))
			}
		}
	})
}
