package integration

// Caddy for the differential test (diff_test.go): four servers per
// configuration (file_server and h2_file_server, each with and without
// TLS) and an echo server, started through the harness.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/fileserver"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	h2file "github.com/h2file/caddy-h2file"
	"github.com/h2file/caddy-h2file/internal/harness"
	"github.com/h2file/caddy-h2file/internal/harness/caddysite"
)

// diffHandlerJSON returns the JSON of a file handler for a site.
func diffHandlerJSON(handler, root string, opts map[string]any) map[string]any {
	m := make(map[string]any, len(opts)+2)
	for k, v := range opts {
		m[k] = v
	}
	m["handler"] = handler
	m["root"] = root
	return m
}

// diffServerJSON returns one server, with TLS (HTTP/1.1 and HTTP/2) or
// without (HTTP/1.1 only).
func diffServerJSON(site diffSite, routes, errorRoutes []any) map[string]any {
	srv := map[string]any{
		"listen":          []string{fmt.Sprintf("127.0.0.1:%d", site.port)},
		"protocols":       []string{"h1", "h2"},
		"routes":          routes,
		"automatic_https": map[string]any{"disable_redirects": true},
	}
	if site.tls {
		srv["tls_connection_policies"] = []any{map[string]any{}}
	} else {
		// h1 and h2, as by default: with h1 alone, Caddy wraps every
		// connection to refuse HTTP/2 prefaces, which hides the TCP
		// connection from net/http and with it net/http's ReadFrom (the
		// 512-byte sniff copy, then sendfile), and so the framing a body
		// without a Content-Length gets by default
		srv["protocols"] = []string{"h1", "h2"}
	}
	if errorRoutes != nil {
		srv["errors"] = map[string]any{"routes": errorRoutes}
	}
	return srv
}

// diffCaddyJSON builds the whole Caddy config: five servers per diffConfig
// (file_server and h2_file_server, each with and without TLS, the
// h2_file_server ones with Go's HTTP/2 server behind coalesce; and
// h2_file_server behind the engine, the recommended wrappers) plus an
// "echo" server that answers with the request-target it received.
func diffCaddyJSON(d diffFixtureDirs, storage string, httpPort int, echo diffSite, logOutput string, cfgs []*diffConfig) ([]byte, error) {
	servers := map[string]any{}
	for _, c := range cfgs {
		for _, s := range c.allSites() {
			handler, root := "file_server", d.root
			if s.h2 {
				handler = "h2_file_server"
				if c.h2Root != "" {
					root = c.h2Root
				}
			}
			opts := c.opts
			if s.h2 && c.h2Opts != nil {
				opts = maps.Clone(opts)
				maps.Copy(opts, c.h2Opts)
			}
			file := diffHandlerJSON(handler, root, opts)
			routes := []any{map[string]any{"handle": []any{file}}}
			if c.routes != nil {
				routes = c.routes(file)
			}
			var errorRoutes []any
			if c.errors != nil {
				errorRoutes = c.errors(diffHandlerJSON(handler, root, opts))
			}
			srv := diffServerJSON(s.site, routes, errorRoutes)
			switch {
			case s.engine:
				srv["listener_wrappers"] = engineWrappers()
			case s.h2:
				// with Go's HTTP/2 server as users run it (README's
				// fallback), against file_server without wrappers
				srv["listener_wrappers"] = goServerWrappers()
			}
			servers[s.site.name] = srv
		}
	}
	servers[echo.name] = diffServerJSON(echo, []any{map[string]any{"handle": []any{map[string]any{
		"handler":     "static_response",
		"status_code": 200,
		"body":        "{http.request.orig_uri}",
	}}}}, nil)

	cfg := caddysite.InternalCAConfig(storage, logOutput, map[string]any{
		"http_port":    httpPort,
		"grace_period": "1ns",
		"servers":      servers,
	})
	return json.MarshalIndent(cfg, "", "  ")
}

// diffStartCaddy assigns ports, loads the Caddy config and waits until
// every server answers (TLS needs the certificate, which the internal
// issuer obtains asynchronously). It stops Caddy when the test ends.
func diffStartCaddy(t *testing.T, d diffFixtureDirs, cfgs []*diffConfig) (echo diffSite) {
	t.Helper()
	ports := harness.FreePorts(t, 5*len(cfgs)+2)
	var all []diffSite
	for i, c := range cfgs {
		c.fs = diffSite{name: "fs_" + c.name, port: ports[5*i], tls: true}
		c.h2 = diffSite{name: "h2_" + c.name, port: ports[5*i+1], tls: true}
		c.fsPlain = diffSite{name: "fsplain_" + c.name, port: ports[5*i+2]}
		c.h2Plain = diffSite{name: "h2plain_" + c.name, port: ports[5*i+3]}
		c.h2Engine = diffSite{name: "h2engine_" + c.name, port: ports[5*i+4], tls: true}
		all = append(all, c.fs, c.h2, c.fsPlain, c.h2Plain, c.h2Engine)
	}
	httpPort := ports[len(ports)-2]
	echo = diffSite{name: "echo", port: ports[len(ports)-1], tls: true}
	all = append(all, echo)

	logOutput, level := "discard", "ERROR"
	if os.Getenv("DIFF_CADDY_LOG") != "" {
		logOutput, level = "stderr", "DEBUG"
	}
	cfgJSON, err := diffCaddyJSON(d, filepath.Join(d.base, "caddy-storage"), httpPort, echo, logOutput, cfgs)
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON = bytes.Replace(cfgJSON, []byte(`"level": "ERROR"`), []byte(`"level": "`+level+`"`), 1)
	caddysite.LoadCaddy(t, cfgJSON)
	for _, site := range all {
		if site.tls {
			caddysite.WaitListening(t, harness.InsecureTLS(), harness.Loopback(site.port))
		} else {
			caddysite.WaitListening(t, nil, harness.Loopback(site.port))
		}
	}
	return echo
}

// diffCheckHandlers makes sure the running config really serves the
// h2_file_server sites with h2_file_server and the others with file_server.
func diffCheckHandlers(t *testing.T, cfgs []*diffConfig) {
	t.Helper()
	app, err := caddy.ActiveContext().AppIfConfigured("http")
	if err != nil {
		t.Fatal(err)
	}
	httpApp := app.(*caddyhttp.App)
	count := func(routes caddyhttp.RouteList) (fsN, h2N int) {
		for _, r := range routes {
			for _, h := range r.Handlers {
				switch h.(type) {
				case *fileserver.FileServer:
					fsN++
				case *h2file.Handler:
					h2N++
				}
			}
		}
		return fsN, h2N
	}
	for _, c := range cfgs {
		for _, s := range c.allSites() {
			srv := httpApp.Servers[s.site.name]
			if srv == nil {
				t.Fatalf("server %s not running", s.site.name)
			}
			fsN, h2N := count(srv.Routes)
			if srv.Errors != nil {
				f, h := count(srv.Errors.Routes)
				fsN, h2N = fsN+f, h2N+h
			}
			if s.h2 && (h2N == 0 || fsN != 0) || !s.h2 && (fsN == 0 || h2N != 0) {
				t.Fatalf("server %s: %d file_server and %d h2_file_server handlers", s.site.name, fsN, h2N)
			}
		}
	}
}
