package h2file

// Debug logs: for the same requests, h2_file_server writes the debug
// entries file_server writes (same messages, same fields, same order),
// plus one entry per open-file cache lookup saying what the cache decided.
// (Directory listings are rendered by Caddy's own file server, which logs
// the path decisions once more; they are not compared here.)

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/h2file/caddy-h2file/internal/fdcache"
	"github.com/h2file/caddy-h2file/internal/harness"
)

// debugLogRequests are the requests compared: each decision file_server
// logs is taken by at least one.
var debugLogRequests = []struct {
	target, acceptEncoding string
}{
	{"/hello.txt", ""},                // opening file
	{"/hello.txt", ""},                // again: from the cache
	{"/dir", ""},                      // located index file, redirect adding a slash
	{"/dir/", ""},                     // located index file
	{"/hello.txt/", ""},               // redirect removing a slash
	{"/missing.txt", ""},              // not found
	{"/style.css", "gzip"},            // opening compressed sidecar file
	{"/style.css", "br, gzip"},        // br sidecar hidden, gzip served
	{"/app.js", "gzip"},               // precompressed file not accessible
	{"/sidecar-dir.txt", "gzip"},      // a directory where the sidecar would be
	{"/secret.key", ""},               // hiding file
	{"/idxhidden/", ""},               // hiding index file, then the other index
	{"/noindex/", ""},                 // no index file in directory
	{"/noindex/../hello.txt", "gzip"}, // cleaned path
}

// TestDebugLogsMatchFileServer runs the requests through file_server and
// through h2_file_server (cache on and off), each logging to an observer.
func TestDebugLogsMatchFileServer(t *testing.T) {
	root := debugLogFixture(t)
	hide := []string{"*.key", "*.css.br", filepath.Join(root, "idxhidden", "index.html")}
	precompressed := func() caddy.ModuleMap {
		return caddy.ModuleMap{"gzip": []byte(`{}`), "br": []byte(`{}`)}
	}
	fsrv := &fileserver.FileServer{Root: root, Hide: hide, PrecompressedRaw: precompressed(),
		PrecompressedOrder: []string{"br", "gzip"}, IndexNames: []string{"index.html", "index.txt"}}
	fsLogs := debugLogProvision(t, fsrv)

	for _, cache := range []*CacheConfig{nil, {Disabled: true}} {
		t.Run(fmt.Sprintf("cache_disabled=%v", cache != nil), func(t *testing.T) {
			h := &Handler{Root: root, Hide: append([]string(nil), hide...), PrecompressedRaw: precompressed(),
				PrecompressedOrder: []string{"br", "gzip"}, IndexNames: []string{"index.html", "index.txt"}, Cache: cache}
			h2Logs := debugLogProvision(t, h)
			var cacheResults []string
			seen := map[string]bool{}
			for _, req := range debugLogRequests {
				want := debugLogServe(t, fsrv, fsLogs, req.target, req.acceptEncoding)
				for _, e := range want {
					seen[e.Message] = true
				}
				got := debugLogServe(t, h, h2Logs, req.target, req.acceptEncoding)
				var shared []observer.LoggedEntry
				for _, e := range got {
					if e.Message == "open-file cache lookup" {
						cacheResults = append(cacheResults, req.target+" "+e.ContextMap()["filename"].(string)[len(root):]+" "+e.ContextMap()["result"].(string))
						continue
					}
					shared = append(shared, e)
				}
				if d := debugLogDiff(want, shared); d != "" {
					t.Errorf("GET %s (Accept-Encoding %q): %s\nfile_server:\n%s\nh2_file_server:\n%s",
						req.target, req.acceptEncoding, d, debugLogFormat(want), debugLogFormat(shared))
				}
			}
			// the requests must take every decision file_server logs
			for _, msg := range []string{
				"sanitized path join", "opening file", "opening compressed sidecar file", "located index file",
				"redirecting to canonical URI (adding trailing slash for directory",
				"redirecting to canonical URI (removing trailing slash for file",
				"precompressed file not accessible", "hiding file", "hiding index file", "no index file in directory",
			} {
				if !seen[msg] {
					t.Errorf("file_server never logged %q: the requests do not cover it", msg)
				}
			}
			if cache != nil {
				if len(cacheResults) != 0 {
					t.Errorf("cache lookups logged without a cache: %q", cacheResults)
				}
				return
			}
			// the first request of /hello.txt loads it, the second finds it
			for _, want := range []string{
				"/hello.txt /hello.txt miss",
				"/hello.txt /hello.txt hit",
				"/missing.txt /missing.txt miss",
				"/app.js /app.js.gz miss",
				"/noindex/../hello.txt /hello.txt hit",
			} {
				if !strings.Contains(strings.Join(cacheResults, "\n")+"\n", want+"\n") {
					t.Errorf("no cache lookup logged as %q; logged:\n%s", want, strings.Join(cacheResults, "\n"))
				}
			}
		})
	}
}

// TestDebugLogCacheRevalidated checks the decisions logged after the
// revalidation interval: a stat that confirms the entry, and a file that
// changed.
func TestDebugLogCacheRevalidated(t *testing.T) {
	root := debugLogFixture(t)
	h := &Handler{Root: root, Cache: &CacheConfig{Disabled: true}}
	logs := debugLogProvision(t, h)
	var now atomic.Int64
	now.Store(time.Unix(1_700_000_000, 0).UnixNano())
	limits, err := (&CacheConfig{}).limits(0)
	if err != nil {
		t.Fatal(err)
	}
	limits.NoEvents = true // what revalidation decides; events would leave nothing to revalidate
	h.cache = fdcache.New(limits, fdcache.Options[fileMeta]{
		Describe: describeFile,
		Logger:   zap.NewNop(),
		Now:      func() time.Time { return time.Unix(0, now.Load()) },
	})
	t.Cleanup(h.cache.Close)

	results := func(target string) []string {
		var out []string
		for _, e := range debugLogServe(t, h, logs, target, "") {
			if e.Message == "open-file cache lookup" {
				out = append(out, e.ContextMap()["result"].(string))
			}
		}
		return out
	}
	if got := results("/hello.txt"); !reflect.DeepEqual(got, []string{fdcache.ResultMiss}) {
		t.Fatalf("first lookup logged %q, want a miss", got)
	}
	if got := results("/hello.txt"); !reflect.DeepEqual(got, []string{fdcache.ResultHit}) {
		t.Fatalf("second lookup logged %q, want a hit", got)
	}
	now.Add(int64(2 * limits.Revalidate))
	if got := results("/hello.txt"); !reflect.DeepEqual(got, []string{fdcache.ResultRevalidated}) {
		t.Fatalf("lookup after the interval logged %q, want revalidated", got)
	}
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("changed, and longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	now.Add(int64(2 * limits.Revalidate))
	if got := results("/hello.txt"); !reflect.DeepEqual(got, []string{fdcache.ResultReloaded}) {
		t.Fatalf("lookup of a changed file logged %q, want reloaded", got)
	}
}

// debugLogFixture builds a small site, settled in the past.
func debugLogFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range map[string]string{
		"hello.txt":             "Hello, world!\n",
		"dir/index.html":        "<p>dir index</p>\n",
		"style.css":             "body {}\n",
		"style.css.gz":          "GZIP style.css\n",
		"style.css.br":          "BROTLI style.css (hidden)\n",
		"app.js":                "console.log(1)\n",
		"sidecar-dir.txt":       "its sidecar is a directory\n",
		"sidecar-dir.txt.gz/x":  "inside\n",
		"secret.key":            "secret\n",
		"idxhidden/index.html":  "<p>hidden</p>\n",
		"idxhidden/index.txt":   "other index\n",
		"noindex/something.txt": "no index here\n",
	} {
		harness.WriteFile(t, filepath.Join(root, name), []byte(content))
	}
	old := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	err := filepath.Walk(root, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(path, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// debugLogProvision provisions a file handler and points its logger at an
// observer recording every level. file_server's logger is not exported; it
// is set through reflection, and the test fails if the field is gone.
func debugLogProvision(t *testing.T, h caddy.Provisioner) *observer.ObservedLogs {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := h.Provision(ctx); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if cu, ok := h.(caddy.CleanerUpper); ok {
		t.Cleanup(func() { _ = cu.Cleanup() })
	}
	core, logs := observer.New(zapcore.DebugLevel)
	logger := zap.New(core)
	switch h := h.(type) {
	case *Handler:
		h.logger = logger
	case *fileserver.FileServer:
		field := reflect.ValueOf(h).Elem().FieldByName("logger")
		if !field.IsValid() || field.Type() != reflect.TypeFor[*zap.Logger]() {
			t.Fatal("fileserver.FileServer has no logger field of type *zap.Logger any more")
		}
		reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem().Set(reflect.ValueOf(logger))
	}
	return logs
}

// debugLogServe serves one GET and returns the entries it logged.
func debugLogServe(t *testing.T, h caddyhttp.MiddlewareHandler, logs *observer.ObservedLogs, target, acceptEncoding string) []observer.LoggedEntry {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "https://example.com"+target, nil)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	w := httptest.NewRecorder()
	req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), w, nil)
	_ = h.ServeHTTP(w, req, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil }))
	return logs.TakeAll()
}

// debugLogDiff compares two sequences of entries by level, message and
// fields.
func debugLogDiff(want, got []observer.LoggedEntry) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if want[i].Level != got[i].Level || want[i].Message != got[i].Message {
			return fmt.Sprintf("entry %d is %s %q, want %s %q", i, got[i].Level, got[i].Message, want[i].Level, want[i].Message)
		}
		if w, g := want[i].ContextMap(), got[i].ContextMap(); !reflect.DeepEqual(w, g) {
			return fmt.Sprintf("entry %d (%q) has fields %v, want %v", i, want[i].Message, g, w)
		}
	}
	return ""
}

func debugLogFormat(entries []observer.LoggedEntry) string {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "  %s %q %v\n", e.Level, e.Message, e.ContextMap())
	}
	return b.String()
}
