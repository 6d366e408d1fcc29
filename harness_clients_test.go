package h2file

// Ready HTTP clients for the harness (see harness_test.go).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// clientTLS is a client TLS config that trusts c, for server name
// localhost (which the certificate also has as 127.0.0.1).
func (c *testCert) clientTLS() *tls.Config {
	return &tls.Config{RootCAs: c.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

// insecureTLS is a client TLS config for servers whose certificate the
// test does not know (Caddy's internal issuer): server name localhost,
// no verification.
func insecureTLS() *tls.Config {
	return &tls.Config{ServerName: "localhost", InsecureSkipVerify: true} //nolint:gosec // test servers only
}

// noRedirect makes a client return redirects instead of following them.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// newClient returns an HTTP client speaking only proto: "h1" or "h2" over
// TLS, "h1c" or "h2c" in cleartext, "h3" over QUIC. tlsCfg nil means
// insecureTLS. It asks for no compression, follows no redirect, dials
// 127.0.0.1 for localhost (Caddy answers 421 when the Host differs from
// the TLS server name with client authentication on) and closes its
// connections when the test ends.
func newClient(t testing.TB, proto string, tlsCfg *tls.Config) *http.Client {
	if tlsCfg == nil {
		tlsCfg = insecureTLS()
	}
	tlsCfg = tlsCfg.Clone()
	if proto == "h3" {
		tr := &http3.Transport{TLSClientConfig: tlsCfg}
		t.Cleanup(func() { tr.Close() })
		return &http.Client{Transport: tr, CheckRedirect: noRedirect, Timeout: time.Minute}
	}
	tr := &http.Transport{TLSClientConfig: tlsCfg, Protocols: new(http.Protocols), DisableCompression: true, MaxIdleConnsPerHost: 4}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && host == "localhost" {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return new(net.Dialer).DialContext(ctx, network, addr)
	}
	switch proto {
	case "h1", "h1c":
		tr.Protocols.SetHTTP1(true)
		tlsCfg.NextProtos = []string{"http/1.1"}
	case "h2":
		tr.Protocols.SetHTTP2(true)
	case "h2c":
		tr.Protocols.SetUnencryptedHTTP2(true)
	default:
		t.Fatalf("newClient: unknown protocol %q", proto)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: noRedirect, Timeout: time.Minute}
}

// siteFile is a file of a test site, with what fetchFile checks.
type siteFile struct {
	path string // URL path
	size int64
	sum  [32]byte
}

// writeSiteFiles writes n files of random content under root, named
// /<prefix><i>.bin, with the given sizes.
func writeSiteFiles(t *testing.T, root, prefix string, n int, size func(i int) int) []siteFile {
	t.Helper()
	files := make([]siteFile, n)
	for i := range n {
		content := randomBytes(t, size(i))
		name := fmt.Sprintf("%s%d.bin", prefix, i)
		writeFile(t, filepath.Join(root, name), content)
		files[i] = siteFile{path: "/" + name, size: int64(len(content)), sum: sha256.Sum256(content)}
	}
	return files
}

// fetchFile GETs f from base and checks status, length and bytes.
func fetchFile(ctx context.Context, c *http.Client, base string, f siteFile) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+f.path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return fmt.Errorf("%s: reading body after %d bytes: %w", f.path, n, err)
	}
	if resp.StatusCode != http.StatusOK || n != f.size || !bytes.Equal(h.Sum(nil), f.sum[:]) {
		return fmt.Errorf("%s: status %d, %d bytes (want 200, %d bytes), content matches: %v",
			f.path, resp.StatusCode, n, f.size, bytes.Equal(h.Sum(nil), f.sum[:]))
	}
	return nil
}
