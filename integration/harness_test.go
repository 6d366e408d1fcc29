package integration

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
// harness.NewCert (or internalCAConfig) and run it with loadCaddy, or write a
// Caddyfile for loadCaddyfile (harness_caddyfile_test.go is an example),
// then waitListening. The clients are in harness_clients_test.go,
// fixtures and checked downloads in harness_files_test.go, the raw HTTP/2
// frame connection in harness_h2raw_test.go; descriptor, goroutine and
// memory figures, files written as deploys write them, and waiting
// (harness.Eventually, harness.WaitUntil: never sleep) are in package
// internal/harness.
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
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/h2file/caddy-h2file/internal/harness"
)

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
		harness.Eventually(t, 30*time.Second, func() error {
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
