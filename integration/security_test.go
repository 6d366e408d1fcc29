package integration

// Reliability and security suite, parts 1 and 2.
//
// TestSecHostilePaths: nothing outside the root, nothing hidden. Every
// request-target of testdata/hostile/paths.txt (plus long ones made by
// harness.GeneratedHostilePaths) is sent raw over HTTP/2 (TLS), HTTP/1.1 (TLS) and
// cleartext HTTP/1.1 to a file_server site and an h2_file_server site with
// the same configuration (the differential suite's machinery:
// diff_client_test.go, diff_caddy_test.go). The responses must be
// identical (diffCompare after diffNormalize), and no
// body may hold a marker of a hidden file or of a file outside the root,
// except through the exposures listed in secExposures: the ways file_server
// itself serves such a file (symlinks, unhidden sidecars, glob hide paths),
// which h2_file_server must reproduce, not widen. Then, with the open-file
// cache warmed by allowed requests, the hidden and outside variants of the
// same files are requested: the cache must not let them through.
//
// TestWrongBytesUnderMutation: no wrong bytes. Files are hammered with
// concurrent GETs while another goroutine truncates, extends, appends,
// rewrites in place, replaces by rename, deletes and chmods them. Every
// response is a complete body of one version of the file that existed (its
// ETag's size and the Content-Length agree), or an error the client sees;
// see secHistory.check for the exact rule. Bytes of several versions are
// accepted only while a change in place ran (the README's documented
// limitation), and once changes stop, every response must be exactly the
// file as it is (secSettled).
//
// TestWrongBytesTornSnapshot: the open-file cache must not keep a snapshot
// of a small file read while a same-size rewrite in place ran.
//
// Files: this one has the hostile-path fixture and its markers;
// security_paths_test.go the hostile-path test; security_history_test.go
// the rule responses under change are checked by; security_mutator_test.go
// the requests and the changes; security_mutation_test.go and
// security_torn_test.go the two tests of part 2.
//
// Run with: go test -race -count=1 -run 'Sec|Wrong' .
// 64 KiB request paths are refused (431) by Caddy's 16 KiB header limit
// before any handler; FuzzServeRequest (fuzz_serve_test.go) feeds them to the
// handlers directly.

import (
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// secOutsideMarker is in every file outside the root.
const secOutsideMarker = "OUTSIDE-ROOT-MARKER-7f3a"

// secMarkerRE finds the markers of files that must not be served: outside
// the root, hidden, and unhidden sidecars of hidden files.
var secMarkerRE = regexp.MustCompile(`OUTSIDE-ROOT-MARKER-7f3a|HIDDEN-(?:SIDECAR-)?MARKER-[A-Za-z0-9-]+`)

// secFixture builds the site root, the sibling directories outside of it,
// and returns them. See testdata/hostile/paths.txt for an overview.
func secFixture(t *testing.T) diffFixtureDirs {
	t.Helper()
	base := t.TempDir()
	d := diffFixtureDirs{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	files := map[string]string{
		// allowed
		"index.html":        "<p>root index</p>\n",
		"visible.txt":       "visible file\n",
		"visible.txt.gz":    "GZIP visible sidecar\n",
		"visible.txt.br":    "BROTLI visible sidecar\n",
		"café.txt":          "cafe, NFC name, visible\n",
		"dir/index.html":    "<p>dir index</p>\n",
		"dir/visible.txt":   "dir visible\n",
		"sub/index.html":    "<p>sub index</p>\n",
		"sub/index.html.gz": "GZIP sub index sidecar\n",
		"sub/page.txt":      "sub page\n",
		"privateer.txt":     "privateer is not private\n",
		"hiddendir2/ok.txt": "hiddendir2 is not hidden\n",
		"hiddendir.txt":     "hiddendir.txt is not hidden\n",
		"vault.txt":         "vault.txt is not hidden\n",
		"list/a.txt":        "list a\n",

		// hidden by "*.secret"
		"x.secret":         "HIDDEN-MARKER-x-secret\n",
		".secret":          "HIDDEN-MARKER-dot-secret\n",
		"dir/deep.secret":  "HIDDEN-MARKER-dir-deep-secret\n",
		"sub/index.secret": "HIDDEN-MARKER-sub-index-secret\n",
		"list/b.secret":    "HIDDEN-MARKER-list-b-secret\n",
		// their sidecars are not hidden by "*.secret": file_server serves
		// them when asked by name (see secExposures)
		"x.secret.gz":         "HIDDEN-SIDECAR-MARKER-x-secret-gz\n",
		"x.secret.br":         "HIDDEN-SIDECAR-MARKER-x-secret-br\n",
		"x.secret.zst":        "HIDDEN-SIDECAR-MARKER-x-secret-zst\n",
		"dir/deep.secret.gz":  "HIDDEN-SIDECAR-MARKER-dir-deep-secret-gz\n",
		"sub/index.secret.gz": "HIDDEN-SIDECAR-MARKER-sub-index-secret-gz\n",

		// hidden by the bare name "private" (and "privé", NFC)
		"private/key.txt":       "HIDDEN-MARKER-private-key\n",
		"private/key.txt.gz":    "HIDDEN-MARKER-private-key-gz\n",
		"private/index.html":    "HIDDEN-MARKER-private-index\n",
		"private/index.html.gz": "HIDDEN-MARKER-private-index-gz\n",
		"dir/private":           "HIDDEN-MARKER-dir-private\n",
		"dir/private.gz":        "HIDDEN-SIDECAR-MARKER-dir-private-gz\n",
		"list/private/c.txt":    "HIDDEN-MARKER-list-private-c\n",
		"privé/data.txt":        "HIDDEN-MARKER-prive-nfc-data\n",

		// hidden by the absolute path <root>/hiddendir
		"hiddendir/file.txt":       "HIDDEN-MARKER-hiddendir-file\n",
		"hiddendir/file.txt.gz":    "HIDDEN-MARKER-hiddendir-file-gz\n",
		"hiddendir/file.txt.br":    "HIDDEN-MARKER-hiddendir-file-br\n",
		"hiddendir/index.html":     "HIDDEN-MARKER-hiddendir-index\n",
		"hiddendir/inner/deep.txt": "HIDDEN-MARKER-hiddendir-inner-deep\n",

		// hidden by the absolute path <root>/Caddyfile
		"Caddyfile":    "HIDDEN-MARKER-caddyfile\nlocalhost {\n\tfile_server\n}\n",
		"Caddyfile.gz": "HIDDEN-SIDECAR-MARKER-caddyfile-gz\n",

		// hidden by the glob path <root>/vault-*: the directory only
		"vault-a/doc.txt":    "HIDDEN-MARKER-vault-a-doc\n",
		"vault-a/index.html": "HIDDEN-MARKER-vault-a-index\n",
	}
	harness.WriteTree(t, d.root, files)
	outside := map[string]string{
		"outside/secret.txt":    secOutsideMarker + " outside/secret.txt\n",
		"outside/index.html":    secOutsideMarker + " outside/index.html\n",
		"outside/visible.txt":   secOutsideMarker + " outside/visible.txt\n",
		"outside/x.secret":      secOutsideMarker + " outside/x.secret\n",
		"root-evil/secret.txt":  secOutsideMarker + " root-evil/secret.txt\n",
		"root-evil/visible.txt": secOutsideMarker + " root-evil/visible.txt\n",
		"top.txt":               secOutsideMarker + " top.txt\n",
	}
	harness.WriteTree(t, base, outside)
	links := map[string]string{
		"link-in.txt":        "visible.txt",
		"link-secret":        "x.secret",
		"link-secret.secret": "visible.txt",
		"link-hiddendir":     "hiddendir",
		"link-private":       "private",
		"link-caddyfile":     "Caddyfile",
		"link-out.txt":       filepath.Join("..", "outside", "secret.txt"),
		"link-outdir":        filepath.Join("..", "outside"),
		"link-abs-out":       filepath.Join(d.outside, "secret.txt"),
		"link-evil":          filepath.Join("..", "root-evil"),
		"link-broken":        "does-not-exist.txt",
		"dir/link-up":        "..",
	}
	harness.LinkTree(t, d.root, links)
	harness.SetMtimes(t, base, diffMtime)
	return d
}

// secHide is the hide list of every configuration: a glob name, two bare
// names, an absolute directory, the Caddyfile and a glob path.
func secHide(d diffFixtureDirs) []string {
	return []string{
		"*.secret",
		"private",
		"privé",
		filepath.Join(d.root, "hiddendir"),
		filepath.Join(d.root, "Caddyfile"),
		filepath.Join(d.root, "vault-*"),
	}
}

// secExposure is a way file_server serves a file that holds a marker:
// intended (or at least file_server's) behaviour, which h2_file_server must
// reproduce exactly.
type secExposure struct {
	rel     string   // root-relative file system path the request maps to; it or anything below it
	markers []string // marker prefixes it may serve
	why     string
}

// secExposures lists every way a marker may be served. Anything else is a
// leak, also when file_server has it (then this list needs a reasoned entry).
var secExposures = []secExposure{
	{"link-secret", []string{"HIDDEN-MARKER-x-secret"}, "a symlink in the root to a hidden file: hiding goes by the path requested, not the target"},
	{"link-hiddendir", []string{"HIDDEN-MARKER-hiddendir-"}, "a symlink in the root to a directory hidden by absolute path"},
	{"link-private", []string{"HIDDEN-MARKER-private-"}, "a symlink in the root to a directory hidden by bare name"},
	{"link-caddyfile", []string{"HIDDEN-MARKER-caddyfile"}, "a symlink in the root to the Caddyfile"},
	{"dir/link-up", []string{"HIDDEN-MARKER-hiddendir-", "HIDDEN-MARKER-caddyfile", "HIDDEN-SIDECAR-MARKER-caddyfile-gz"}, "a symlink in the root to the root: absolute hide paths do not match the alias (nor, the Caddyfile being visible there, its sidecar for Accept-Encoding: gzip)"},
	{"link-out.txt", []string{secOutsideMarker}, "a symlink in the root to a file outside"},
	{"link-outdir", []string{secOutsideMarker}, "a symlink in the root to a directory outside"},
	{"link-abs-out", []string{secOutsideMarker}, "an absolute symlink in the root to a file outside"},
	{"link-evil", []string{secOutsideMarker}, "a symlink in the root to a sibling directory"},
	{"x.secret.gz", []string{"HIDDEN-SIDECAR-MARKER-x-secret-gz"}, "the sidecar of a hidden file, asked by its own name: *.secret does not match x.secret.gz"},
	{"x.secret.br", []string{"HIDDEN-SIDECAR-MARKER-x-secret-br"}, "as x.secret.gz"},
	{"x.secret.zst", []string{"HIDDEN-SIDECAR-MARKER-x-secret-zst"}, "as x.secret.gz"},
	{"dir/deep.secret.gz", []string{"HIDDEN-SIDECAR-MARKER-dir-deep-secret-gz"}, "as x.secret.gz"},
	{"sub/index.secret.gz", []string{"HIDDEN-SIDECAR-MARKER-sub-index-secret-gz"}, "as x.secret.gz"},
	{"dir/private.gz", []string{"HIDDEN-SIDECAR-MARKER-dir-private-gz"}, "the bare name private does not match private.gz"},
	{"Caddyfile.gz", []string{"HIDDEN-SIDECAR-MARKER-caddyfile-gz"}, "the hide path <root>/Caddyfile does not match Caddyfile.gz"},
	{"vault-a", []string{"HIDDEN-MARKER-vault-a-"}, "a glob hide path (<root>/vault-*) hides the directory vault-a but not the files in it: file_server's rule only extends literal paths to what is below them"},
}

// secRel is the root-relative file system path that h2_file_server and
// file_server map target to ("" for the root), and false if the target is
// not a request-target.
func secRel(root, target string) (string, bool) {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return "", false
	}
	// as the server parses it (a target starting with // has no host)
	filename := strings.TrimSuffix(caddyhttp.SanitizedPathJoin(root, u.Path), "/")
	rel, err := filepath.Rel(root, filename)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	if rel == "." {
		rel = ""
	}
	return rel, true
}

// secMarkerAllowed reports whether marker may be served for a request that
// maps to rel, and through which exposure.
func secMarkerAllowed(rel, marker string) (int, bool) {
	for i, e := range secExposures {
		if rel != e.rel && !strings.HasPrefix(rel, e.rel+"/") {
			continue
		}
		for _, m := range e.markers {
			if strings.HasPrefix(marker, m) {
				return i, true
			}
		}
	}
	// dir/link-up is the root again: what is below it maps like the rest
	// of its path does at the root
	if rest, ok := strings.CutPrefix(rel, "dir/link-up/"); ok {
		return secMarkerAllowed(rest, marker)
	}
	return -1, false
}

// secLeaks returns the markers in body that are not allowed for rel, and
// records the exposures that allowed the others.
func secLeaks(root, target string, body []byte, used map[int]int) []string {
	found := secMarkerRE.FindAll(body, -1)
	if len(found) == 0 {
		return nil
	}
	rel, ok := secRel(root, target)
	var leaks []string
	for _, m := range found {
		if ok {
			if i, allowed := secMarkerAllowed(rel, string(m)); allowed {
				if used != nil {
					used[i]++
				}
				continue
			}
		}
		leaks = append(leaks, string(m))
	}
	return leaks
}
