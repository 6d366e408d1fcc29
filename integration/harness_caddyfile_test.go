package integration

// The harness itself: a site from a Caddyfile (also an example of a test
// with a config of its own), and a plain site's clients.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// TestHarnessCaddyfile serves a file with h2_file_server from a Caddyfile
// that loads the harness certificate, over HTTP/2 and HTTP/1.1.
func TestHarnessCaddyfile(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	harness.WriteTree(t, root, map[string]string{"hello.txt": "hello from a Caddyfile\n"})
	cert := harness.NewCert(t)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for name, b := range map[string][]byte{certFile: cert.CertPEM, keyFile: cert.KeyPEM} {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := harness.FreePort(t)
	caddysite.LoadCaddyfile(t, fmt.Sprintf(`{
	admin off
	persist_config off
	grace_period 1ns
	log {
		level ERROR
	}
}

https://localhost:%d {
	bind 127.0.0.1
	tls %s %s
	root * %s
	h2_file_server
}
`, port, certFile, keyFile, root))
	caddysite.WaitListening(t, cert.ClientTLS(), harness.Loopback(port))

	for proto, major := range map[string]int{"h2": 2, "h1": 1} {
		resp, err := harness.NewClient(t, proto, cert.ClientTLS()).Get(fmt.Sprintf("https://localhost:%d/hello.txt", port))
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || resp.ProtoMajor != major || string(body) != "hello from a Caddyfile\n" {
			t.Errorf("%s: %s %d %q %v; want HTTP/%d 200 with the file", proto, resp.Proto, resp.StatusCode, body, err, major)
		}
	}
}

// TestHarnessPlainSite checks the clients of a plain site with h2c:
// HTTP/1.1 and h2c, each speaking its protocol.
func TestHarnessPlainSite(t *testing.T) {
	root := t.TempDir()
	harness.WriteTree(t, root, map[string]string{"plain.txt": "over plain TCP\n"})
	srv := caddysite.Start(t, caddysite.Config{Handlers: []any{caddysite.H2FileServer(root, nil)}, Plain: true, Protocols: []string{"h1", "h2c"}})
	for name, tc := range map[string]struct {
		c     *http.Client
		major int
	}{"h1c": {srv.H1, 1}, "h2c": {srv.H2C, 2}} {
		resp, err := tc.c.Get(srv.URL + "/plain.txt")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || resp.ProtoMajor != tc.major || string(body) != "over plain TCP\n" {
			t.Errorf("%s: %s %d %q %v; want HTTP/%d 200 with the file", name, resp.Proto, resp.StatusCode, body, err, tc.major)
		}
	}
}
