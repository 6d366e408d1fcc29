package h2file

// Fuzz targets (issue "Reliability and security suite", part 5).
//
// FuzzSanitizedPath: the mapping of a request path to a file, and the hide
// rule applied to the result. FuzzServeRequest: h2_file_server's ServeHTTP,
// called directly with fuzzed method, path and conditional/range/encoding
// headers, against Caddy's file_server on the same input.
//
// Plain `go test` runs the seeds: every path of testdata/hostile/paths.txt,
// the long ones of secGeneratedPaths, and every request of the differential
// corpus (testdata/diff/*.txt). To fuzz:
//
//	go test -run XXX -fuzz FuzzSanitizedPath -fuzztime 60s .
//	go test -run XXX -fuzz FuzzServeRequest -fuzztime 60s .

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
)

// fzSeedPaths are the request-targets every fuzz target starts from.
func fzSeedPaths(f *testing.F) []string {
	paths := append(secLoadPaths(f), secGeneratedPaths()...)
	for _, e := range fzCorpus(f) {
		paths = append(paths, e.target)
	}
	return paths
}

// fzCorpusEntry is one request of the differential corpus.
type fzCorpusEntry struct {
	method, target string
	headers        [][2]string
}

// fzCorpus reads testdata/diff/*.txt (see corpus.txt for the format) the
// way diffLoadCorpus does, for a *testing.F.
func fzCorpus(f *testing.F) []fzCorpusEntry {
	files, err := filepath.Glob(filepath.Join("testdata", "diff", "*.txt"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no corpus in testdata/diff: %v", err)
	}
	var entries []fzCorpusEntry
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			text := strings.TrimRight(sc.Text(), "\r")
			if strings.TrimSpace(text) == "" || strings.HasPrefix(strings.TrimSpace(text), "#") {
				continue
			}
			var fields []string
			for _, fl := range strings.Split(text, "\t") {
				if strings.HasPrefix(strings.TrimSpace(fl), "#") {
					break
				}
				if fl != "" {
					fields = append(fields, fl)
				}
			}
			if len(fields) < 2 {
				continue
			}
			e := fzCorpusEntry{method: fields[0], target: fields[1]}
			for _, h := range fields[2:] {
				if name, value, ok := strings.Cut(h, ":"); ok {
					e.headers = append(e.headers, [2]string{strings.TrimSpace(name), strings.TrimSpace(value)})
				}
			}
			entries = append(entries, e)
		}
	}
	return entries
}

// ---------------------------------------------------------------------------
// FuzzSanitizedPath
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// FuzzServeRequest
// ---------------------------------------------------------------------------

// fzMarker is in every file the handlers must never serve: hidden ones and
// those outside the root.
var fzMarker = regexp.MustCompile(`FZ-(?:HIDDEN|OUTSIDE)-MARKER`)

// fzFixture is the site of FuzzServeRequest.
type fzFixture struct {
	root    string
	visible map[string][]byte // root-relative name: content, of every file that may be served
}

// fzBuildFixture makes a small site: visible files (one read from a cached
// descriptor), precompressed sidecars, an index, a symlink inside, hidden
// files (by glob, name, path, with their sidecars) and files outside the
// root, all of which hold fzMarker. No symlink reaches a hidden file or
// leaves the root, so no body may ever hold the marker.
func fzBuildFixture(f *testing.F) fzFixture {
	base := f.TempDir()
	fx := fzFixture{root: filepath.Join(base, "root"), visible: map[string][]byte{}}
	rng := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // test data
	big := make([]byte, 100<<10)       // above small_file_max: a cached descriptor
	for i := range big {
		big[i] = 'a' + byte(rng.IntN(26))
	}
	visible := map[string]string{
		"index.html":        "<p>root index</p>\n",
		"hello.txt":         "Hello, fuzz!\n",
		"empty.txt":         "",
		"epoch.txt":         "no useful modification time\n",
		"big.bin":           string(big),
		"style.css":         "body { color: red; }\n",
		"style.css.gz":      "GZIP style.css sidecar\n",
		"style.css.br":      "BROTLI style.css sidecar, longer\n",
		"style.css.zst":     "ZSTD style.css sidecar, longest of all\n",
		"dir/index.html":    "<p>dir index</p>\n",
		"dir/page.txt":      "dir page\n",
		"dir/index.html.gz": "GZIP dir index sidecar\n",
		"sub/index.html":    "<p>sub index, after the hidden index.secret</p>\n",
		"privateer.txt":     "not private\n",
		"100%.txt":          "percent\n",
		"café.txt":          "cafe\n",
	}
	hidden := map[string]string{
		"x.secret":              "FZ-HIDDEN-MARKER x.secret\n",
		"x.secret.gz":           "FZ-HIDDEN-MARKER x.secret.gz\n",
		"sub/index.secret":      "FZ-HIDDEN-MARKER sub/index.secret\n",
		"private/key.txt":       "FZ-HIDDEN-MARKER private/key.txt\n",
		"private/index.html":    "FZ-HIDDEN-MARKER private/index.html\n",
		"hiddendir/file.txt":    "FZ-HIDDEN-MARKER hiddendir/file.txt\n",
		"hiddendir/index.html":  "FZ-HIDDEN-MARKER hiddendir/index.html\n",
		"Caddyfile":             "FZ-HIDDEN-MARKER Caddyfile\n",
		"dir/.git/config":       "FZ-HIDDEN-MARKER .git/config\n",
		"../outside/secret.txt": "FZ-OUTSIDE-MARKER outside/secret.txt\n",
		"../outside/index.html": "FZ-OUTSIDE-MARKER outside/index.html\n",
		"../root-evil/x.txt":    "FZ-OUTSIDE-MARKER root-evil/x.txt\n",
	}
	for name, content := range visible {
		fzWrite(f, filepath.Join(fx.root, name), content)
		fx.visible[name] = []byte(content)
	}
	for name, content := range hidden {
		fzWrite(f, filepath.Join(fx.root, name), content)
	}
	if err := os.Symlink("hello.txt", filepath.Join(fx.root, "link-in.txt")); err != nil {
		f.Fatal(err)
	}
	err := filepath.Walk(base, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.Mode()&os.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, diffMtime, diffMtime)
	})
	if err != nil {
		f.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(fx.root, "epoch.txt"), time.Unix(0, 0), time.Unix(0, 0)); err != nil {
		f.Fatal(err)
	}
	return fx
}

func fzWrite(f *testing.F, name, content string) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		f.Fatal(err)
	}
}

// fzHandlers provisions file_server and h2_file_server (with and without
// its cache) with the same configuration.
func fzHandlers(f *testing.F, root string) (fs caddyhttp.MiddlewareHandler, h2 []caddyhttp.MiddlewareHandler) {
	opts := map[string]any{
		"root": root,
		"hide": []string{
			"*.secret", "*.secret.*", "private", ".git",
			filepath.Join(root, "hiddendir"), filepath.Join(root, "Caddyfile"),
		},
		"index_names":         []string{"index.secret", "index.html", "index.txt"},
		"precompressed":       map[string]any{"br": map[string]any{}, "zstd": map[string]any{}, "gzip": map[string]any{}},
		"precompressed_order": []string{"br", "zstd", "gzip"},
	}
	// a config that only quiets the logs (the default logger writes debug
	// lines for every request)
	quiet := `{"admin": {"disabled": true, "config": {"persist": false}}, "logging": {"logs": {"default": {"level": "ERROR"}}}}`
	if err := caddy.Load([]byte(quiet), true); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { caddy.Stop() }) //nolint:errcheck // nothing to do about it
	ctx, cancel := caddy.NewContext(caddy.ActiveContext())
	f.Cleanup(cancel)
	decode := func(v any, extra map[string]any) {
		m := map[string]any{}
		for k, val := range opts {
			m[k] = val
		}
		for k, val := range extra {
			m[k] = val
		}
		raw, err := json.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			f.Fatal(err)
		}
		if err := v.(caddy.Provisioner).Provision(ctx); err != nil {
			f.Fatal(err)
		}
		if cu, ok := v.(caddy.CleanerUpper); ok {
			f.Cleanup(func() { cu.Cleanup() })
		}
	}
	fsrv := new(fileserver.FileServer)
	decode(fsrv, nil)
	// a cache of their own (caches are shared by configurations with the
	// same limits); one keeps nothing in memory, so that files are read
	// from cached descriptors
	cached, noMem, uncached := new(Handler), new(Handler), new(Handler)
	decode(cached, map[string]any{"cache": map[string]any{"max_files": 777}})
	decode(noMem, map[string]any{"cache": map[string]any{"max_files": 778, "max_memory": -1}})
	decode(uncached, map[string]any{"cache": map[string]any{"disabled": true}})
	return fsrv, []caddyhttp.MiddlewareHandler{cached, noMem, uncached}
}

// fzServe runs one handler on a request built from the fuzzed fields, as
// Caddy's server prepares it, and returns the response as the client would
// see it (an error's status with an empty body).
func fzServe(t testing.TB, h caddyhttp.MiddlewareHandler, method string, u *url.URL, target string, hdr http.Header, h1 bool) diffResponse {
	rec := httptest.NewRecorder()
	u2 := *u
	req := &http.Request{
		Method: method, URL: &u2, RequestURI: target, Header: hdr.Clone(), Host: "example.com",
		RemoteAddr: "192.0.2.1:1234", Proto: "HTTP/2.0", ProtoMajor: 2, TLS: &tls.ConnectionState{},
	}
	if h1 {
		// cleartext HTTP/1.1: h2_file_server's sendfile path
		req.Proto, req.ProtoMajor, req.ProtoMinor, req.TLS = "HTTP/1.1", 1, 1, nil
	}
	req = caddyhttp.PrepareRequest(req.WithContext(context.Background()), caddy.NewReplacer(), rec, nil)
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t.Errorf("next handler called without pass_thru")
		return nil
	})
	err := h.ServeHTTP(rec, req, next)
	resp := diffResponse{proto: req.ProtoMajor, header: rec.Header(), status: rec.Code, body: rec.Body.Bytes()}
	if err != nil {
		resp.status = http.StatusInternalServerError
		var herr caddyhttp.HandlerError
		if errors.As(err, &herr) && herr.StatusCode != 0 {
			resp.status = herr.StatusCode
		}
		resp.body = nil
	}
	return resp
}

// fzStatuses are the statuses a static file handler may answer with here.
var fzStatuses = []int{200, 206, 304, 308, 400, 404, 405, 412, 416}

// fzCheckBody checks that a successful body is what a file of the site
// holds: a whole file for 200, the announced ranges of one for 206.
func fzCheckBody(fx fzFixture, r diffResponse, method string) error {
	if method == http.MethodHead || r.status != 200 && r.status != 206 {
		if method == http.MethodHead && len(r.body) > 0 {
			return fmt.Errorf("HEAD with a body of %d bytes", len(r.body))
		}
		return nil
	}
	isFile := func(b []byte) bool {
		for _, c := range fx.visible {
			if bytes.Equal(b, c) {
				return true
			}
		}
		return false
	}
	// part reports whether b is bytes a-b of a visible file of size n
	part := func(cr string, b []byte) error {
		var first, last, n int64
		if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &first, &last, &n); err != nil {
			return fmt.Errorf("Content-Range %q: %v", cr, err)
		}
		if last == first-1 && len(b) == 0 && first <= n {
			// net/http answers "bytes=-0" with an empty 206 ("bytes
			// n-(n-1)/n"), file_server as well
			return nil
		}
		for _, c := range fx.visible {
			if int64(len(c)) == n && last < n && first <= last && bytes.Equal(c[first:last+1], b) {
				return nil
			}
		}
		return fmt.Errorf("part %q (%d bytes) is not that range of any file", cr, len(b))
	}
	if r.status == 200 {
		if !isFile(r.body) {
			return fmt.Errorf("200 with a body (%d bytes) that is no file of the site", len(r.body))
		}
		return nil
	}
	ct := r.header.Get("Content-Type")
	if mt, params, err := mime.ParseMediaType(ct); err == nil && mt == "multipart/byteranges" {
		mr := multipart.NewReader(bytes.NewReader(r.body), params["boundary"])
		parts := 0
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("multipart body: %v", err)
			}
			b, err := io.ReadAll(p)
			if err != nil {
				return err
			}
			if err := part(p.Header.Get("Content-Range"), b); err != nil {
				return err
			}
			parts++
		}
		if parts < 2 {
			return fmt.Errorf("multipart/byteranges with %d parts", parts)
		}
		return nil
	}
	return part(r.header.Get("Content-Range"), r.body)
}

// FuzzServeRequest drives ServeHTTP of file_server and of h2_file_server
// (open-file cache on, on without memory, off) with the same fuzzed
// request: method, target, Range, If-Range, If-None-Match, If-Match,
// If-Modified-Since, If-Unmodified-Since, Accept-Encoding, over HTTP/2
// (TLS) or cleartext HTTP/1.1. Nothing may panic; the status must be one
// a static file server gives; no body may hold a hidden or outside file's
// marker; a 200 body must be a whole file of the site and a 206 body the
// announced range(s) of one; and h2_file_server must answer exactly as
// file_server does: status, headers (multipart boundaries normalized) and
// body.
func FuzzServeRequest(f *testing.F) {
	fx := fzBuildFixture(f)
	fsrv, h2s := fzHandlers(f, fx.root)

	info, err := os.Stat(filepath.Join(fx.root, "hello.txt"))
	if err != nil {
		f.Fatal(err)
	}
	helloEtag := calculateEtag(info)
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
	for i, p := range append(secLoadPaths(f), secGeneratedPaths()...) {
		seeds = append(seeds, seed{method: "GET", target: p, h1: i%2 == 1})
		seeds = append(seeds, seed{method: "GET", target: p, ae: "br, zstd, gzip", rng: "bytes=0-3,5-"})
	}
	for _, e := range fzCorpus(f) {
		s := seed{method: e.method, target: e.target}
		for _, h := range e.headers {
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
