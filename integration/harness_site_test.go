package integration

// One in-process Caddy site: startSite (see harness_test.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// siteConfig is what startSite runs: one server named "test" on a free
// loopback port, with the harness certificate unless plain.
type siteConfig struct {
	handlers  []any          // the handlers of the server's one route
	routes    []any          // the server's routes, instead of handlers
	plain     bool           // no TLS: HTTP/1.1 (and h2c if protocols has it) on plain TCP
	protocols []string       // the server's protocols; nil: Caddy's default (h1 h2 h3)
	wrappers  []any          // listener_wrappers; nil: Caddy's default
	server    map[string]any // more fields of the server
	noAdmin   bool           // no admin endpoint
	apps      map[string]any // more apps, by name
}

// testServer is a running site with ready clients. Every client verifies
// the harness certificate and follows no redirect.
type testServer struct {
	URL   string        // https://127.0.0.1:port (http:// if plain)
	Addr  string        // 127.0.0.1:port
	H1    *http.Client  // HTTP/1.1 (over TLS unless plain)
	H2    *http.Client  // HTTP/2 over TLS; nil if plain
	H2C   *http.Client  // HTTP/2 without TLS; nil unless plain with h2c
	H3    *http.Client  // HTTP/3; nil unless protocols has "h3"
	Admin string        // http://127.0.0.1:port of the admin API; "" if off
	Cert  *harness.Cert // nil if plain

	t          *testing.T
	site       siteConfig
	adminAddr  string
	adminHTTP  *http.Client // keeps no connection open (it would count as a leak)
	clientList []*http.Client
}

// startSite starts Caddy with sc and stops it when the test ends.
func startSite(t *testing.T, sc siteConfig) *testServer {
	t.Helper()
	ports := harness.FreePorts(t, 2)
	s := &testServer{t: t, site: sc, Addr: harness.Loopback(ports[0])}
	if !sc.noAdmin {
		s.adminAddr = harness.Loopback(ports[1])
		s.Admin = "http://" + s.adminAddr
		s.adminHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	}
	if !sc.plain {
		s.Cert = harness.NewCert(t)
	}
	loadCaddy(t, s.configJSON())
	if sc.plain {
		s.URL = "http://" + s.Addr
		s.H1 = s.client(t, "h1c")
		if slices.Contains(sc.protocols, "h2c") {
			s.H2C = s.client(t, "h2c")
		}
		return s
	}
	s.URL = "https://" + s.Addr
	s.H1, s.H2 = s.client(t, "h1"), s.client(t, "h2")
	if slices.Contains(sc.protocols, "h3") {
		s.H3 = s.client(t, "h3")
	}
	return s
}

// client is a client for proto (see newClient) that trusts the site's
// certificate; it is among those closeClients closes.
func (s *testServer) client(t *testing.T, proto string) *http.Client {
	var c *http.Client
	if s.Cert != nil {
		c = newClient(t, proto, s.Cert.ClientTLS())
	} else {
		c = newClient(t, proto, nil)
	}
	s.clientList = append(s.clientList, c)
	return c
}

// config is the whole Caddy config of the site, with handlers in place of
// the route's (none given: as started).
func (s *testServer) config(handlers ...any) map[string]any {
	routes := s.site.routes
	switch {
	case len(handlers) > 0:
		routes = []any{map[string]any{"handle": handlers}}
	case routes == nil:
		routes = []any{map[string]any{"handle": s.site.handlers}}
	}
	server := map[string]any{
		"listen":          []string{s.Addr},
		"routes":          routes,
		"automatic_https": map[string]any{"disable": true},
	}
	if s.site.protocols != nil {
		server["protocols"] = s.site.protocols
	}
	if s.site.wrappers != nil {
		server["listener_wrappers"] = s.site.wrappers
	}
	maps.Copy(server, s.site.server)
	apps := map[string]any{"http": map[string]any{
		"grace_period": 1,
		"servers":      map[string]any{"test": server},
	}}
	maps.Copy(apps, s.site.apps)
	if s.Cert != nil {
		server["tls_connection_policies"] = []any{map[string]any{}}
		apps["tls"] = s.Cert.LoadPEM()
	}
	admin := map[string]any{"disabled": true, "config": map[string]any{"persist": false}}
	if s.adminAddr != "" {
		admin = map[string]any{"listen": s.adminAddr, "config": map[string]any{"persist": false}}
	}
	return map[string]any{
		"admin":   admin,
		"storage": map[string]any{"module": "file_system", "root": s.t.TempDir()},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps":    apps,
	}
}

// configJSON is config, marshalled.
func (s *testServer) configJSON(handlers ...any) []byte {
	raw, err := json.Marshal(s.config(handlers...))
	if err != nil {
		s.t.Fatal(err)
	}
	return raw
}

// closeClients closes the idle connections of the site's clients.
func (s *testServer) closeClients() {
	for _, c := range s.clientList {
		c.CloseIdleConnections()
	}
}

// api sends a request to the admin API and returns its status and body.
func (s *testServer) api(method, path string, body []byte) (int, string, error) {
	req, err := http.NewRequest(method, s.Admin+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.adminHTTP.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// mustAPI is api that fails the test unless the status is 200.
func (s *testServer) mustAPI(method, path string, body []byte) string {
	s.t.Helper()
	code, resp, err := s.api(method, path, body)
	if err != nil || code != http.StatusOK {
		s.t.Fatalf("%s %s %s: status %d: %s (%v)", method, path, body, code, resp, err)
	}
	return resp
}

// runningConfig returns the running config, from the admin API.
func (s *testServer) runningConfig() (map[string]any, error) {
	code, body, err := s.api(http.MethodGet, "/config/", nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /config/: %d %s", code, body)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(body), &cfg); err != nil {
		return nil, fmt.Errorf("decoding config: %w", err)
	}
	return cfg, nil
}

// load replaces the config through the admin API (POST /load).
func (s *testServer) load(cfg map[string]any) error {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	code, msg, err := s.api(http.MethodPost, "/load", raw)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("POST /load: %d %s", code, msg)
	}
	return nil
}

// reconfigure loads the running config changed by mutate, which gets the
// site's server and the first handler of its first route.
func (s *testServer) reconfigure(mutate func(server, handler map[string]any)) error {
	cfg, err := s.runningConfig()
	if err != nil {
		return err
	}
	mutate(siteServerOf(cfg))
	return s.load(cfg)
}

// siteServerOf returns the site's server in cfg and the first handler of
// its first route.
func siteServerOf(cfg map[string]any) (server, handler map[string]any) {
	server = cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)["test"].(map[string]any)
	handler = server["routes"].([]any)[0].(map[string]any)["handle"].([]any)[0].(map[string]any)
	return server, handler
}

// h2FileServer is an h2_file_server handler config for root, with extra
// fields merged in.
func h2FileServer(root string, extra map[string]any) map[string]any {
	h := map[string]any{"handler": "h2_file_server", "root": root}
	maps.Copy(h, extra)
	return h
}

// startTestCaddy starts a TLS site (HTTP/1.1, HTTP/2, HTTP/3) whose one
// route runs handlers, with the admin API on. A compatibility shim over
// startSite, for suites written before the harness.
func startTestCaddy(t *testing.T, handlers ...any) *testServer {
	t.Helper()
	return startSite(t, siteConfig{handlers: handlers})
}

// startPlainCaddy is startTestCaddy without TLS: HTTP/1.1 over plain TCP
// (H1), with Caddy's default protocols. A compatibility shim over
// startSite.
func startPlainCaddy(t *testing.T, handlers ...any) *testServer {
	t.Helper()
	return startSite(t, siteConfig{handlers: handlers, plain: true})
}

// stopTestCaddy is stopCaddy, for suites written before the harness.
func stopTestCaddy(t *testing.T) { stopCaddy(t) }

// selfSignedCert returns the PEM certificate and key of a new testCert.
// A compatibility shim over newTestCert.
func selfSignedCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	c := harness.NewCert(t)
	return c.CertPEM, c.KeyPEM
}
