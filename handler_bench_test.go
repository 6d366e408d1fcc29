package h2file

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// BenchmarkServeHTTP serves a hot file through h2_file_server (open-file
// cache on and off) and through Caddy's file_server, in the same run, with
// the response discarded: what the handler itself costs per request.
func BenchmarkServeHTTP(b *testing.B) {
	root := b.TempDir()
	for _, f := range []struct {
		name string
		size int
	}{{"10k.bin", 10_000}, {"100k.bin", 100_000}, {"1m.bin", 1 << 20}} {
		if err := os.WriteFile(filepath.Join(root, f.name), harness.RandomBytes(b, f.size), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	// a config that only quiets the logs, so both handlers log alike
	quiet := `{"admin": {"disabled": true}, "logging": {"logs": {"default": {"level": "ERROR"}}}}`
	if err := caddy.Load([]byte(quiet), true); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { caddy.Stop() })
	ctx, cancel := caddy.NewContext(caddy.ActiveContext())
	b.Cleanup(cancel)
	handlers := []struct {
		name string
		h    caddyhttp.MiddlewareHandler
	}{
		{"file_server", &fileserver.FileServer{Root: root}},
		{"h2_file_server", &Handler{Root: root}},
		{"h2_file_server_nocache", &Handler{Root: root, Cache: &CacheConfig{Disabled: true}}},
	}
	for _, h := range handlers {
		if err := h.h.(caddy.Provisioner).Provision(ctx); err != nil {
			b.Fatal(err)
		}
		if cu, ok := h.h.(caddy.CleanerUpper); ok {
			b.Cleanup(func() { cu.Cleanup() })
		}
	}
	for _, file := range []string{"10k.bin", "100k.bin", "1m.bin"} {
		for _, h := range handlers {
			b.Run(file+"/"+h.name, func(b *testing.B) {
				w := &discardResponse{header: http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					// as over HTTP/2 with TLS
					req := httptest.NewRequest(http.MethodGet, "https://example.com/"+file, nil)
					req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
					req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), w, nil)
					clear(w.header)
					if err := h.h.ServeHTTP(w, req, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// discardResponse is a ResponseWriter that keeps only headers.
type discardResponse struct{ header http.Header }

func (w *discardResponse) Header() http.Header         { return w.header }
func (w *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardResponse) WriteHeader(int)             {}

// BenchmarkServeVariant serves a held compressed variant (compress, zstd)
// of a 100 KB script, next to the same file without compress: what
// answering from a variant costs per request.
func BenchmarkServeVariant(b *testing.B) {
	root := b.TempDir()
	script := bytes.Repeat([]byte("function f(a, b) { return a + b; } // variant\n"), 2200)
	harness.WriteFile(b, filepath.Join(root, "app.js"), script)
	if err := caddy.Load([]byte(`{"admin": {"disabled": true}, "logging": {"logs": {"default": {"level": "ERROR"}}}}`), true); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { caddy.Stop() })
	ctx, cancel := caddy.NewContext(caddy.ActiveContext())
	b.Cleanup(cancel)
	compress := &CompressConfig{EncodingsRaw: caddy.ModuleMap{"zstd": []byte(`{}`), "gzip": []byte(`{}`)}}
	for _, h := range []struct {
		name string
		h    *Handler
	}{{"identity", &Handler{Root: root}}, {"variant", &Handler{Root: root, Compress: compress}}} {
		if err := h.h.Provision(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.h.Cleanup() })
		b.Run(h.name, func(b *testing.B) {
			w := &discardResponse{header: http.Header{}}
			serve := func() {
				req := httptest.NewRequest(http.MethodGet, "https://example.com/app.js", nil)
				req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
				req.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
				req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), w, nil)
				clear(w.header)
				if err := h.h.ServeHTTP(w, req, nil); err != nil {
					b.Fatal(err)
				}
			}
			serve()
			if h.h.compressor != nil {
				// the first request made the variant in the background
				for h.h.compressor.store.Stats().Held == 0 {
					time.Sleep(time.Millisecond)
				}
				serve()
				if w.header.Get("Content-Encoding") != "zstd" {
					b.Fatalf("no variant served: %v", w.header)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				serve()
			}
		})
	}
}

// BenchmarkServePrecompressed serves a style sheet's .br sidecar to a
// request that accepts br, as a browser's (precompressed br gzip), through
// h2_file_server and file_server in the same run, beside request_only,
// the request's preparation alone: a handler's own allocations are its
// count less request_only's.
func BenchmarkServePrecompressed(b *testing.B) {
	root := b.TempDir()
	css := bytes.Repeat([]byte(".a { color: red; } /* precompressed */\n"), 600)
	harness.WriteFile(b, filepath.Join(root, "site.css"), css)
	harness.WriteFile(b, filepath.Join(root, "site.css.br"), css[:2000]) // the sidecar's bytes do not matter
	harness.WriteFile(b, filepath.Join(root, "site.css.gz"), css[:2500])
	if err := caddy.Load([]byte(`{"admin": {"disabled": true}, "logging": {"logs": {"default": {"level": "ERROR"}}}}`), true); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { caddy.Stop() })
	ctx, cancel := caddy.NewContext(caddy.ActiveContext())
	b.Cleanup(cancel)
	precompressed := caddy.ModuleMap{"br": []byte(`{}`), "gzip": []byte(`{}`)}
	order := []string{"br", "gzip"}
	handlers := []struct {
		name string
		h    caddyhttp.MiddlewareHandler
	}{
		{"request_only", nil},
		{"file_server", &fileserver.FileServer{Root: root, PrecompressedRaw: precompressed, PrecompressedOrder: order}},
		{"h2_file_server", &Handler{Root: root, PrecompressedRaw: precompressed, PrecompressedOrder: order}},
	}
	for _, h := range handlers {
		if h.h == nil {
			continue
		}
		if err := h.h.(caddy.Provisioner).Provision(ctx); err != nil {
			b.Fatal(err)
		}
		if cu, ok := h.h.(caddy.CleanerUpper); ok {
			b.Cleanup(func() { cu.Cleanup() })
		}
	}
	for _, h := range handlers {
		b.Run(h.name, func(b *testing.B) {
			w := &discardResponse{header: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "https://example.com/site.css", nil)
				req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
				req.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
				req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), w, nil)
				clear(w.header)
				if h.h == nil {
					continue
				}
				if err := h.h.ServeHTTP(w, req, nil); err != nil {
					b.Fatal(err)
				}
				if w.header.Get("Content-Encoding") != "br" {
					b.Fatalf("%s sent Content-Encoding %q, want br", h.name, w.header.Get("Content-Encoding"))
				}
			}
		})
	}
}
