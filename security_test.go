package h2file

// Reliability and security suite, parts 1 and 2.
//
// TestSecHostilePaths: nothing outside the root, nothing hidden. Every
// request-target of testdata/hostile/paths.txt (plus long ones made by
// secGeneratedPaths) is sent raw over HTTP/2 (TLS), HTTP/1.1 (TLS) and
// cleartext HTTP/1.1 to a file_server site and an h2_file_server site with
// the same configuration (the differential suite's machinery, diff_test.go).
// The responses must be identical (diffCompare after diffNormalize), and no
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
// Run with: go test -race -count=1 -run 'Sec|Wrong' .
// 64 KiB request paths are refused (431) by Caddy's 16 KiB header limit
// before any handler; FuzzServeRequest (fuzz_test.go) feeds them to the
// handlers directly.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// ---------------------------------------------------------------------------
// Part 1: hostile paths
// ---------------------------------------------------------------------------

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
	for name, content := range files {
		diffWriteFile(t, filepath.Join(d.root, name), content)
	}
	outside := map[string]string{
		"outside/secret.txt":    secOutsideMarker + " outside/secret.txt\n",
		"outside/index.html":    secOutsideMarker + " outside/index.html\n",
		"outside/visible.txt":   secOutsideMarker + " outside/visible.txt\n",
		"outside/x.secret":      secOutsideMarker + " outside/x.secret\n",
		"root-evil/secret.txt":  secOutsideMarker + " root-evil/secret.txt\n",
		"root-evil/visible.txt": secOutsideMarker + " root-evil/visible.txt\n",
		"top.txt":               secOutsideMarker + " top.txt\n",
	}
	for name, content := range outside {
		diffWriteFile(t, filepath.Join(base, name), content)
	}
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
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(d.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.Walk(base, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.Mode()&os.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(path, diffMtime, diffMtime)
	})
	if err != nil {
		t.Fatal(err)
	}
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

// secLoadPaths reads testdata/hostile/paths.txt.
func secLoadPaths(tb testing.TB) []string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "hostile", "paths.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		target, _, _ := strings.Cut(text, "\t")
		if !strings.HasPrefix(target, "/") {
			tb.Fatalf("paths.txt:%d: target %q does not start with /", line, target)
		}
		paths = append(paths, target)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return paths
}

// secGeneratedPaths are the very long hostile paths: 4 KiB and 64 KiB
// segments, long chains of ../ and %2e%2e/, and deep nesting climbing back.
func secGeneratedPaths() []string {
	kib4, kib64 := strings.Repeat("a", 4096), strings.Repeat("b", 65536)
	return []string{
		"/" + kib4,
		"/" + kib64,
		"/" + kib4 + "/../x.secret",
		"/" + kib64 + "/../../outside/secret.txt",
		"/dir/" + kib4 + "/../../Caddyfile",
		"/x.secret" + kib4,
		"/visible.txt/" + kib4,
		"/" + strings.Repeat("../", 1366) + "outside/secret.txt",
		"/" + strings.Repeat("%2e%2e/", 9363) + "outside/secret.txt",
		"/" + strings.Repeat("a/", 2048) + strings.Repeat("../", 2048) + "x.secret",
		"/" + strings.Repeat("a/", 2048) + strings.Repeat("../", 2049) + "outside/secret.txt",
		"/" + strings.Repeat("./", 32768) + "hiddendir/file.txt",
		"/" + strings.Repeat("/", 4096) + "Caddyfile",
		"/" + strings.Repeat("%2f", 4096) + "private/key.txt",
		"/dir/" + strings.Repeat("%c0%ae", 4096),
	}
}

// secMaxHeaderBytes is Caddy's default limit on the request line and
// headers (caddyhttp.App: max_header_bytes 16 KiB). Longer targets are
// answered 431 by Go's server before Caddy's handlers: the 64 KiB ones of
// secGeneratedPaths reach the handler only in FuzzServeRequest's seeds,
// which call it directly.
const secMaxHeaderBytes = 16 << 10

// secAcceptEncoding asks for every precompressed sidecar.
var secAcceptEncoding = [2]string{"Accept-Encoding", "br, zstd, gzip"}

// secCfg is a configuration of the hostile-path test: the file_server and
// h2_file_server sites, and extra h2_file_server-only fields.
func secCfg(name string, opts map[string]any, h2Extra map[string]any) *diffConfig {
	return &diffConfig{
		name: name,
		opts: opts,
		routes: func(file map[string]any) []any {
			if file["handler"] == "h2_file_server" {
				for k, v := range h2Extra {
					file[k] = v
				}
			}
			return []any{map[string]any{"handle": []any{file}}}
		},
	}
}

// secStats counts what the hostile-path test did.
type secStats struct {
	mu          sync.Mutex
	requests    int
	skippedH2   int
	skippedLong int
	statuses    map[int]int
	transportEq int // both sites failed the same way
	exposures   map[int]int
	failures    int
}

func (s *secStats) add(f func(s *secStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// secCheckPair compares one request's two responses and the markers in
// their bodies. It returns a description of what is wrong, or "".
func secCheckPair(root, target string, fs, h2 diffResponse, fsPort, h2Port int, used map[int]int) string {
	var problems []string
	nfs, nh2 := diffNormalize(fs, fsPort), diffNormalize(h2, h2Port)
	// a connection both servers reset differs only by the client's port
	for _, r := range []*diffResponse{&nfs, &nh2} {
		if r.err != nil {
			r.err = errors.New(secClientPort.ReplaceAllString(r.err.Error(), "$1:{CLIENT}->"))
		}
	}
	if diff := diffCompare(nfs, nh2); diff != "" {
		problems = append(problems, "responses differ:\n  "+diff)
	}
	if leaks := secLeaks(root, target, h2.body, used); len(leaks) > 0 {
		problems = append(problems, fmt.Sprintf("h2_file_server served markers %q", leaks))
	}
	if leaks := secLeaks(root, target, fs.body, nil); len(leaks) > 0 {
		problems = append(problems, fmt.Sprintf("file_server served markers %q (not in secExposures)", leaks))
	}
	if len(problems) == 0 {
		return ""
	}
	return strings.Join(problems, "\n") + "\nfile_server:\n" + diffFormat(nfs) + "\nh2_file_server:\n" + diffFormat(nh2)
}

// secShortErr shortens an error message, which may quote a long URL.
func secShortErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return secShort(err.Error())
}

var secClientPort = regexp.MustCompile(`(127\.0\.0\.1):\d+->`)

// secShort shortens a target for messages.
func secShort(target string) string {
	if len(target) > 120 {
		return fmt.Sprintf("%s...(%d bytes)", target[:100], len(target))
	}
	return target
}

func TestSecHostilePaths(t *testing.T) {
	start := time.Now()
	paths := secLoadPaths(t)
	if len(paths) < 200 {
		t.Fatalf("testdata/hostile/paths.txt has %d paths, want at least 200", len(paths))
	}
	paths = append(paths, secGeneratedPaths()...)

	d := secFixture(t)
	hide := secHide(d)
	precompressed := map[string]any{"br": map[string]any{}, "zstd": map[string]any{}, "gzip": map[string]any{}}
	index := []string{"index.secret", "index.html", "index.txt"}
	mainCfg := secCfg("sec_main", map[string]any{
		"hide": hide, "index_names": index, "precompressed": precompressed,
		"precompressed_order": []string{"br", "zstd", "gzip"},
	}, nil)
	browse := secCfg("sec_browse", map[string]any{
		"hide": hide, "index_names": index, "browse": map[string]any{},
	}, map[string]any{"cache": map[string]any{"max_files": 1001}})
	// its own cache (the cache is shared by configurations with the same
	// limits): cold when the warm-up sequences start
	warm := secCfg("sec_warm", map[string]any{
		"hide": hide, "index_names": index, "precompressed": precompressed,
		"precompressed_order": []string{"br", "zstd", "gzip"},
	}, map[string]any{"cache": map[string]any{"max_files": 1002}})
	cfgs := []*diffConfig{mainCfg, browse, warm}
	echo := diffStartCaddy(t, d, cfgs)
	diffCheckHandlers(t, cfgs)
	clients := diffClients(t)

	// the checks must be able to fail
	t.Run("sanity", func(t *testing.T) {
		if leaks := secLeaks(d.root, "/visible.txt", []byte("x HIDDEN-MARKER-x-secret\n"), nil); len(leaks) != 1 {
			t.Errorf("a hidden marker in the body of /visible.txt is not reported: %q", leaks)
		}
		if leaks := secLeaks(d.root, "/%2e%2e/outside/secret.txt", []byte(secOutsideMarker), nil); len(leaks) != 1 {
			t.Errorf("an outside marker for a traversal is not reported: %q", leaks)
		}
		if leaks := secLeaks(d.root, "/link-out.txt", []byte(secOutsideMarker), nil); len(leaks) != 0 {
			t.Errorf("the listed exposure /link-out.txt is reported: %q", leaks)
		}
		if leaks := secLeaks(d.root, "/link-out.txt", []byte("HIDDEN-MARKER-caddyfile"), nil); len(leaks) != 1 {
			t.Errorf("an exposure allows markers it does not list: %q", leaks)
		}
		dc := clients[0]
		fs := diffDo(dc, http.MethodGet, mainCfg.fs, "/visible.txt", nil)
		h2 := diffDo(dc, http.MethodGet, mainCfg.h2, "/dir/visible.txt", nil)
		if secCheckPair(d.root, "/visible.txt", fs, h2, mainCfg.fs.port, mainCfg.h2.port, nil) == "" {
			t.Error("different responses compare equal")
		}
	})

	// the targets reach Caddy as written
	t.Run("raw_targets_arrive_unchanged", func(t *testing.T) {
		delivered, sent := 0, 0
		for _, target := range paths {
			for _, dc := range clients {
				if dc.plain || dc.major == 2 && diffH2Unsendable(target) {
					continue // the echo site is TLS only
				}
				if len(target) > secMaxHeaderBytes {
					continue // refused with 431 before any handler
				}
				sent++
				resp := diffDo(dc, http.MethodGet, echo, target, nil)
				if resp.err != nil || resp.status != http.StatusOK {
					t.Logf("%s %s: not delivered to Caddy: status %d, error %s", dc.name, secShort(target), resp.status, secShortErr(resp.err))
					continue
				}
				got := strings.TrimPrefix(string(resp.body), fmt.Sprintf("https://127.0.0.1:%d", echo.port))
				if got != target {
					t.Errorf("%s: target %q arrived as %q", dc.name, secShort(target), secShort(got))
					continue
				}
				delivered++
			}
		}
		t.Logf("%d of %d targets delivered verbatim", delivered, sent)
		if delivered < sent*95/100 {
			t.Errorf("only %d of %d targets reached Caddy; too few to be useful", delivered, sent)
		}
	})

	stats := &secStats{statuses: map[int]int{}, exposures: map[int]int{}}
	for _, c := range []*diffConfig{mainCfg, browse} {
		t.Run(c.name, func(t *testing.T) {
			aes := [][][2]string{nil, {secAcceptEncoding}}
			if c == browse {
				aes = aes[:1]
			}
			var wg sync.WaitGroup
			for _, dc := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fsSite, h2Site := c.sites(dc)
					for _, target := range paths {
						if dc.major == 2 && diffH2Unsendable(target) {
							stats.add(func(s *secStats) { s.skippedH2++ })
							continue
						}
						if (dc.plain || dc.major == 2) && len(target) > secMaxHeaderBytes {
							// refused before Caddy's handlers (see
							// secMaxHeaderBytes): 431 over HTTP/1.1 with
							// TLS; Go's HTTP/2 client does not send it,
							// and its cleartext server lingers a second
							// on the close. Sent over HTTP/1.1 with TLS.
							stats.add(func(s *secStats) { s.skippedLong++ })
							continue
						}
						for _, hdrs := range aes {
							fs := diffDo(dc, http.MethodGet, fsSite, target, hdrs)
							h2 := diffDo(dc, http.MethodGet, h2Site, target, hdrs)
							used := map[int]int{}
							problem := secCheckPair(d.root, target, fs, h2, fsSite.port, h2Site.port, used)
							if problem == "" && c == browse && fs.err == nil && bytes.Contains(h2.body, []byte("b.secret")) {
								problem = "a listing names the hidden file b.secret"
							}
							stats.add(func(s *secStats) {
								s.requests += 2
								if fs.err == nil {
									s.statuses[fs.status]++
								} else if h2.err != nil {
									s.transportEq++
								}
								for i, n := range used {
									s.exposures[i] += n
								}
								if problem != "" {
									s.failures++
								}
							})
							if problem != "" {
								t.Errorf("%s %s GET %s %v:\n%s", c.name, dc.name, secShort(target), hdrs, problem)
							}
						}
					}
				}()
			}
			wg.Wait()
		})
	}
	t.Logf("statuses of file_server over all protocols: %v; both failed alike: %d; skipped over HTTP/2 (not a request-target): %d; longer than %d bytes, sent over HTTP/1.1 with TLS only: %d",
		stats.statuses, stats.transportEq, stats.skippedH2, secMaxHeaderBytes, stats.skippedLong)
	for _, s := range []int{200, 308, 400, 404} {
		if stats.statuses[s] == 0 {
			t.Errorf("no response with status %d: the hostile paths do not exercise the handler", s)
		}
	}
	// every listed exposure is real: the list holds nothing that is not
	// served, so each entry is a reasoned, tested case
	for i, e := range secExposures {
		if stats.exposures[i] == 0 {
			t.Errorf("exposure %q (%s) never served its marker: the list or the paths are stale", e.rel, e.why)
		}
	}

	// the open-file cache, warmed by allowed requests for a file, must
	// still hide it under its hidden names (and not reach outside)
	t.Run("warm_cache", func(t *testing.T) {
		sequences := []struct {
			name  string
			warm  []string
			probe []string
		}{
			{"index_then_hidden_index_name",
				[]string{"/sub/", "/sub/index.html", "/sub"},
				[]string{"/sub/index.secret", "/sub/./index.secret", "/sub//index.secret", "/dir/../sub/index.secret", "/sub/%69ndex.secret", "/sub/index.secret/", "/sub/index.secret%00"}},
			{"symlink_then_hidden_target",
				[]string{"/link-secret", "/link-secret"},
				[]string{"/x.secret", "/./x.secret", "/dir/../x.secret", "/%78.secret", "/x.secret/", "/dir/link-up/x.secret"}},
			{"symlinked_dir_then_hidden_dir",
				[]string{"/link-hiddendir/file.txt", "/link-hiddendir/", "/link-hiddendir/inner/deep.txt"},
				[]string{"/hiddendir/file.txt", "/hiddendir/", "/hiddendir/index.html", "/hiddendir", "/hiddendir/inner/deep.txt", "/hiddendir/./file.txt", "/sub/../hiddendir/file.txt"}},
			{"alias_then_caddyfile",
				[]string{"/dir/link-up/Caddyfile", "/link-caddyfile"},
				[]string{"/Caddyfile", "/./Caddyfile", "/dir/../Caddyfile", "/%43addyfile", "/Caddyfile/"}},
			{"symlinked_private_then_private",
				[]string{"/link-private/key.txt", "/link-private/"},
				[]string{"/private/key.txt", "/private/", "/private/index.html", "/private%2fkey.txt", "/dir/link-up/private/key.txt"}},
			{"same_file_many_paths",
				[]string{"/visible.txt", "/dir/../visible.txt", "/link-in.txt", "/./visible.txt", "/dir/link-up/visible.txt"},
				[]string{"/visible.txt/", "/visible.txt.", "/link-in.txt/..", "/link-secret.secret"}},
			{"outside_via_symlink_then_traversal",
				[]string{"/link-out.txt", "/link-outdir/", "/link-outdir/secret.txt", "/link-evil/secret.txt"},
				[]string{"/../outside/secret.txt", "/%2e%2e/outside/secret.txt", "/../outside/", "/../root-evil/secret.txt", "/link-outdir/../../outside/secret.txt", "/..%2foutside%2fsecret.txt"}},
			{"hidden_first_then_alias_then_hidden",
				[]string{"/x.secret", "/link-secret", "/x.secret.gz"},
				[]string{"/x.secret", "/link-secret.secret"}},
			{"sidecar_then_hidden_original",
				[]string{"/x.secret.gz", "/x.secret.br", "/Caddyfile.gz"},
				[]string{"/x.secret", "/Caddyfile"}},
		}
		for _, dc := range clients {
			fsSite, h2Site := warm.sites(dc)
			for _, seq := range sequences {
				for _, hdrs := range [][][2]string{nil, {secAcceptEncoding}} {
					for i, target := range append(slices.Clone(seq.warm), seq.probe...) {
						fs := diffDo(dc, http.MethodGet, fsSite, target, hdrs)
						h2 := diffDo(dc, http.MethodGet, h2Site, target, hdrs)
						stats.add(func(s *secStats) { s.requests += 2 })
						if problem := secCheckPair(d.root, target, fs, h2, fsSite.port, h2Site.port, nil); problem != "" {
							t.Errorf("%s %s %v: GET %s:\n%s", dc.name, seq.name, hdrs, target, problem)
						}
						if i < len(seq.warm) {
							continue
						}
						// a probe of a hidden or outside name never gets
						// a marker, whatever the warm-up cached
						if h2.err == nil && h2.status == http.StatusOK && secMarkerRE.Match(h2.body) {
							t.Errorf("%s %s: probe %s served %q after the cache was warmed", dc.name, seq.name, target, h2.body)
						}
					}
				}
			}
		}
	})

	t.Logf("%d hostile paths (%d from testdata/hostile/paths.txt, %d generated), %d requests, %d failures, in %v",
		len(paths), len(paths)-len(secGeneratedPaths()), len(secGeneratedPaths()), stats.requests, stats.failures, time.Since(start))
}

// ---------------------------------------------------------------------------
// Part 2: no wrong bytes while files change
// ---------------------------------------------------------------------------

// secVersion is one content a file had.
type secVersion struct {
	content []byte
	from    time.Time // when it came to be (the start of the change)
	until   time.Time // when the next change started; zero while current
}

// secSpan is an interval of time; a zero until means still open.
type secSpan struct{ from, until time.Time }

func (s secSpan) overlaps(from, until time.Time) bool {
	return !s.from.After(until) && (s.until.IsZero() || !s.until.Before(from))
}

// secHistory is everything one file was: every version, and when it was
// absent, unreadable or being changed in place.
//
// A file is changed either only atomically (inPlace false: renamed over,
// deleted and created again by rename, chmod, truncated shorter, so that
// an inode's bytes never change and a reader sees its version or comes
// short), or also in place (truncated, extended, appended to, rewritten
// with the same or another size), which can tear a response that reads
// it meanwhile (the README's documented limitation).
type secHistory struct {
	name     string
	inPlace  bool
	min, max int

	mu       sync.Mutex
	versions []*secVersion
	absent   []secSpan
	noPerm   []secSpan
	changes  []secSpan // changes in place

	// the mutator's own state
	present, readable bool
	generated         int
	lastChange        time.Time
}

// current returns the content now on disk.
func (h *secHistory) current() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.versions[len(h.versions)-1].content
}

// change makes a change to the file, with do, and records it: the states
// it went through (the last one stays current), and whether it changed the
// bytes of the inode in place. Checks wait: a response that shows the
// change is never checked against a history without it.
func (h *secHistory) change(inPlace bool, do func() error, states ...[]byte) (time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	start := time.Now()
	err := do()
	h.recordLocked(start, time.Now(), inPlace, states...)
	return start, err
}

// recordAt records a change that ran from start to end.
func (h *secHistory) recordAt(start, end time.Time, inPlace bool, states ...[]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recordLocked(start, end, inPlace, states...)
}

func (h *secHistory) recordLocked(start, end time.Time, inPlace bool, states ...[]byte) {
	if len(states) > 0 {
		if n := len(h.versions); n > 0 && h.versions[n-1].until.IsZero() {
			h.versions[n-1].until = start
		}
		for i, c := range states {
			v := &secVersion{content: c, from: start}
			if i < len(states)-1 {
				v.until = end // a state of the file during the change
			}
			h.versions = append(h.versions, v)
		}
	}
	if inPlace {
		h.changes = append(h.changes, secSpan{start, end})
	}
}

// secToggle opens (on) or closes an interval of spans; the caller holds
// the history's lock.
func secToggle(spans *[]secSpan, on bool, at time.Time) {
	if on {
		*spans = append(*spans, secSpan{from: at})
		return
	}
	if n := len(*spans); n > 0 && (*spans)[n-1].until.IsZero() {
		(*spans)[n-1].until = at
	}
}

// secResult is what the client got for one request.
type secResult struct {
	t0, t1       time.Time
	proto        string // "h2", "h1", "h1c"
	rangeReq     bool
	status       int
	header       http.Header
	contentLen   int64
	body         []byte
	doErr        error // before the response headers
	bodyErr      error // while reading the body
	h2StreamErr  bool  // the error is an HTTP/2 stream reset
	shortCleanH2 bool  // HTTP/2 body ended cleanly before Content-Length
}

// secOutcome classifies a checked result.
type secOutcome int

const (
	secOK        secOutcome = iota // complete body of one version
	secTorn                        // bytes of several versions, while a change in place ran (documented)
	secAborted                     // the client saw an error, and the bytes before it are consistent
	secNotFound                    // 404 while the file was absent
	secForbidden                   // 403 while the file had mode 000 (not as root)
	secMismatch                    // wrong bytes, wrong headers, or a wrong status
)

// secRangeFrom and secRangeTo are the range asked by range requests; every
// version is longer.
const secRangeFrom, secRangeTo = 10, 1009

// secEtagRE is file_server's ETag: "<mtime ns base 36>-<size base 36>".
var secEtagRE = regexp.MustCompile(`^"([0-9a-z]+)-([0-9a-z]+)"$`)

// check classifies r. window is how far back a response may reach: the
// cache re-checks a path every revalidate interval, plus a margin for
// scheduling. The rule: a 200 (206 for the range requests) has an ETag
// whose size is the file's, a Content-Length that agrees, and a body that
// is exactly a version of that size (or the asked range of it) that was
// current at some time in [t0-window, t1]. A torn body is accepted only for
// a file changed in place, while a change overlapped that window, and only
// if each byte is the byte at its offset of one of the window's versions.
// A 404 needs the file absent in the window, a 403 mode 000 (never as
// root). An error the client sees is fine if the bytes before it are
// consistent by the same rule; an HTTP/2 body that ends cleanly but short
// is not, nor is a timeout.
func (h *secHistory) check(r secResult, window time.Duration) (secOutcome, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	from, until := r.t0.Add(-window), r.t1
	var live []*secVersion
	for _, v := range h.versions {
		if (secSpan{v.from, v.until}).overlaps(from, until) {
			live = append(live, v)
		}
	}
	changing := false
	for _, s := range h.changes {
		if s.overlaps(from, until) {
			changing = true
			break
		}
	}
	// consistent reports whether b, at offset off of a version of size
	// total, is that version's bytes (secOK) or acceptably torn (secTorn)
	consistent := func(b []byte, off, total int64) (secOutcome, bool) {
		for _, v := range live {
			if int64(len(v.content)) == total && off+int64(len(b)) <= total && bytes.Equal(v.content[off:off+int64(len(b))], b) {
				return secOK, true
			}
		}
		if !changing {
			return 0, false
		}
		for i, x := range b {
			ok := false
			for _, v := range live {
				if at := off + int64(i); at < int64(len(v.content)) && v.content[at] == x {
					ok = true
					break
				}
			}
			if !ok {
				return 0, false
			}
		}
		return secTorn, true
	}

	if r.doErr != nil {
		if secIsTimeout(r.doErr) {
			return secMismatch, fmt.Sprintf("request failed: %v", r.doErr)
		}
		return secAborted, ""
	}
	switch {
	case r.status == http.StatusNotFound:
		for _, s := range h.absent {
			if s.overlaps(from, until) {
				return secNotFound, ""
			}
		}
		return secMismatch, "404 while the file was present"
	case r.status == http.StatusForbidden:
		for _, s := range h.noPerm {
			if s.overlaps(from, until) && os.Geteuid() != 0 {
				return secForbidden, ""
			}
		}
		return secMismatch, "403 while the file was readable"
	case r.status == http.StatusOK && !r.rangeReq, r.status == http.StatusPartialContent && r.rangeReq:
	case r.status == http.StatusOK && r.rangeReq && r.header.Get("Content-Length") == "0":
		// net/http ignores the Range of an empty file (rewrite_resize
		// empties the file for a moment)
		r.rangeReq = false
	default:
		return secMismatch, fmt.Sprintf("status %d", r.status)
	}

	etag := r.header.Get("Etag")
	m := secEtagRE.FindStringSubmatch(etag)
	if m == nil {
		return secMismatch, fmt.Sprintf("ETag %q is not file_server's", etag)
	}
	etagSize, err := strconv.ParseInt(m[2], 36, 64)
	if err != nil {
		return secMismatch, fmt.Sprintf("ETag %q: %v", etag, err)
	}
	total, off, wantLen := etagSize, int64(0), etagSize
	if r.rangeReq {
		cr := r.header.Get("Content-Range")
		var a, b, tot int64
		if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &a, &b, &tot); err != nil || a != secRangeFrom || b != secRangeTo {
			return secMismatch, fmt.Sprintf("Content-Range %q for bytes=%d-%d", cr, secRangeFrom, secRangeTo)
		}
		if tot != etagSize {
			return secMismatch, fmt.Sprintf("Content-Range %q and ETag %q give different sizes", cr, etag)
		}
		off, wantLen = a, b-a+1
	}
	if r.contentLen != wantLen {
		return secMismatch, fmt.Sprintf("Content-Length %d, but the ETag %q says the file has %d bytes", r.contentLen, etag, etagSize)
	}
	if r.bodyErr != nil {
		switch {
		case r.shortCleanH2:
			return secMismatch, fmt.Sprintf("HTTP/2 body ended cleanly after %d of %d bytes", len(r.body), r.contentLen)
		case secIsTimeout(r.bodyErr):
			return secMismatch, fmt.Sprintf("body read failed: %v", r.bodyErr)
		case r.proto == "h2" && !r.h2StreamErr:
			return secMismatch, fmt.Sprintf("HTTP/2 body failed without a stream reset: %v", r.bodyErr)
		}
		if _, ok := consistent(r.body, off, total); !ok {
			return secMismatch, fmt.Sprintf("the %d bytes before the error (%v) are of no version: %s", len(r.body), r.bodyErr, h.explainLocked(r.body, off, live))
		}
		return secAborted, ""
	}
	if int64(len(r.body)) != wantLen {
		return secMismatch, fmt.Sprintf("body of %d bytes, Content-Length %d", len(r.body), r.contentLen)
	}
	outcome, ok := consistent(r.body, off, total)
	if !ok {
		return secMismatch, fmt.Sprintf("body is no version current in [t0-%v, t1] (changes in place then: %v): %s", window, changing, h.explainLocked(r.body, off, live))
	}
	return outcome, ""
}

// explainLocked describes, 4 KiB block by block, which versions (index in
// the history, * if not in the window) hold the bytes of b at offset off.
func (h *secHistory) explainLocked(b []byte, off int64, live []*secVersion) string {
	var parts []string
	for start := 0; start < len(b); start += 4096 {
		end := min(start+4096, len(b))
		var who []string
		for i, v := range h.versions {
			at := off + int64(start)
			if at+int64(end-start) <= int64(len(v.content)) && bytes.Equal(v.content[at:at+int64(end-start)], b[start:end]) {
				mark := "*"
				if slices.Contains(live, v) {
					mark = ""
				}
				who = append(who, fmt.Sprintf("v%d%s", i, mark))
			}
		}
		if len(who) == 0 {
			who = []string{"none"}
		}
		parts = append(parts, fmt.Sprintf("[%d]%s", start/4096, strings.Join(who, ",")))
	}
	if len(parts) > 40 {
		parts = append(parts[:40], "...")
	}
	head := b[:min(len(b), 60)]
	return fmt.Sprintf("%d versions; body starts %q; blocks %s", len(h.versions), head, strings.Join(parts, " "))
}

func secIsTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// secFetch sends one GET and reads the whole response.
func secFetch(dc diffClient, site diffSite, target string, rangeReq bool) secResult {
	r := secResult{proto: dc.name, rangeReq: rangeReq, t0: time.Now()}
	var hdrs [][2]string
	if rangeReq {
		hdrs = append(hdrs, [2]string{"Range", fmt.Sprintf("bytes=%d-%d", secRangeFrom, secRangeTo)})
	}
	req, err := diffRequest(http.MethodGet, site, target, hdrs)
	if err != nil {
		r.doErr, r.t1 = err, time.Now()
		return r
	}
	resp, err := dc.c.Do(req)
	if err != nil {
		r.doErr, r.t1 = err, time.Now()
		return r
	}
	r.status, r.header, r.contentLen = resp.StatusCode, resp.Header, resp.ContentLength
	r.body, r.bodyErr = io.ReadAll(resp.Body)
	resp.Body.Close()
	if r.bodyErr != nil && dc.major == 2 {
		r.h2StreamErr = strings.Contains(r.bodyErr.Error(), "stream error")
		r.shortCleanH2 = errors.Is(r.bodyErr, io.ErrUnexpectedEOF)
	}
	r.t1 = time.Now()
	return r
}

// secMutator changes the files of a directory, one change at a time.
type secMutator struct {
	t      *testing.T
	dir    string
	files  []*secHistory
	rng    *rand.Rand
	counts map[string]int
}

// content makes the content of a new version of h: a unique first line,
// then bytes that differ from one version to the next.
func (m *secMutator) content(h *secHistory, size int) []byte {
	h.generated++
	b := make([]byte, size)
	seed := m.rng.Uint64()
	for i := range b {
		b[i] = 'a' + byte((seed>>(i%37)+uint64(i)*0x9e3779b97f4a7c15>>59)%26)
	}
	copy(b, fmt.Sprintf("%s version %d size %d\n", h.name, h.generated, size))
	return b
}

// secPageStates are the states a file goes through while one write grows
// it from oldLen to the bytes of c: its size grows a page at a time.
func secPageStates(c []byte, oldLen int) [][]byte {
	var states [][]byte
	for n := (oldLen/4096 + 1) * 4096; n < len(c); n += 4096 {
		states = append(states, c[:n])
	}
	return append(states, c)
}

func (m *secMutator) fail(h *secHistory, err error) {
	if err != nil {
		m.t.Errorf("changing %s: %v", h.name, err)
	}
}

// step makes one change to a random file and records it.
func (m *secMutator) step() {
	h := m.files[m.rng.IntN(len(m.files))]
	// changes of one file are more than a timestamp tick apart, so that
	// each version has a modification time of its own
	if wait := 12*time.Millisecond - time.Since(h.lastChange); wait > 0 {
		time.Sleep(wait)
	}
	defer func() { h.lastChange = time.Now() }()
	name := filepath.Join(m.dir, h.name)
	size := func() int { return h.min + m.rng.IntN(h.max-h.min) }
	var err error
	switch {
	case !h.present:
		c := m.content(h, size())
		m.fail(h, os.WriteFile(name+".tmp", c, 0o644))
		_, err = h.change(false, func() error {
			err := os.Rename(name+".tmp", name)
			secToggle(&h.absent, false, time.Now())
			return err
		}, c)
		h.present = true
		m.counts["create_again"]++
		m.fail(h, err)
		return
	case !h.readable:
		_, err = h.change(false, func() error {
			err := os.Chmod(name, 0o644)
			secToggle(&h.noPerm, false, time.Now())
			return err
		})
		h.readable = true
		m.counts["chmod_back"]++
		m.fail(h, err)
		return
	}
	ops := []string{"truncate", "rename_over", "delete", "chmod_000"}
	if h.inPlace {
		ops = append(ops, "extend", "append", "rewrite_in_place", "rewrite_resize")
	}
	op := ops[m.rng.IntN(len(ops))]
	cur := h.current()
	if op == "truncate" && len(cur) <= h.min || op == "extend" && len(cur) >= h.max {
		op = "rename_over"
	}
	switch op {
	case "truncate": // shorter only
		n := h.min + m.rng.IntN(len(cur)-h.min)
		_, err = h.change(h.inPlace, func() error { return os.Truncate(name, int64(n)) }, cur[:n:n])
	case "extend": // with zeros
		n := len(cur) + 1 + m.rng.IntN(h.max-len(cur))
		_, err = h.change(true, func() error { return os.Truncate(name, int64(n)) },
			append(slices.Clone(cur), make([]byte, n-len(cur))...))
	case "append":
		extra := m.content(h, 1+m.rng.IntN(3*4096))
		_, err = h.change(true, func() error {
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write(extra)
			return err
		}, secPageStates(append(slices.Clone(cur), extra...), len(cur))...)
	case "rewrite_in_place": // same size, one pwrite
		c := m.content(h, len(cur))
		_, err = h.change(true, func() error {
			f, err := os.OpenFile(name, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt(c, 0)
			return err
		}, c)
	case "rewrite_resize": // os.WriteFile: truncated to nothing, then written
		c := m.content(h, size())
		_, err = h.change(true, func() error { return os.WriteFile(name, c, 0o644) },
			append([][]byte{{}}, secPageStates(c, 0)...)...)
	case "rename_over":
		c := m.content(h, size())
		m.fail(h, os.WriteFile(name+".tmp", c, 0o644))
		_, err = h.change(false, func() error { return os.Rename(name+".tmp", name) }, c)
	case "delete":
		_, err = h.change(false, func() error {
			start := time.Now()
			h.versions[len(h.versions)-1].until = start
			secToggle(&h.absent, true, start)
			return os.Remove(name)
		})
		h.present = false
	case "chmod_000":
		_, err = h.change(false, func() error {
			secToggle(&h.noPerm, true, time.Now())
			return os.Chmod(name, 0)
		})
		h.readable = false
	}
	m.fail(h, err)
	m.counts[op]++
}

// secSettled checks, once nothing has changed for longer than the cache's
// revalidate interval, that every protocol gets exactly each file as it is
// now: its bytes, and the ETag of its current size and modification time
// (or 404 when absent, 403 when unreadable and not root). It returns the
// number of requests sent.
func secSettled(t *testing.T, label string, dir string, files []*secHistory, clients []diffClient, site func(diffClient) diffSite) int {
	n := 0
	for _, h := range files {
		name := filepath.Join(dir, h.name)
		info, statErr := os.Stat(name)
		cur := h.current()
		for _, dc := range clients {
			for _, rangeReq := range []bool{false, true} {
				n++
				r := secFetch(dc, site(dc), "/"+h.name, rangeReq)
				what := fmt.Sprintf("%s: %s GET /%s (range %v) after the changes settled", label, dc.name, h.name, rangeReq)
				if r.doErr != nil || r.bodyErr != nil {
					t.Errorf("%s: %v %v", what, r.doErr, r.bodyErr)
					continue
				}
				want, body := http.StatusOK, cur
				if rangeReq {
					want, body = http.StatusPartialContent, cur[secRangeFrom:secRangeTo+1]
				}
				switch {
				case !h.present:
					want = http.StatusNotFound
				case !h.readable && os.Geteuid() != 0:
					want = http.StatusForbidden
				}
				if r.status != want {
					t.Errorf("%s: status %d, want %d", what, r.status, want)
					continue
				}
				if want != http.StatusOK && want != http.StatusPartialContent {
					continue
				}
				if statErr != nil {
					t.Fatal(statErr)
				}
				etag := fmt.Sprintf(`"%s-%s"`, strconv.FormatInt(info.ModTime().UnixNano(), 36), strconv.FormatInt(info.Size(), 36))
				if got := r.header.Get("Etag"); got != etag || !bytes.Equal(r.body, body) || r.contentLen != int64(len(body)) {
					h.mu.Lock()
					explain := h.explainLocked(r.body, int64(len(cur)-len(cur)), nil)
					h.mu.Unlock()
					t.Errorf("%s: ETag %q (file: %q), Content-Length %d, %d body bytes, want the current %d bytes; %s",
						what, got, etag, r.contentLen, len(r.body), len(body), explain)
				}
			}
		}
	}
	return n
}

// secTally counts outcomes.
type secTally struct {
	requests, ok, torn, aborted, notFound, forbidden, mismatches, settled atomic.Int64
}

func TestWrongBytesUnderMutation(t *testing.T) {
	if testing.Short() {
		t.Skip("hammers files for seconds")
	}
	base := t.TempDir()
	d := diffFixtureDirs{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	if err := os.MkdirAll(d.root, 0o755); err != nil {
		t.Fatal(err)
	}
	type phase struct {
		name       string
		cache      map[string]any
		revalidate time.Duration
		active     time.Duration // changes between two settle checks
		rounds     int
		cfg        *diffConfig
		dir        string
	}
	phases := []*phase{
		{name: "cache_default", cache: map[string]any{}, revalidate: time.Second, active: 3 * time.Second, rounds: 1},
		{name: "revalidate_1ms", cache: map[string]any{"revalidate": "1ms"}, revalidate: time.Millisecond, active: 450 * time.Millisecond, rounds: 6},
	}
	var cfgs []*diffConfig
	for _, p := range phases {
		p.dir = filepath.Join(base, p.name)
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p.cfg = secCfg("wb_"+p.name, map[string]any{}, map[string]any{"cache": p.cache})
		p.cfg.h2Root = p.dir
		cfgs = append(cfgs, p.cfg)
	}
	diffStartCaddy(t, d, cfgs)
	diffCheckHandlers(t, cfgs)
	clients := diffClients(t)
	for _, dc := range clients {
		dc.c.Timeout = 30 * time.Second // a timeout means a hang
	}
	// how far back a response may reach: the revalidate interval plus
	// scheduling margin for a loaded, -race run
	const margin = 250 * time.Millisecond

	// the oracle must be able to fail
	t.Run("sanity", func(t *testing.T) {
		t0 := time.Now()
		a, b := bytes.Repeat([]byte("a"), 2000), bytes.Repeat([]byte("b"), 2000)
		h := &secHistory{name: "f"}
		h.recordAt(t0, t0, false, a)
		h.recordAt(t0.Add(time.Second), t0.Add(time.Second), false, b)
		res := func(body []byte, etagSize int, at time.Time) secResult {
			return secResult{
				t0: at, t1: at.Add(time.Millisecond), proto: "h2", status: 200, contentLen: int64(len(body)), body: body,
				header: http.Header{"Etag": {fmt.Sprintf(`"%s-%s"`, strconv.FormatInt(at.UnixNano(), 36), strconv.FormatInt(int64(etagSize), 36))}},
			}
		}
		mixed := append(slices.Clone(a[:1000]), b[1000:]...)
		cases := []struct {
			name string
			r    secResult
			want secOutcome
		}{
			{"current version", res(b, 2000, t0.Add(2*time.Second)), secOK},
			{"old version within the window", res(a, 2000, t0.Add(1100*time.Millisecond)), secOK},
			{"old version after the window", res(a, 2000, t0.Add(5*time.Second)), secMismatch},
			{"wrong ETag size", res(b, 1999, t0.Add(2*time.Second)), secMismatch},
			{"two versions mixed, no change in place", res(mixed, 2000, t0.Add(1100*time.Millisecond)), secMismatch},
			{"short body", res(b[:1000], 2000, t0.Add(2*time.Second)), secMismatch},
		}
		short := res(b[:1000], 2000, t0.Add(2*time.Second))
		short.contentLen, short.bodyErr, short.shortCleanH2 = 2000, io.ErrUnexpectedEOF, true
		cases = append(cases, struct {
			name string
			r    secResult
			want secOutcome
		}{"clean short HTTP/2 body", short, secMismatch})
		reset := short
		reset.shortCleanH2, reset.h2StreamErr, reset.bodyErr = false, true, errors.New("stream error: INTERNAL_ERROR")
		cases = append(cases, struct {
			name string
			r    secResult
			want secOutcome
		}{"reset HTTP/2 stream after consistent bytes", reset, secAborted})
		for _, c := range cases {
			if got, why := h.check(c.r, 500*time.Millisecond); got != c.want {
				t.Errorf("%s: outcome %d (%s), want %d", c.name, got, why, c.want)
			}
		}
		// a change in place allows a torn body then, not later
		h.recordAt(t0.Add(3*time.Second), t0.Add(3*time.Second), true, a)
		if got, why := h.check(res(mixed, 2000, t0.Add(3*time.Second)), 500*time.Millisecond); got != secTorn {
			t.Errorf("torn body during a change in place: outcome %d (%s)", got, why)
		}
		if got, _ := h.check(res(mixed, 2000, t0.Add(5*time.Second)), 500*time.Millisecond); got != secMismatch {
			t.Errorf("torn body long after a change in place: outcome %d", got)
		}
	})

	var total secTally
	faults := map[string]int{}
	for _, p := range phases {
		t.Run(p.name, func(t *testing.T) {
			m := &secMutator{t: t, dir: p.dir, rng: rand.New(rand.NewPCG(7, uint64(len(p.name)))), counts: map[string]int{}} //nolint:gosec // test data
			for _, f := range []struct {
				name     string
				inPlace  bool
				min, max int
			}{
				// in memory (small_file_max is 64 KiB), and held open
				{"atomic-small.txt", false, 1100, 8 << 10},
				{"atomic-large.bin", false, 100 << 10, 300 << 10},
				{"inplace-small.txt", true, 1100, 40 << 10},
				{"inplace-medium.bin", true, 40 << 10, 90 << 10}, // across small_file_max
				{"inplace-large.bin", true, 150 << 10, 400 << 10},
			} {
				h := &secHistory{name: f.name, inPlace: f.inPlace, min: f.min, max: f.max, present: true, readable: true}
				c := m.content(h, (f.min+f.max)/2)
				if err := os.WriteFile(filepath.Join(p.dir, f.name), c, 0o644); err != nil {
					t.Fatal(err)
				}
				h.change(false, func() error { return nil }, c)
				m.files = append(m.files, h)
			}
			window := p.revalidate + margin
			var tally secTally
			var reportMu sync.Mutex
			reported := 0
			phaseT0 := time.Now()
			report := func(format string, args ...any) {
				reportMu.Lock()
				defer reportMu.Unlock()
				if reported++; reported <= 20 {
					t.Errorf(format, args...)
				}
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var gate sync.RWMutex // held by the settle checks, to have the server to themselves
			worker := func(dc diffClient, seed uint64) {
				defer wg.Done()
				_, site := p.cfg.sites(dc)
				rng := rand.New(rand.NewPCG(seed, 99)) //nolint:gosec // test
				for {
					select {
					case <-stop:
						return
					default:
					}
					h := m.files[rng.IntN(len(m.files))]
					gate.RLock()
					r := secFetch(dc, site, "/"+h.name, rng.IntN(8) == 0)
					gate.RUnlock()
					outcome, why := h.check(r, window)
					tally.requests.Add(1)
					switch outcome {
					case secOK:
						tally.ok.Add(1)
					case secTorn:
						tally.torn.Add(1)
					case secAborted:
						tally.aborted.Add(1)
					case secNotFound:
						tally.notFound.Add(1)
					case secForbidden:
						tally.forbidden.Add(1)
					case secMismatch:
						tally.mismatches.Add(1)
						report("%s %s GET /%s (range %v) at +%v..+%v: %s\n  status %d, Content-Length %d, ETag %q, Content-Range %q, %d body bytes, errors %v / %v",
							p.name, dc.name, h.name, r.rangeReq, r.t0.Sub(phaseT0), r.t1.Sub(phaseT0), why,
							r.status, r.contentLen, r.header.Get("Etag"), r.header.Get("Content-Range"), len(r.body), r.doErr, r.bodyErr)
					}
				}
			}
			byName := map[string]diffClient{}
			for _, dc := range clients {
				byName[dc.name] = dc
			}
			// 16 HTTP/2 streams, and a few HTTP/1.1 connections with TLS
			// and without (sendfile)
			for i := range 16 {
				wg.Add(1)
				go worker(byName["h2"], uint64(i))
			}
			for i := range 2 {
				wg.Add(2)
				go worker(byName["h1"], uint64(100+i))
				go worker(byName["h1c"], uint64(200+i))
			}
			site := func(dc diffClient) diffSite { _, s := p.cfg.sites(dc); return s }
			for round := range p.rounds {
				deadline := time.Now().Add(p.active)
				for time.Now().Before(deadline) {
					m.step()
					time.Sleep(time.Duration(2+m.rng.IntN(6)) * time.Millisecond)
				}
				// quiet: the cache must catch up within revalidate
				gate.Lock()
				time.Sleep(p.revalidate + margin)
				n := secSettled(t, fmt.Sprintf("%s round %d", p.name, round), p.dir, m.files, clients, site)
				gate.Unlock()
				tally.settled.Add(int64(n))
			}
			close(stop)
			wg.Wait()

			n := 0
			var desc []string
			for _, op := range slices.Sorted(maps.Keys(m.counts)) {
				desc = append(desc, fmt.Sprintf("%s=%d", op, m.counts[op]))
				faults[op] += m.counts[op]
				n += m.counts[op]
			}
			t.Logf("%s: %d requests: %d whole versions, %d torn by a change in place (documented), %d aborted, %d 404, %d 403, %d mismatches; %d settle checks; %d faults injected (%s)",
				p.name, tally.requests.Load(), tally.ok.Load(), tally.torn.Load(), tally.aborted.Load(), tally.notFound.Load(), tally.forbidden.Load(),
				tally.mismatches.Load(), tally.settled.Load(), n, strings.Join(desc, " "))
			if os.Geteuid() == 0 {
				t.Logf("running as root: mode 000 does not stop root's reads, so chmod 000 exercises only the cache's mode check, never a 403")
			}
			if tally.requests.Load() < 200 {
				t.Errorf("only %d requests", tally.requests.Load())
			}
			if tally.ok.Load() < tally.requests.Load()/4 {
				t.Errorf("only %d of %d responses were whole versions", tally.ok.Load(), tally.requests.Load())
			}
			for _, op := range []string{"truncate", "extend", "append", "rewrite_in_place", "rewrite_resize", "rename_over", "delete", "chmod_000"} {
				if m.counts[op] == 0 {
					t.Errorf("fault %s never injected", op)
				}
			}
			total.requests.Add(tally.requests.Load() + tally.settled.Load())
			total.mismatches.Add(tally.mismatches.Load())
			total.aborted.Add(tally.aborted.Load())
			total.torn.Add(tally.torn.Load())
			total.notFound.Add(tally.notFound.Load())
		})
	}
	n := 0
	for _, c := range faults {
		n += c
	}
	t.Logf("total: %d requests, %d faults injected, %d mismatches, %d aborted, %d torn (documented), %d not found",
		total.requests.Load(), n, total.mismatches.Load(), total.aborted.Load(), total.torn.Load(), total.notFound.Load())
}

// TestWrongBytesTornSnapshot rewrites a file that the cache holds in
// memory in place, with one pwrite of the same size, while requests make
// the cache load it again; then, once the write is over and the revalidate
// interval has passed, every response must be the file's new content. A
// snapshot read while the write ran has the stat of the file after the
// write (the write sets the modification time before it copies bytes, and
// the size does not change), so the cache must not keep such a snapshot: it
// would serve bytes that never were on disk for as long as the file is
// requested. The file is large (small_file_max is raised) so that the write
// takes milliseconds, not microseconds.
func TestWrongBytesTornSnapshot(t *testing.T) {
	root := t.TempDir()
	const size = 24 << 20
	srv := startTestCaddy(t, h2FileServer(root, map[string]any{"cache": map[string]any{
		"small_file_max": 32 << 20, "max_memory": 256 << 20, "revalidate": "1ms",
	}}))
	name := filepath.Join(root, "big.txt")
	version := func(n int) []byte {
		b := bytes.Repeat([]byte(fmt.Sprintf("version %d of big.txt; ", n)), size/len("version 0 of big.txt; ")+1)
		return b[:size]
	}
	if err := os.WriteFile(name, version(0), 0o644); err != nil {
		t.Fatal(err)
	}
	get := func(method string, hdrs ...string) (*http.Response, []byte, error) {
		req, err := http.NewRequest(method, srv.URL+"/big.txt", nil)
		if err != nil {
			return nil, nil, err
		}
		for i := 0; i+1 < len(hdrs); i += 2 {
			req.Header.Set(hdrs[i], hdrs[i+1])
		}
		resp, err := srv.H2.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	const tail = 1 << 20
	tailRange := fmt.Sprintf("bytes=%d-", size-tail)
	if _, body, err := get(http.MethodGet, "Range", tailRange); err != nil || !bytes.Equal(body, version(0)[size-tail:]) {
		t.Fatalf("first GET: %d bytes, %v", len(body), err)
	}
	// the write and the cache's read race: attempts until one shows the
	// fault or the deadline passes. A cache that never keeps a torn
	// snapshot passes every attempt.
	deadline := time.Now().Add(5 * time.Second)
	attempts := 0
	for n := 1; time.Now().Before(deadline); n++ {
		attempts++
		next := version(n)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		// HEAD requests look the file up (and load it again once it
		// changed) without sending it
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					get(http.MethodHead) //nolint:errcheck // only to load the cache
				}
			}()
		}
		time.Sleep(10 * time.Millisecond)
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = f.WriteAt(next, 0)
		took := time.Since(start)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		time.Sleep(50 * time.Millisecond) // well past revalidate (1ms)

		info, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		etag := fmt.Sprintf(`"%s-%s"`, strconv.FormatInt(info.ModTime().UnixNano(), 36), strconv.FormatInt(info.Size(), 36))
		// a snapshot read while the write ran is the new bytes up to
		// where the read overtook the write, then the old ones: the tail
		// shows it, and is cheap to get
		resp, body, err := get(http.MethodGet, "Range", tailRange)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, next[size-tail:]) {
			if resp, body, err = get(http.MethodGet); err != nil {
				t.Fatal(err)
			}
		}
		if len(body) == size && !bytes.Equal(body, next) || len(body) == tail && !bytes.Equal(body, next[size-tail:]) || len(body) != size && len(body) != tail {
			// which 1 MiB blocks are the old and which the new version
			blocks := func(body []byte) string {
				var b []string
				prev := version(n - 1)
				for off := 0; off < len(body); off += 1 << 20 {
					end := min(off+1<<20, len(body))
					switch {
					case bytes.Equal(body[off:end], next[off:end]):
						b = append(b, "new")
					case bytes.Equal(body[off:end], prev[off:end]):
						b = append(b, "old")
					default:
						b = append(b, "mixed")
					}
				}
				return strings.Join(b, " ")
			}
			first := blocks(body)
			// and it stays so
			time.Sleep(time.Second)
			still := 0
			for range 5 {
				if _, again, err := get(http.MethodGet, "Range", tailRange); err == nil && !bytes.Equal(again, next[size-tail:]) {
					still++
				}
			}
			t.Fatalf("attempt %d: 50ms after a same-size rewrite in place (pwrite took %v), GET /big.txt has ETag %q (the file's: %q) and %d bytes that never were the file's: 1 MiB blocks [%s]; 1s later, %d of 5 GETs still send them (their last MiB)",
				attempts, took, resp.Header.Get("Etag"), etag, len(body), first, still)
		}
		if got := resp.Header.Get("Etag"); got != etag {
			t.Fatalf("attempt %d: ETag %q, file's %q", attempts, got, etag)
		}
	}
	t.Logf("%d same-size rewrites in place, each followed by the current content", attempts)
}
