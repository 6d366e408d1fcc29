package integration

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// TestParityOddStatusServed serves a file with each status_code that
// file_server accepts but that is not a status, through file_server and
// h2_file_server: both must answer alike (500 for a non-number, a failed
// request for a number without three digits, the file for one that is not
// positive).
func TestParityOddStatusServed(t *testing.T) {
	root := t.TempDir()
	harness.WriteFileNow(t, filepath.Join(root, "hello.txt"), "Hello, world!\n")
	statuses := []string{"abc", "99", "1000", "-1", "0", "150", "299"}
	var routes []any
	for _, status := range statuses {
		for _, handler := range []string{"file_server", "h2_file_server"} {
			routes = append(routes, map[string]any{
				"match": []any{map[string]any{"header": map[string][]string{
					"X-Handler": {handler}, "X-Status": {status},
				}}},
				"handle":   []any{map[string]any{"handler": handler, "root": root, "status_code": status}},
				"terminal": true,
			})
		}
	}
	srv := caddysite.StartPlainCaddy(t, map[string]any{"handler": "subroute", "routes": routes})
	framingWaitReady(t, srv)
	for _, status := range statuses {
		var answers [2]string
		for i, handler := range []string{"file_server", "h2_file_server"} {
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/hello.txt", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Handler", handler)
			req.Header.Set("X-Status", status)
			resp, err := srv.H1.Do(req)
			if err != nil {
				answers[i] = "request failed"
				continue
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers[i] = fmt.Sprintf("%d %q %v", resp.StatusCode, body, err)
		}
		t.Logf("status_code %s: %s", status, answers[0])
		if answers[0] != answers[1] {
			t.Errorf("status_code %s: file_server: %s; h2_file_server: %s", status, answers[0], answers[1])
		}
	}
}
