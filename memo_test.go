package h2file

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
)

// TestRequestMemos: each memo answers what its function does, for hostile
// arguments too, from its first call and from memory, stays within its
// bound, and answers a memoized argument without allocating; a nil memo
// (a handler not provisioned) answers too.
func TestRequestMemos(t *testing.T) {
	m := new(requestMemos)
	roots := []string{"", ".", "/srv/www", "/srv/www/", "C:\\www"}
	paths := []string{"", "/", "/a.txt", "/dir/", "/../etc/passwd", "/a/../../b", "//double//slash/", "/%2e%2e/x",
		"/a\x00b", "/.hidden", "/dir/./x", "/" + strings.Repeat("long/", 200)}
	order := []string{"br", "zstd", "gzip"}
	acceptEncodings := []string{"", "gzip", "gzip, deflate, br, zstd", "br;q=1, gzip;q=0.8", "GZIP;q=0.5, br;q=0", "identity", "*", "zstd;q=0.001, br;q=0.0001",
		"gzip;q=1.5, br", "x, , y;;q=1", strings.Repeat("gzip, ", 200)}
	for range 2 { // the second time from the memos
		for _, root := range roots {
			for _, p := range paths {
				if got, want := m.join(root, p), caddyhttp.SanitizedPathJoin(root, p); got != want {
					t.Errorf("join(%q, %q) = %q, SanitizedPathJoin %q", root, p, got, want)
				}
				if got, want := m.sidecarName(root+p, ".br"), root+p+".br"; got != want {
					t.Errorf("sidecarName(%q, .br) = %q, want %q", root+p, got, want)
				}
				etag := `"` + root + p + `"`
				if got, want := m.variantETag(etag, "zstd"), strings.TrimSuffix(etag, `"`)+"-zstd"+`"`; got != want {
					t.Errorf("variantETag(%q, zstd) = %q, want %q", etag, got, want)
				}
			}
		}
		for _, ae := range acceptEncodings {
			for _, header := range []http.Header{
				{"Accept-Encoding": {ae}},
				{"Accept-Encoding": {ae, "zstd"}},
				{"Accept-Encoding": {ae}, "Sec-Websocket-Key": {"k"}},
			} {
				r := &http.Request{Header: header}
				if got, want := m.acceptedEncodings(r, &order), encode.AcceptedEncodings(r, order); !slices.Equal(got, want) {
					t.Errorf("acceptedEncodings(%q) = %q, AcceptedEncodings %q", header, got, want)
				}
			}
		}
	}
	for i := range 3 * maxMemoEntries {
		m.join("/srv", "/f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26))
	}
	if n := m.joins.len(); n > maxMemoEntries {
		t.Errorf("%d joins memoized, want at most %d", n, maxMemoEntries)
	}
	hot := &http.Request{Header: http.Header{"Accept-Encoding": {"gzip, deflate, br, zstd"}}}
	m.join("/srv", "/hot.css")
	m.sidecarName("/srv/hot.css", ".br")
	m.acceptedEncodings(hot, &order)
	m.variantETag(`"abc"`, "gzip")
	if allocs := testing.AllocsPerRun(100, func() {
		m.join("/srv", "/hot.css")
		m.sidecarName("/srv/hot.css", ".br")
		m.acceptedEncodings(hot, &order)
		m.variantETag(`"abc"`, "gzip")
	}); allocs != 0 {
		t.Errorf("memoized calls allocated %.1f times, want 0", allocs)
	}
	var unprovisioned *requestMemos
	if got, want := unprovisioned.join("/srv", "/../x"), caddyhttp.SanitizedPathJoin("/srv", "/../x"); got != want {
		t.Errorf("a nil memo: %q, want %q", got, want)
	}
	if got, want := unprovisioned.acceptedEncodings(hot, &order), encode.AcceptedEncodings(hot, order); !slices.Equal(got, want) {
		t.Errorf("a nil memo: %q, want %q", got, want)
	}
}
