package integration

// The site and the checks of FuzzServeRequest (fuzz_serve_test.go): files
// with markers, file_server and h2_file_server handlers called directly, and
// what a body must hold.

import (
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
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"

	h2file "github.com/h2file/caddy-h2file"
	"github.com/h2file/caddy-h2file/internal/harness"
)

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
		fx.visible[name] = []byte(content)
	}
	harness.WriteTree(f, fx.root, visible)
	harness.WriteTree(f, fx.root, hidden)
	harness.LinkTree(f, fx.root, map[string]string{"link-in.txt": "hello.txt"})
	harness.SetMtimes(f, base, diffMtime)
	if err := os.Chtimes(filepath.Join(fx.root, "epoch.txt"), time.Unix(0, 0), time.Unix(0, 0)); err != nil {
		f.Fatal(err)
	}
	return fx
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
	cached, noMem, uncached := new(h2file.Handler), new(h2file.Handler), new(h2file.Handler)
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
