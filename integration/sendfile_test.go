package integration

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
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
	srv := caddysite.StartPlainCaddy(t,
		map[string]any{"handler": "subroute", "routes": []any{
			map[string]any{
				"match":  []any{map[string]any{"path": []string{"/teapot/*"}}},
				"handle": []any{map[string]any{"handler": "rewrite", "strip_path_prefix": "/teapot"}, caddysite.H2FileServer(root, map[string]any{"status_code": "418"})},
			},
			map[string]any{"handle": []any{caddysite.H2FileServer(root, nil)}},
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
