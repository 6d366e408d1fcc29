package h2file

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestJoinMemo: the memo answers what caddyhttp.SanitizedPathJoin does,
// for hostile paths too, from its first call and from memory, stays
// within its bound, and answers a memoized path without allocating.
func TestJoinMemo(t *testing.T) {
	var m joinMemo
	roots := []string{"", ".", "/srv/www", "/srv/www/", "C:\\www"}
	paths := []string{"", "/", "/a.txt", "/dir/", "/../etc/passwd", "/a/../../b", "//double//slash/", "/%2e%2e/x",
		"/a\x00b", "/.hidden", "/dir/./x", "/" + strings.Repeat("long/", 200)}
	for range 2 { // the second time from the memo
		for _, root := range roots {
			for _, p := range paths {
				if got, want := m.join(root, p), caddyhttp.SanitizedPathJoin(root, p); got != want {
					t.Errorf("join(%q, %q) = %q, SanitizedPathJoin %q", root, p, got, want)
				}
			}
		}
	}
	for i := range 3 * maxJoinsCached {
		m.join("/srv", "/f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26))
	}
	if n := len(m.joined); n > maxJoinsCached {
		t.Errorf("%d joins memoized, want at most %d", n, maxJoinsCached)
	}
	m.join("/srv", "/hot.css")
	if allocs := testing.AllocsPerRun(100, func() { m.join("/srv", "/hot.css") }); allocs != 0 {
		t.Errorf("a memoized join allocated %.1f times, want 0", allocs)
	}
	var unprovisioned *joinMemo
	if got, want := unprovisioned.join("/srv", "/../x"), caddyhttp.SanitizedPathJoin("/srv", "/../x"); got != want {
		t.Errorf("a nil memo: %q, want %q", got, want)
	}
}
