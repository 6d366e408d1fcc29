package h2file

// The test harness: everything that starts Caddy in this package's tests.
// Modelled on Caddy's caddytest (NewTester, InitServer), but in-process
// with free ports and a generated certificate, so tests need no fixed
// ports, no network and nothing in $HOME.
//
// A new Caddy-in-process test reads as its scenario:
//
//	func TestSomething(t *testing.T) {
//		root := t.TempDir()
//		harness.WriteFile(t, filepath.Join(root, "a.txt"), []byte("a"))
//		srv := startSite(t, siteConfig{handlers: []any{h2FileServer(root, nil)}})
//		resp, err := srv.H2.Get(srv.URL + "/a.txt") // HTTP/2 over TLS
//		...
//	}
//
// siteConfig (harness_site_test.go) says what else the site has: TLS or
// not (plain: HTTP/1.1 and h2c), protocols (h3 gives srv.H3), listener
// wrappers, more server fields, the admin endpoint (srv.api,
// srv.reconfigure). For a config of your own, build it with freePorts and
// newTestCert (or internalCAConfig) and run it with loadCaddy, or write a
// Caddyfile for loadCaddyfile (harness_caddyfile_test.go is an example),
// then waitListening. The clients are in harness_clients_test.go,
// fixtures and checked downloads in harness_files_test.go, the raw HTTP/2
// frame connection in harness_h2raw_test.go, descriptor, goroutine and
// memory figures in harness_process_test.go; poll with eventually or
// waitUntil, never sleep.
//
// A new differential case (h2_file_server against file_server) is one
// line of testdata/diff/*.txt (the format is at the top of corpus.txt); a
// new differential configuration is one entry of diffConfigs
// (diff_configs_test.go), a new fixture file one entry of diffFixture
// (difffixture_test.go).
//
// Caddy is a process singleton: a test that starts it must not run in
// parallel with another that does.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// testCert is a self-signed certificate for localhost and 127.0.0.1, for
// server and client authentication, with the CA bit set, so that it can
// also sign client certificates.
type testCert struct {
	CertPEM, KeyPEM []byte
	TLS             tls.Certificate // with Leaf
	Pool            *x509.CertPool  // trusts the certificate
	key             crypto.Signer
}

// newTestCert makes a testCert with an ECDSA P-256 key.
func newTestCert(t testing.TB) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return makeTestCert(t, key)
}

// newRSATestCert makes a testCert with a 2048-bit RSA key.
func newRSATestCert(t testing.TB) *testCert {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return makeTestCert(t, key)
}

func makeTestCert(t testing.TB, key crypto.Signer) *testCert {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &testCert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Pool:    pool,
		key:     key,
	}
}

// clientCert issues a client-authentication certificate named cn, signed
// by c.
func (c *testCert) clientCert(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.TLS.Leaf, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// loadPEM is the tls app's config that loads c.
func (c *testCert) loadPEM() map[string]any {
	return map[string]any{"certificates": map[string]any{
		"load_pem": []any{map[string]any{"certificate": string(c.CertPEM), "key": string(c.KeyPEM)}},
	}}
}

// internalCAConfig is a whole Caddy config with the admin endpoint off,
// storage under storage, logs at ERROR level to logOutput, the http app
// given, and Caddy's internal issuer making a certificate for localhost
// (trusted nowhere: clients use insecureTLS; see waitListening).
func internalCAConfig(storage, logOutput string, httpApp map[string]any) map[string]any {
	return map[string]any{
		"admin":   map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"storage": map[string]any{"module": "file_system", "root": storage},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{
			"level":  "ERROR",
			"writer": map[string]any{"output": logOutput},
		}}},
		"apps": map[string]any{
			"http": httpApp,
			"tls": map[string]any{
				"certificates": map[string]any{"automate": []string{"localhost"}},
				"automation": map[string]any{"policies": []any{map[string]any{
					"subjects": []string{"localhost"},
					"issuers":  []any{map[string]any{"module": "internal"}},
				}}},
			},
			"pki": map[string]any{"certificate_authorities": map[string]any{
				"local": map[string]any{"install_trust": false},
			}},
		},
	}
}

// freePorts returns n distinct free TCP ports on 127.0.0.1 (all held open
// until all are found, so none is returned twice).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// freePort returns a free TCP port on 127.0.0.1.
func freePort(t testing.TB) int {
	t.Helper()
	return freePorts(t, 1)[0]
}

// loopback is 127.0.0.1:port.
func loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// caddyEnv points Caddy's data and config directories (certificates,
// autosave) at temporary directories for the rest of the test.
func caddyEnv(t *testing.T) {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
}

// loadCaddy runs cfg (JSON bytes, or a value to marshal) as Caddy's
// config, with caddyEnv, and stops Caddy and its admin endpoint when the
// test ends.
func loadCaddy(t *testing.T, cfg any) {
	t.Helper()
	raw, ok := cfg.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(cfg); err != nil {
			t.Fatal(err)
		}
	}
	caddyEnv(t)
	if err := caddy.Load(raw, true); err != nil {
		t.Fatalf("loading Caddy config: %v\n%s", err, raw)
	}
	t.Cleanup(func() { stopCaddy(t) })
}

// loadCaddyfile adapts a Caddyfile and runs it, as loadCaddy does.
func loadCaddyfile(t *testing.T, caddyfile string) {
	t.Helper()
	raw, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatalf("adapting the Caddyfile: %v\n%s", err, caddyfile)
	}
	for _, w := range warnings {
		t.Logf("Caddyfile: %s", w)
	}
	loadCaddy(t, raw)
}

// stopCaddy stops every app and the admin endpoint, which caddy.Stop
// alone leaves running. Stopping twice is harmless.
func stopCaddy(t *testing.T) {
	if err := caddy.Load([]byte(`{"admin": {"disabled": true, "config": {"persist": false}}}`), true); err != nil {
		t.Logf("unloading Caddy config: %v", err)
	}
	if err := caddy.Stop(); err != nil {
		t.Logf("stopping Caddy: %v", err)
	}
}

// waitListening polls until every addr accepts a connection (a TLS
// handshake with tlsCfg, if not nil): certificates of Caddy's internal
// issuer are made in the background after Load returns.
func waitListening(t testing.TB, tlsCfg *tls.Config, addrs ...string) {
	t.Helper()
	for _, addr := range addrs {
		eventually(t, 30*time.Second, func() error {
			dialer := &net.Dialer{Timeout: time.Second}
			var conn net.Conn
			var err error
			if tlsCfg != nil {
				conn, err = tls.DialWithDialer(dialer, "tcp", addr, tlsCfg.Clone())
			} else {
				conn, err = dialer.Dial("tcp", addr)
			}
			if err != nil {
				return fmt.Errorf("server on %s not ready: %w", addr, err)
			}
			return conn.Close()
		})
	}
}

// poll calls cond until it returns nil or within has passed, and returns
// its last error. It waits 1 ms after the first try, doubling up to 50 ms.
func poll(within time.Duration, cond func() error) error {
	deadline := time.Now().Add(within)
	wait := time.Millisecond
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// eventually fails the test unless cond returns nil within the time
// given; the message is cond's last error.
func eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	if err := poll(within, cond); err != nil {
		t.Fatalf("after %v: %v", within, err)
	}
}

// waitUntil fails the test unless cond holds within 10 s; what says what
// was awaited.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		if !cond() {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		return nil
	})
}
