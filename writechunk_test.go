package h2file

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/send"
)

// TestSendfileOnPlainHTTP1 serves files over HTTP/1.1 on plain TCP through
// Caddy and checks that the body reached the kernel's sendfile, through
// Caddy's idle-timeout writer, whole and ranged, with exact bytes.
func TestSendfileOnPlainHTTP1(t *testing.T) {
	root := t.TempDir()
	content := harness.RandomBytes(t, 3<<20+12345) // not a multiple of any chunk
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
			before := send.ReadStats().SendfileHandoffs
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
			if send.ReadStats().SendfileHandoffs == before {
				t.Fatal("the body did not go through sendfile")
			}
		})
	}

	before := send.ReadStats().SendfileHandoffs
	resp, err := srv.H1.Get(srv.URL + "/small.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "small file, from memory" || send.ReadStats().SendfileHandoffs != before {
		t.Fatalf("small file: %q; a file held in memory must be written from memory", got)
	}
}

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

	for _, bad := range []int64{-1, send.MaxWriteChunk + 1} {
		h := &Handler{WriteChunk: bad}
		if err := cfgProvision(t, h); err == nil || !strings.Contains(err.Error(), "write_chunk") {
			t.Errorf("write_chunk %d: Provision error %v", bad, err)
		}
	}
	h := &Handler{Root: t.TempDir()}
	if err := cfgProvision(t, h); err != nil || h.WriteChunk != send.DefaultChunkSize {
		t.Fatalf("default write_chunk %d, error %v", h.WriteChunk, err)
	}

	// the writes of a body follow the setting
	content := harness.RandomBytes(t, 200_000)
	rec := harness.NewWriteSizeRecorder()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	body := send.NewBody(content, nil, int64(len(content)))
	http.ServeContent(send.NewWriter(rec, req, 64<<10), req, "f", time.Time{}, &body)
	if want := []int{65536, 65536, 65536, 3392}; !slices.Equal(rec.Sizes, want) || !bytes.Equal(rec.Body.Bytes(), content) {
		t.Fatalf("write sizes %v, want %v", rec.Sizes, want)
	}
}
