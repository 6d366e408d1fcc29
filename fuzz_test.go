package h2file

// Fuzz targets (issue "Reliability and security suite", part 5).
//
// FuzzSanitizedPath: the mapping of a request path to a file, and the hide
// rule applied to the result. FuzzServeRequest: h2_file_server's ServeHTTP,
// called directly with fuzzed method, path and conditional/range/encoding
// headers, against Caddy's file_server on the same input (fuzz_serve_test.go,
// its site and checks in integration/fuzz_serve_fixture_test.go).
//
// Plain `go test` runs the seeds: every path of testdata/hostile/paths.txt,
// the long ones of harness.GeneratedHostilePaths, and every request of the differential
// corpus (testdata/diff/*.txt). To fuzz:
//
//	go test -run XXX -fuzz FuzzSanitizedPath -fuzztime 60s .
//	go test -run XXX -fuzz FuzzServeRequest -fuzztime 60s ./integration

import (
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// fzSeedPaths are the request-targets every fuzz target starts from.
func fzSeedPaths(f *testing.F) []string {
	paths := append(harness.HostilePaths(f, "testdata"), harness.GeneratedHostilePaths()...)
	for _, e := range harness.Corpus(f, "testdata") {
		paths = append(paths, e.Target)
	}
	return paths
}

// fzHiddenRef is an independent model of fileHidden for the hide list of
// FuzzSanitizedPath (globs and names without a separator, and literal
// absolute paths): a name hides any path with a component of that name, a
// path hides itself and everything below it.
func fzHiddenRef(root, filename string) bool {
	for _, c := range strings.Split(filename, "/") {
		if strings.HasSuffix(c, ".secret") || c == "private" || c == ".git" {
			return true
		}
	}
	rel, ok := strings.CutPrefix(filename, root+"/")
	if !ok {
		return false
	}
	for _, p := range []string{"hiddendir", "Caddyfile", "a b/c"} {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// FuzzSanitizedPath checks what is true of the path h2_file_server (and
// file_server) derive from a request path p, as ServeHTTP does it:
// filename = SanitizedPathJoin(root, p) without a trailing slash.
//
//  1. filename is root or below it, with no ".." element, and clean.
//  2. It depends only on p cleaned: variants of p that differ by "./",
//     doubled slashes, "x/..", a trailing slash map to the same file.
//  3. fileHidden gives the same answer for filename, filename with a
//     trailing slash and filename with "/." (fileHidden sees paths that
//     are not clean in index lookups and sidecar names), and that answer is
//     the independent model's, fzHiddenRef: a hidden file is never visible
//     by another spelling. (file_server's rule: with a glob hide path like
//     /root/dir-* only the directory is hidden, not what is in it; no such
//     entry is used here, TestSecHostilePaths shows that case.)
//  4. Hiding a directory hides everything below it.
//  5. The index files of a hidden directory are hidden, and so are the
//     sidecars (.gz .br .zst) of a file in a hidden directory. The sidecars
//     of a file hidden by its own name are not: neither *.secret, nor the
//     name "private", nor the path <root>/Caddyfile matches x.secret.gz,
//     private.gz or Caddyfile.gz (file_server's rule; TestSecHostilePaths
//     lists these exposures).
func FuzzSanitizedPath(f *testing.F) {
	for _, p := range fzSeedPaths(f) {
		f.Add(p)
		if u, err := url.ParseRequestURI(p); err == nil {
			f.Add(u.Path) // as the handler sees it
		}
	}
	const root = "/srv/www"
	hide := []string{"*.secret", "private", ".git", root + "/hiddendir", root + "/Caddyfile", root + "/a b/c"}

	mapped := func(p string) string {
		return strings.TrimSuffix(caddyhttp.SanitizedPathJoin(root, p), "/")
	}
	// the hide list and the model hide what they should: the checks can fail
	for _, p := range []string{"/x.secret", "/a/private/b", "/hiddendir", "/hiddendir/x", "/Caddyfile", "/a b/c/d", "/d/.git/config"} {
		if !fileHidden(mapped(p), hide) || !fzHiddenRef(root, mapped(p)) {
			f.Fatalf("%s is not hidden", p)
		}
	}
	for _, p := range []string{"/x.secret.gz", "/privateer", "/hiddendir2", "/Caddyfile.gz", "/a b/cd", "/"} {
		if fileHidden(mapped(p), hide) || fzHiddenRef(root, mapped(p)) {
			f.Fatalf("%s is hidden", p)
		}
	}
	f.Fuzz(func(t *testing.T, p string) {
		filename := mapped(p)
		if filename != root && !strings.HasPrefix(filename, root+"/") {
			t.Fatalf("%q maps to %q, outside %s", p, filename, root)
		}
		if filepath.Clean(filename) != filename {
			t.Fatalf("%q maps to %q, which is not clean", p, filename)
		}
		for _, elem := range strings.Split(filename, "/") {
			if elem == ".." {
				t.Fatalf("%q maps to %q, with a .. element", p, filename)
			}
		}
		if rel := caddyhttp.SanitizedPathJoin(".", p); filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("%q maps to %q under a relative root", p, rel)
		}

		for _, v := range []string{"/" + p, p + "/", "/./" + p, strings.ReplaceAll(p, "/", "//"), "/x/../" + p, p + "/.", "/" + path.Clean("/"+p)} {
			if got := mapped(v); got != filename {
				t.Fatalf("%q maps to %q but its variant %q to %q", p, filename, v, got)
			}
		}

		hidden := fileHidden(filename, hide)
		if want := fzHiddenRef(root, filename); hidden != want {
			t.Fatalf("fileHidden(%q) = %v, the model says %v", filename, hidden, want)
		}
		for _, v := range []string{filename + "/", filename + "/.", filename + "//", root + "/./" + strings.TrimPrefix(filename, root)} {
			if got := fileHidden(v, hide); got != hidden {
				t.Fatalf("fileHidden(%q) = %v but fileHidden(%q) = %v", filename, hidden, v, got)
			}
		}
		// (the 16 closest directories, in paths under 4 KiB: paths of
		// thousands of elements would make this quadratic)
		for dir, n := filepath.Dir(filename), 0; len(dir) > len(root) && n < 16 && len(filename) < 4096; dir, n = filepath.Dir(dir), n+1 {
			if fileHidden(dir, hide) && !hidden {
				t.Fatalf("%q is hidden but %q below it is not", dir, filename)
			}
		}
		if hidden {
			for _, index := range []string{"index.html", "index.secret", "default.htm"} {
				if v := caddyhttp.SanitizedPathJoin(filename, index); !fileHidden(v, hide) {
					t.Fatalf("%q is hidden but its index file %q is not", filename, v)
				}
			}
		}
		if fileHidden(filepath.Dir(filename), hide) {
			for _, suffix := range []string{".gz", ".br", ".zst"} {
				if !fileHidden(filename+suffix, hide) {
					t.Fatalf("%q is in a hidden directory but its sidecar %q is not", filename, filename+suffix)
				}
			}
		}
	})
}
