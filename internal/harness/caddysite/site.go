package caddysite

// One in-process Caddy site: Start (see the package comment).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/h2file/caddy-h2file/internal/harness"
)

// Config is what Start runs: one server named "test" on a free
// loopback port, with the harness certificate unless plain.
type Config struct {
	Handlers  []any          // the handlers of the server's one route
	Routes    []any          // the server's routes, instead of handlers
	Plain     bool           // no TLS: HTTP/1.1 (and h2c if protocols has it) on plain TCP
	Protocols []string       // the server's protocols; nil: Caddy's default (h1 h2 h3)
	Wrappers  []any          // listener_wrappers; nil: Caddy's default
	Server    map[string]any // more fields of the server
	NoAdmin   bool           // no admin endpoint
	Apps      map[string]any // more apps, by name
}

// Server is a running site with ready clients. Every client verifies
// the harness certificate and follows no redirect.
type Server struct {
	URL   string        // https://127.0.0.1:port (http:// if plain)
	Addr  string        // 127.0.0.1:port
	H1    *http.Client  // HTTP/1.1 (over TLS unless plain)
	H2    *http.Client  // HTTP/2 over TLS; nil if plain
	H2C   *http.Client  // HTTP/2 without TLS; nil unless plain with h2c
	H3    *http.Client  // HTTP/3; nil unless protocols has "h3"
	Admin string        // http://127.0.0.1:port of the admin API; "" if off
	Cert  *harness.Cert // nil if plain

	t          *testing.T
	site       Config
	adminAddr  string
	adminHTTP  *http.Client // keeps no connection open (it would count as a leak)
	clientList []*http.Client
}

// Start starts Caddy with sc and stops it when the test ends.
func Start(t *testing.T, sc Config) *Server {
	t.Helper()
	s := newServer(t, sc)
	LoadCaddy(t, s.ConfigJSON())
	s.startClients(t)
	return s
}

// newServer picks the ports of sc's site and makes its certificate.
func newServer(t *testing.T, sc Config) *Server {
	ports := harness.FreePorts(t, 2)
	s := &Server{t: t, site: sc, Addr: harness.Loopback(ports[0])}
	if !sc.NoAdmin {
		s.adminAddr = harness.Loopback(ports[1])
		s.Admin = "http://" + s.adminAddr
		s.adminHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	}
	if !sc.Plain {
		s.Cert = harness.NewCert(t)
	}
	return s
}

// startClients makes the site's clients, with its URL.
func (s *Server) startClients(t *testing.T) {
	sc := s.site
	if sc.Plain {
		s.URL = "http://" + s.Addr
		s.H1 = s.Client(t, "h1c")
		if slices.Contains(sc.Protocols, "h2c") {
			s.H2C = s.Client(t, "h2c")
		}
		return
	}
	s.URL = "https://" + s.Addr
	s.H1, s.H2 = s.Client(t, "h1"), s.Client(t, "h2")
	if slices.Contains(sc.Protocols, "h3") {
		s.H3 = s.Client(t, "h3")
	}
}

// Client is a client for proto (see harness.NewClient) that trusts the site's
// certificate; it is among those closeClients closes.
func (s *Server) Client(t *testing.T, proto string) *http.Client {
	var c *http.Client
	if s.Cert != nil {
		c = harness.NewClient(t, proto, s.Cert.ClientTLS())
	} else {
		c = harness.NewClient(t, proto, nil)
	}
	s.clientList = append(s.clientList, c)
	return c
}

// Config is the whole Caddy config of the site, with handlers in place of
// the route's (none given: as started).
func (s *Server) Config(handlers ...any) map[string]any {
	routes := s.site.Routes
	switch {
	case len(handlers) > 0:
		routes = []any{map[string]any{"handle": handlers}}
	case routes == nil:
		routes = []any{map[string]any{"handle": s.site.Handlers}}
	}
	server := map[string]any{
		"listen":          []string{s.Addr},
		"routes":          routes,
		"automatic_https": map[string]any{"disable": true},
	}
	if s.site.Protocols != nil {
		server["protocols"] = s.site.Protocols
	}
	if s.site.Wrappers != nil {
		server["listener_wrappers"] = s.site.Wrappers
	}
	maps.Copy(server, s.site.Server)
	apps := map[string]any{"http": map[string]any{
		"grace_period": 1,
		"servers":      map[string]any{"test": server},
	}}
	maps.Copy(apps, s.site.Apps)
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

// ConfigJSON is config, marshalled.
func (s *Server) ConfigJSON(handlers ...any) []byte {
	raw, err := json.Marshal(s.Config(handlers...))
	if err != nil {
		s.t.Fatal(err)
	}
	return raw
}

// CloseClients closes the idle connections of the site's clients.
func (s *Server) CloseClients() {
	for _, c := range s.clientList {
		c.CloseIdleConnections()
	}
}

// API sends a request to the admin API and returns its status and body.
//
// Every config change makes Caddy start a new admin server on the same
// address (its listeners have SO_REUSEPORT) and shut the old one down. A
// connection the kernel queued on the old server's listener is reset, its
// request unread, when that listener closes; one the old server accepted
// just before is closed once its request is read, unanswered (net/http's
// conn.serve returns when the server is shutting down). TestAdminReconfigure
// failed so, about once in 100 runs on a busy machine. Neither request was
// handled: it is sent again.
func (s *Server) API(method, path string, body []byte) (int, string, error) {
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequest(method, s.Admin+path, bytes.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := s.adminHTTP.Do(req)
		if err != nil && attempt < 5 && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF)) {
			continue
		}
		if err != nil {
			return 0, "", fmt.Errorf("%s %s: %w", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
}

// MustAPI is api that fails the test unless the status is 200.
func (s *Server) MustAPI(method, path string, body []byte) string {
	s.t.Helper()
	code, resp, err := s.API(method, path, body)
	if err != nil || code != http.StatusOK {
		s.t.Fatalf("%s %s %s: status %d: %s (%v)", method, path, body, code, resp, err)
	}
	return resp
}

// RunningConfig returns the running config, from the admin API.
func (s *Server) RunningConfig() (map[string]any, error) {
	code, body, err := s.API(http.MethodGet, "/config/", nil)
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

// Load replaces the config through the admin API (POST /load).
func (s *Server) Load(cfg map[string]any) error {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	code, msg, err := s.API(http.MethodPost, "/load", raw)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("POST /load: %d %s", code, msg)
	}
	return nil
}

// Reconfigure loads the running config changed by mutate, which gets the
// site's server and the first handler of its first route.
func (s *Server) Reconfigure(mutate func(server, handler map[string]any)) error {
	cfg, err := s.RunningConfig()
	if err != nil {
		return err
	}
	mutate(ServerOf(cfg))
	return s.Load(cfg)
}

// ServerOf returns the site's server in cfg and the first handler of
// its first route.
func ServerOf(cfg map[string]any) (server, handler map[string]any) {
	server = cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)["test"].(map[string]any)
	handler = server["routes"].([]any)[0].(map[string]any)["handle"].([]any)[0].(map[string]any)
	return server, handler
}

// H2FileServer is an h2_file_server handler config for root, with extra
// fields merged in.
func H2FileServer(root string, extra map[string]any) map[string]any {
	h := map[string]any{"handler": "h2_file_server", "root": root}
	maps.Copy(h, extra)
	return h
}

// StartTestCaddy starts a TLS site (HTTP/1.1, HTTP/2, HTTP/3) whose one
// route runs handlers, with the admin API on. A compatibility shim over
// Start, for suites written before the harness.
func StartTestCaddy(t *testing.T, handlers ...any) *Server {
	t.Helper()
	return Start(t, Config{Handlers: handlers})
}

// StartPlainCaddy is StartTestCaddy without TLS: HTTP/1.1 over plain TCP
// (H1), with Caddy's default protocols. A compatibility shim over
// Start.
func StartPlainCaddy(t *testing.T, handlers ...any) *Server {
	t.Helper()
	return Start(t, Config{Handlers: handlers, Plain: true})
}

// StopTestCaddy is StopCaddy, for suites written before the harness.
func StopTestCaddy(t *testing.T) { StopCaddy(t) }

// SelfSignedCert returns the PEM certificate and key of a new testCert.
// A compatibility shim over newTestCert.
func SelfSignedCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	c := harness.NewCert(t)
	return c.CertPEM, c.KeyPEM
}
