package h2file

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/send"
)

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
