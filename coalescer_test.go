package h2file

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// writeSizeRecorder records the size of every Write.
type writeSizeRecorder struct {
	*httptest.ResponseRecorder
	sizes []int
}

func (w *writeSizeRecorder) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.ResponseRecorder.Write(p)
}

func newTestBodyWriter() (*bodyWriter, *writeSizeRecorder) {
	rec := &writeSizeRecorder{ResponseRecorder: httptest.NewRecorder()}
	return &bodyWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: rec}, chunkSize: defaultChunkSize}, rec
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBodyWriterChunksServeContent checks that http.ServeContent's copy
// reaches bodyWriter.ReadFrom and leaves as one-TLS-record-sized writes,
// from memory and from a file, for whole bodies and ranges.
func TestBodyWriterChunksServeContent(t *testing.T) {
	content := randomBytes(t, 100_000)
	name := harness.WriteFile(t, filepath.Join(t.TempDir(), "f.bin"), content)
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	for _, src := range []struct {
		desc string
		body func() *fileBody
	}{
		{"memory", func() *fileBody { return &fileBody{data: content, size: int64(len(content))} }},
		{"file", func() *fileBody { return &fileBody{file: f, size: int64(len(content))} }},
	} {
		for _, rng := range []struct {
			header     string
			start, end int
		}{{"", 0, len(content)}, {"bytes=1000-60000", 1000, 60001}, {"bytes=-10", len(content) - 10, len(content)}} {
			t.Run(fmt.Sprintf("%s %q", src.desc, rng.header), func(t *testing.T) {
				bw, rec := newTestBodyWriter()
				req := httptest.NewRequest(http.MethodGet, "/f.bin", nil)
				if rng.header != "" {
					req.Header.Set("Range", rng.header)
				}
				http.ServeContent(bw, req, "f.bin", time.Time{}, src.body())
				want := content[rng.start:rng.end]
				if !bytes.Equal(rec.Body.Bytes(), want) {
					t.Fatalf("body differs: got %d bytes, want %d", rec.Body.Len(), len(want))
				}
				for i, size := range rec.sizes {
					last := i == len(rec.sizes)-1
					if size > defaultChunkSize || (!last && size != defaultChunkSize) {
						t.Fatalf("write sizes %v: want chunks of %d and a shorter last one", rec.sizes, defaultChunkSize)
					}
				}
				if wantWrites := (len(want) + defaultChunkSize - 1) / defaultChunkSize; len(rec.sizes) != wantWrites {
					t.Fatalf("%d writes, want %d", len(rec.sizes), wantWrites)
				}
			})
		}
	}
}

// TestBodyWriterPassesOtherReaders checks that readers that are not file
// bodies are copied unchanged through the wrapped writer.
func TestBodyWriterPassesOtherReaders(t *testing.T) {
	bw, rec := newTestBodyWriter()
	n, err := bw.ReadFrom(bytes.NewReader([]byte("plain reader")))
	if err != nil || n != 12 || rec.Body.String() != "plain reader" {
		t.Fatalf("ReadFrom = %d, %v, body %q", n, err, rec.Body.String())
	}
}

// TestBodyWriterReportsTruncation checks that a file shorter than its
// announced size is reported, not passed off as a complete body.
func TestBodyWriterReportsTruncation(t *testing.T) {
	name := harness.WriteFile(t, filepath.Join(t.TempDir(), "short"), randomBytes(t, 50_000))
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	body := &fileBody{file: f, size: 80_000}
	bw, rec := newTestBodyWriter()
	n, err := bw.ReadFrom(&io.LimitedReader{R: body, N: 80_000})
	if err == nil || !body.truncated || n != 50_000 || rec.Body.Len() != 50_000 {
		t.Fatalf("ReadFrom = %d, %v, truncated %v; want 50000 bytes and a truncation error", n, err, body.truncated)
	}
}

// TestSendfileOnPlainHTTP1 serves files over HTTP/1.1 on plain TCP through
// Caddy and checks that the body reached the kernel's sendfile, through
// Caddy's idle-timeout writer, whole and ranged, with exact bytes.
func TestSendfileOnPlainHTTP1(t *testing.T) {
	root := t.TempDir()
	content := randomBytes(t, 3<<20+12345) // not a multiple of any chunk
	harness.WriteFile(t, filepath.Join(root, "big.bin"), content)
	harness.WriteFile(t, filepath.Join(root, "small.txt"), []byte("small file, from memory"))
	srv := startPlainCaddy(t,
		map[string]any{"handler": "subroute", "routes": []any{
			map[string]any{
				"match":  []any{map[string]any{"path": []string{"/teapot/*"}}},
				"handle": []any{map[string]any{"handler": "rewrite", "strip_path_prefix": "/teapot"}, h2FileServer(root, map[string]any{"status_code": "418"})},
			},
			map[string]any{"handle": []any{h2FileServer(root, nil)}},
		}})

	for _, tc := range []struct {
		path, rng  string
		status     int
		start, end int
	}{
		{"/big.bin", "", 200, 0, len(content)},
		{"/big.bin", "bytes=100-2000000", 206, 100, 2000001},
		{"/big.bin", "bytes=-70000", 206, len(content) - 70000, len(content)},
		{"/teapot/big.bin", "", 418, 0, len(content)},
	} {
		t.Run(tc.path+" "+tc.rng, func(t *testing.T) {
			before := sendfileHandoffs.Load()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			resp, err := srv.H1.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tc.status || resp.ProtoMajor != 1 {
				t.Fatalf("status %d proto %d err %v", resp.StatusCode, resp.ProtoMajor, err)
			}
			if !bytes.Equal(got, content[tc.start:tc.end]) {
				t.Fatalf("body differs: %d bytes, want %d", len(got), tc.end-tc.start)
			}
			if sendfileHandoffs.Load() == before {
				t.Fatal("the body did not go through sendfile")
			}
		})
	}

	before := sendfileHandoffs.Load()
	resp, err := srv.H1.Get(srv.URL + "/small.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "small file, from memory" || sendfileHandoffs.Load() != before {
		t.Fatalf("small file: %q; a file held in memory must be written from memory", got)
	}
}

// BenchmarkBodyWriter measures sending a body through bodyWriter from
// memory and from a file; the steady state should not allocate.
func BenchmarkBodyWriter(b *testing.B) {
	for _, size := range []int{10_000, 100_000, 1 << 20} {
		content := randomBytes(b, size)
		name := filepath.Join(b.TempDir(), "f")
		if err := os.WriteFile(name, content, 0o644); err != nil {
			b.Fatal(err)
		}
		f, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		for _, src := range []struct {
			desc string
			body fileBody
		}{{"memory", fileBody{data: content, size: int64(size)}}, {"file", fileBody{file: f, size: int64(size)}}} {
			b.Run(fmt.Sprintf("%s/%d", src.desc, size), func(b *testing.B) {
				bw := &bodyWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: discardWriter{}}, chunkSize: defaultChunkSize}
				lr := &io.LimitedReader{}
				body := src.body
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					body.off = 0
					lr.R, lr.N = &body, int64(size)
					if _, err := bw.ReadFrom(lr); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// discardWriter is a ResponseWriter that drops everything.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// TestWriteChunkConfig checks the write_chunk option: parsed with units,
// bad values refused at load time, and used for the body writes.
func TestWriteChunkConfig(t *testing.T) {
	for _, tc := range []struct {
		input   string
		want    int64
		wantErr string
	}{
		{"h2_file_server {\n\twrite_chunk 64KiB\n}", 64 << 10, ""},
		{"h2_file_server {\n\twrite_chunk 16375\n}", 16375, ""},
		{"h2_file_server {\n\twrite_chunk\n}", 0, "wrong argument count"},
		{"h2_file_server {\n\twrite_chunk 1 2\n}", 0, "wrong argument count"},
		{"h2_file_server {\n\twrite_chunk 0\n}", 0, "bad write_chunk '0'"},
		{"h2_file_server {\n\twrite_chunk 1GiB\n}", 0, "bad write_chunk '1GiB'"},
		{"h2_file_server {\n\twrite_chunk 1KiB\n\twrite_chunk 2KiB\n}", 0, "write_chunk already specified"},
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.input, err, tc.wantErr)
			}
			continue
		}
		if err != nil || h.WriteChunk != tc.want {
			t.Errorf("%q: write_chunk %d, error %v; want %d", tc.input, h.WriteChunk, err, tc.want)
		}
	}

	for _, bad := range []int64{-1, maxWriteChunk + 1} {
		h := &Handler{WriteChunk: bad}
		if err := cfgProvision(t, h); err == nil || !strings.Contains(err.Error(), "write_chunk") {
			t.Errorf("write_chunk %d: Provision error %v", bad, err)
		}
	}
	h := &Handler{Root: t.TempDir()}
	if err := cfgProvision(t, h); err != nil || h.WriteChunk != defaultChunkSize {
		t.Fatalf("default write_chunk %d, error %v", h.WriteChunk, err)
	}

	// the writes of a body follow the setting
	content := randomBytes(t, 200_000)
	rec := &writeSizeRecorder{ResponseRecorder: httptest.NewRecorder()}
	bw := &bodyWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: rec}, chunkSize: 64 << 10}
	http.ServeContent(bw, httptest.NewRequest(http.MethodGet, "/", nil), "f", time.Time{}, &fileBody{data: content, size: int64(len(content))})
	if want := []int{65536, 65536, 65536, 3392}; !slices.Equal(rec.sizes, want) || !bytes.Equal(rec.Body.Bytes(), content) {
		t.Fatalf("write sizes %v, want %v", rec.sizes, want)
	}
}
