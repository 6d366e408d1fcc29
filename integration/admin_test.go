package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// admStart starts Caddy with h2_file_server serving root (and hiding
// *.bak), over TLS and HTTP/2 or, plain, over HTTP/1.1.
func admStart(t *testing.T, root string, useTLS bool) *caddysite.Server {
	t.Helper()
	s := caddysite.Start(t, caddysite.Config{
		Handlers:  []any{admHandler(root)},
		Plain:     !useTLS,
		Protocols: []string{"h1", "h2"},
	})
	// each request on a new connection, so that none lingers on the
	// server of a replaced config
	for _, c := range []*http.Client{s.H1, s.H2} {
		if c != nil {
			c.Transport.(*http.Transport).DisableKeepAlives = true
		}
	}
	return s
}

// admHandler is the site's handler, serving root.
func admHandler(root string) map[string]any {
	return caddysite.H2FileServer(root, map[string]any{"hide": []string{"*.bak"}})
}

// admAwait polls path until it answers with status and body (body "" for
// any) over the site's protocol, for up to 5 seconds.
func admAwait(t *testing.T, s *caddysite.Server, path string, status int, body string) {
	t.Helper()
	client, major := s.H1, 1
	if s.H2 != nil {
		client, major = s.H2, 2
	}
	harness.Eventually(t, 5*time.Second, func() error {
		resp, err := client.Get(s.URL + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		switch {
		case err != nil:
			return err
		case resp.ProtoMajor != major:
			return fmt.Errorf("GET %s: served over %s, want HTTP/%d", path, resp.Proto, major)
		case resp.StatusCode != status || body != "" && string(b) != body:
			return fmt.Errorf("GET %s: got %d %q, want %d %q", path, resp.StatusCode, b, status, body)
		}
		return nil
	})
}

const admHandlerPath = "/config/apps/http/servers/test/routes/0/handle/0"

func TestAdminReconfigure(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{
		{"http", false},
		{"https h2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rootA, rootB := t.TempDir(), t.TempDir()
			harness.WriteTree(t, rootA, map[string]string{"a.txt": "A in root A\n", "b.txt": "B in root A\n"})
			harness.WriteTree(t, rootB, map[string]string{"a.txt": "A in root B\n", "b.txt": "B in root B\n"})

			s := admStart(t, rootA, tc.tls)
			admAwait(t, s, "/a.txt", http.StatusOK, "A in root A\n")
			admAwait(t, s, "/nope.txt", http.StatusNotFound, "")

			// (1) a new config with another root
			s.MustAPI(http.MethodPost, "/load", s.ConfigJSON(admHandler(rootB)))
			admAwait(t, s, "/a.txt", http.StatusOK, "A in root B\n")
			var h map[string]any
			if err := json.Unmarshal([]byte(s.MustAPI(http.MethodGet, admHandlerPath, nil)), &h); err != nil {
				t.Fatal(err)
			}
			if h["handler"] != "h2_file_server" || h["root"] != rootB {
				t.Fatalf("admin API reports the handler as %v", h)
			}

			// (2) hide a file
			s.MustAPI(http.MethodPatch, admHandlerPath+"/hide", []byte(`["*.bak", "a.txt"]`))
			admAwait(t, s, "/a.txt", http.StatusNotFound, "")
			admAwait(t, s, "/b.txt", http.StatusOK, "B in root B\n")
			if got := s.MustAPI(http.MethodGet, admHandlerPath+"/hide", nil); strings.Join(strings.Fields(got), "") != `["*.bak","a.txt"]` {
				t.Errorf("admin API reports hide as %s", got)
			}

			// (3) set, then change, the status code
			s.MustAPI(http.MethodPut, admHandlerPath+"/status_code", []byte(`202`))
			admAwait(t, s, "/b.txt", http.StatusAccepted, "B in root B\n")
			s.MustAPI(http.MethodPatch, admHandlerPath+"/status_code", []byte(`203`))
			admAwait(t, s, "/b.txt", http.StatusNonAuthoritativeInfo, "B in root B\n")

			// (4) a bad config is refused, and the running one stays
			code, resp, err := s.API(http.MethodPut, admHandlerPath+"/precompressed", []byte(`{"bogus": {}}`))
			if err != nil || code == http.StatusOK || !strings.Contains(resp, "bogus") {
				t.Errorf("PUT of an unknown precompressed module: status %d: %s (%v)", code, resp, err)
			}
			admAwait(t, s, "/b.txt", http.StatusNonAuthoritativeInfo, "B in root B\n")
			admAwait(t, s, "/a.txt", http.StatusNotFound, "")
		})
	}
}
