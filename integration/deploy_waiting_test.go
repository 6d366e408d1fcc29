package integration

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// TestErrorPageFreshAfterSlowUpstream: a request that waited before
// h2_file_server (reverse_proxy to an upstream that fails late, then
// handle_errors serving an error page) gets the page as it is when the
// handler begins, as file_server would, not as it was when the request
// was read: here another request read the page, and so the file system's
// events, after this one arrived, and the page was replaced before the
// upstream failed. Through Go's server and through the engine (whose
// lookups once took the time the engine read the HEADERS as their
// instant, and served the replaced page).
func TestErrorPageFreshAfterSlowUpstream(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "error.html")
	harness.WriteFile(t, page, []byte("old error page\n"))
	if !harness.FileEventsAvailable(dir) {
		t.Skip("no file system events here")
	}

	for _, server := range []struct {
		name     string
		wrappers []any
	}{{"Go's server", nil}, {"engine", engineWrappers()}} {
		t.Run(server.name, func(t *testing.T) {
			harness.WriteFile(t, page, []byte("old error page\n"))
			got, release := make(chan struct{}, 1), make(chan struct{})
			upstream := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				got <- struct{}{}
				<-release
				// no response: reverse_proxy fails with 502
				if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
					c.Close()
				}
			})
			fileServer := map[string]any{"handler": "h2_file_server", "root": dir}
			s := caddysite.Start(t, caddysite.Config{
				Routes: []any{
					map[string]any{
						"match":  []any{map[string]any{"path": []string{"/slow"}}},
						"handle": []any{map[string]any{"handler": "reverse_proxy", "upstreams": []any{map[string]any{"dial": upstream}}}},
					},
					map[string]any{"handle": []any{fileServer}},
				},
				Protocols: []string{"h1", "h2"},
				Wrappers:  server.wrappers,
				Server: map[string]any{"errors": map[string]any{"routes": []any{map[string]any{"handle": []any{
					map[string]any{"handler": "rewrite", "uri": "/error.html"}, fileServer,
				}}}}},
			})

			type result struct {
				status int
				body   string
				err    error
			}
			slow := harness.Async(func() result {
				resp, err := s.H2.Get(s.URL + "/slow")
				if err != nil {
					return result{err: err}
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				return result{resp.StatusCode, string(body), err}
			})
			// the request has arrived (its handler is waiting on the upstream)
			harness.Recv(t, got, "the slow request at the upstream")

			// another request reads the page after that: its lookup reads
			// the file system's events
			if body := getBody(t, s.H2, s.URL+"/error.html"); body != "old error page\n" {
				t.Fatalf("before the change: %q", body)
			}
			if err := harness.RenameOver(page, "new error page\n"); err != nil {
				t.Fatal(err)
			}
			close(release)
			r := harness.Recv(t, slow, "the slow request's error page")
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.status != http.StatusBadGateway || r.body != "new error page\n" {
				t.Errorf("the slow request's error page: %d %q; want 502 %q (the page replaced before its handler began)", r.status, r.body, "new error page\n")
			}
		})
	}
}

// startUpstream serves handler on a loopback port until the test ends
// and returns its address.
func startUpstream(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := &http.Server{Handler: handler}
	go upstream.Serve(ln)
	t.Cleanup(func() { upstream.Close() })
	return ln.Addr().String()
}

// getBody returns the body of a GET of url, failing the test on any error.
func getBody(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
