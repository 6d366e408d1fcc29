package h2file

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// testServer is an in-process Caddy serving one site over TLS on a free
// loopback port, with clients for HTTP/2 and HTTP/1.1.
type testServer struct {
	URL   string       // https://127.0.0.1:port
	H2    *http.Client // HTTP/2 over TLS
	H1    *http.Client // HTTP/1.1 over TLS
	Admin string       // http://127.0.0.1:port of the admin API
}

// startTestCaddy loads a config whose single server runs the given route
// handlers, with a self-signed certificate for 127.0.0.1 and the admin API
// on a free port. Caddy is stopped when the test ends. Caddy is a process
// singleton: tests that use this must not run in parallel.
func startTestCaddy(t *testing.T, handlers ...any) *testServer {
	t.Helper()
	return startCaddy(t, true, handlers)
}

// startPlainCaddy is startTestCaddy without TLS: HTTP/1.1 and h2c over
// plain TCP. Only H1 (plain HTTP/1.1) is set in the result.
func startPlainCaddy(t *testing.T, handlers ...any) *testServer {
	t.Helper()
	return startCaddy(t, false, handlers)
}

func startCaddy(t *testing.T, useTLS bool, handlers []any) *testServer {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	certPEM, keyPEM := selfSignedCert(t)
	port, adminPort := freePort(t), freePort(t)
	cfg := map[string]any{
		"admin":   map[string]any{"listen": fmt.Sprintf("127.0.0.1:%d", adminPort), "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps": map[string]any{
			"http": map[string]any{
				"grace_period": 1,
				"servers": map[string]any{
					"test": map[string]any{
						"listen":                  []string{fmt.Sprintf("127.0.0.1:%d", port)},
						"routes":                  []any{map[string]any{"handle": handlers}},
						"tls_connection_policies": []any{map[string]any{}},
						"automatic_https":         map[string]any{"disable": true},
					},
				},
			},
			"tls": map[string]any{
				"certificates": map[string]any{
					"load_pem": []any{map[string]any{"certificate": string(certPEM), "key": string(keyPEM)}},
				},
			},
		},
	}
	if !useTLS {
		apps := cfg["apps"].(map[string]any)
		delete(apps, "tls")
		delete(apps["http"].(map[string]any)["servers"].(map[string]any)["test"].(map[string]any), "tls_connection_policies")
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(raw, true); err != nil {
		t.Fatalf("loading Caddy config: %v", err)
	}
	t.Cleanup(func() { stopTestCaddy(t) })
	tlsConfig := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // test certificate
	h2 := &http.Transport{TLSClientConfig: tlsConfig.Clone(), ForceAttemptHTTP2: true, DisableCompression: true}
	h1 := &http.Transport{
		TLSClientConfig:    tlsConfig.Clone(),
		TLSNextProto:       map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableCompression: true,
	}
	t.Cleanup(h2.CloseIdleConnections)
	t.Cleanup(h1.CloseIdleConnections)
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if !useTLS {
		return &testServer{
			URL:   fmt.Sprintf("http://127.0.0.1:%d", port),
			H1:    &http.Client{Transport: &http.Transport{DisableCompression: true}, CheckRedirect: noRedirect, Timeout: time.Minute},
			Admin: fmt.Sprintf("http://127.0.0.1:%d", adminPort),
		}
	}
	return &testServer{
		URL:   fmt.Sprintf("https://127.0.0.1:%d", port),
		H2:    &http.Client{Transport: h2, CheckRedirect: noRedirect, Timeout: time.Minute},
		H1:    &http.Client{Transport: h1, CheckRedirect: noRedirect, Timeout: time.Minute},
		Admin: fmt.Sprintf("http://127.0.0.1:%d", adminPort),
	}
}

// stopTestCaddy stops every app and the admin endpoint, which caddy.Stop
// alone leaves running.
func stopTestCaddy(t *testing.T) {
	if err := caddy.Load([]byte(`{"admin": {"disabled": true, "config": {"persist": false}}}`), true); err != nil {
		t.Logf("unloading Caddy config: %v", err)
	}
	if err := caddy.Stop(); err != nil {
		t.Logf("stopping Caddy: %v", err)
	}
}

// h2FileServer is an h2_file_server handler config for root, with extra
// fields merged in.
func h2FileServer(root string, extra map[string]any) map[string]any {
	h := map[string]any{"handler": "h2_file_server", "root": root}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// selfSignedCert makes a certificate for 127.0.0.1 and its key, in PEM.
func selfSignedCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(entries)
}

// fdsOpenOn counts this process's descriptors open on files under dir.
func fdsOpenOn(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list descriptors: %v", err)
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && len(target) > len(dir) && target[:len(dir)+1] == dir+"/" {
			n++
		}
	}
	return n
}

// hogDescriptors opens /dev/null until the process is out of descriptors
// and returns the files, for the caller to close.
func hogDescriptors(t *testing.T) []*os.File {
	t.Helper()
	var hog []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !isTooManyFiles(err) {
				t.Fatal(err)
			}
			return hog
		}
		hog = append(hog, f)
	}
}
