// Package caddysite starts Caddy in the test's process, for tests that need a
// real server: modelled on Caddy's caddytest (NewTester, InitServer), but
// with free ports and a generated certificate, so tests need no fixed
// ports, no network and nothing in $HOME. Only tests import it.
//
// A Caddy-in-process test reads as its scenario:
//
//	func TestSomething(t *testing.T) {
//		root := t.TempDir()
//		harness.WriteFile(t, filepath.Join(root, "a.txt"), []byte("a"))
//		srv := caddysite.Start(t, caddysite.Config{Handlers: []any{caddysite.H2FileServer(root, nil)}})
//		resp, err := srv.H2.Get(srv.URL + "/a.txt") // HTTP/2 over TLS
//		...
//	}
//
// Config says what else the site has: TLS or not (Plain: HTTP/1.1 and
// h2c), Protocols (h3 gives srv.H3), listener Wrappers, more Server
// fields, more Apps, the admin endpoint (srv.API, srv.Reconfigure). For a
// config of your own, build it with harness.FreePorts and harness.NewCert
// (or InternalCAConfig) and run it with LoadCaddy, or write a Caddyfile for
// LoadCaddyfile, then WaitListening. The clients, site files and checked
// downloads, descriptor, goroutine and memory figures, files written as
// deploys write them, and waiting (harness.Eventually, harness.WaitUntil:
// never sleep) are in package harness; the raw HTTP/2 client in package
// h2client. The suites that use it are in integration/ (a new differential
// case is one line of testdata/diff/*.txt; the format is at the top of
// corpus.txt).
//
// Caddy is a process singleton: a test that starts it must not run in
// parallel with another that does.
package caddysite

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

// InternalCAConfig is a whole Caddy config with the admin endpoint off,
// storage under storage, logs at ERROR level to logOutput, the http app
// given, and Caddy's internal issuer making a certificate for localhost
// (trusted nowhere: clients use harness.InsecureTLS; see WaitListening).
func InternalCAConfig(storage, logOutput string, httpApp map[string]any) map[string]any {
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

// CaddyEnv points Caddy's data and config directories (certificates,
// autosave) at temporary directories for the rest of the test.
func CaddyEnv(t *testing.T) {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
}

// LoadCaddy runs cfg (JSON bytes, or a value to marshal) as Caddy's
// Config, with CaddyEnv, and stops Caddy and its admin endpoint when the
// test ends.
func LoadCaddy(t *testing.T, cfg any) {
	t.Helper()
	raw, ok := cfg.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(cfg); err != nil {
			t.Fatal(err)
		}
	}
	CaddyEnv(t)
	if err := caddy.Load(raw, true); err != nil {
		t.Fatalf("loading Caddy config: %v\n%s", err, raw)
	}
	t.Cleanup(func() { StopCaddy(t) })
}

// LoadCaddyfile adapts a Caddyfile and runs it, as LoadCaddy does.
func LoadCaddyfile(t *testing.T, caddyfile string) {
	t.Helper()
	raw, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatalf("adapting the Caddyfile: %v\n%s", err, caddyfile)
	}
	for _, w := range warnings {
		t.Logf("Caddyfile: %s", w)
	}
	LoadCaddy(t, raw)
}

// StopCaddy stops every app and the admin endpoint, which caddy.Stop
// alone leaves running. Stopping twice is harmless.
func StopCaddy(t *testing.T) {
	if err := caddy.Load([]byte(`{"admin": {"disabled": true, "config": {"persist": false}}}`), true); err != nil {
		t.Logf("unloading Caddy config: %v", err)
	}
	if err := caddy.Stop(); err != nil {
		t.Logf("stopping Caddy: %v", err)
	}
}

// WaitListening polls until every addr accepts a connection (a TLS
// handshake with tlsCfg, if not nil): certificates of Caddy's internal
// issuer are made in the background after Load returns.
func WaitListening(t testing.TB, tlsCfg *tls.Config, addrs ...string) {
	t.Helper()
	for _, addr := range addrs {
		harness.Eventually(t, 30*time.Second, func() error {
			if err := dialOnce(addr, tlsCfg); err != nil {
				return fmt.Errorf("server on %s not ready: %w", addr, err)
			}
			return nil
		})
	}
}

// dialOnce connects to addr once, with a TLS handshake if tlsCfg is not
// nil, and closes the connection.
func dialOnce(addr string, tlsCfg *tls.Config) error {
	dialer := &net.Dialer{Timeout: time.Second}
	var conn net.Conn
	var err error
	if tlsCfg != nil {
		conn, err = tls.DialWithDialer(dialer, "tcp", addr, tlsCfg.Clone())
	} else {
		conn, err = dialer.Dial("tcp", addr)
	}
	if err != nil {
		return err
	}
	return conn.Close()
}
