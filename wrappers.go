package h2file

// What the listener wrappers h2_engine and coalesce share: the HTTP server
// they are provisioned for, its listener wrappers as configured, the
// listen addresses that name it in their errors, and whether Caddy
// terminates TLS on a listener of it.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// wrapperServer is the HTTP server a listener wrapper belongs to.
type wrapperServer struct {
	srv      *caddyhttp.Server // nil outside an HTTP server
	app      *caddyhttp.App    // nil if the wrapper's parent is not the HTTP app
	wrappers []string          // the server's listener wrappers, by module name, as configured
}

// serverOf finds the HTTP server a listener wrapper is being provisioned
// for. It reads the server's list of wrappers now: Caddy clears the raw
// list once it has loaded them.
func serverOf(ctx caddy.Context) *wrapperServer {
	s := new(wrapperServer)
	s.srv, _ = ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if mods := ctx.Modules(); len(mods) >= 2 {
		s.app, _ = mods[len(mods)-2].(*caddyhttp.App)
	}
	if s.srv != nil {
		s.wrappers = wrapperNames(s.srv.ListenerWrappersRaw)
	}
	return s
}

// wrapperNames returns the module name of each listener wrapper in a
// server's config ("" where one cannot be read).
func wrapperNames(raws []json.RawMessage) []string {
	names := make([]string, len(raws))
	for i, raw := range raws {
		var w struct {
			Wrapper string `json:"wrapper"`
		}
		if json.Unmarshal(raw, &w) == nil {
			names[i] = w.Wrapper
		}
	}
	return names
}

// wrap prefixes err with the wrapper's name and the server's listen
// addresses: Caddy's own prefix ("loading listener wrapper modules:
// position 1") names no server, and its key in the config (srv0 for a
// Caddyfile's first) is one a Caddyfile's user never wrote.
func (s *wrapperServer) wrap(wrapper string, err error) error {
	if s.srv == nil || len(s.srv.Listen) == 0 {
		return fmt.Errorf("%s: %w", wrapper, err)
	}
	return fmt.Errorf("%s (server listening on %s): %w", wrapper, strings.Join(s.srv.Listen, ", "), err)
}

// wrapperList is the server's listener wrappers as the user listed them,
// such as "coalesce, tls, h2_engine".
func (s *wrapperServer) wrapperList() string {
	names := make([]string, len(s.wrappers))
	for i, name := range s.wrappers {
		names[i] = cmp.Or(name, "?")
	}
	return strings.Join(names, ", ")
}

// hasTLS says whether Caddy terminates TLS on the server's listener at
// addr, as Caddy decides it when it starts the listener: the server has
// TLS connection policies (automatic HTTPS has added its own by then) and
// the port is not the HTTP port.
func (s *wrapperServer) hasTLS(addr net.Addr) bool {
	if s.srv == nil || len(s.srv.TLSConnPolicies) == 0 {
		return false
	}
	httpPort := caddyhttp.DefaultHTTPPort
	if s.app != nil && s.app.HTTPPort != 0 {
		httpPort = s.app.HTTPPort
	}
	tcp, ok := addr.(*net.TCPAddr)
	return !ok || tcp.Port != httpPort
}

// servesH2 says whether the server has HTTP/2 (over TLS) among its
// protocols; Caddy's default protocols have it.
func (s *wrapperServer) servesH2() bool {
	return s.srv != nil && (len(s.srv.Protocols) == 0 || slices.Contains(s.srv.Protocols, "h2"))
}

// tlsPosition is where the i-th listener wrapper of the server sits:
// "below TLS" if it comes before tls in the list, else "above TLS"
// (without tls in the list, Caddy puts it first).
func (s *wrapperServer) tlsPosition(i int) string {
	if tls := slices.Index(s.wrappers, "tls"); tls > i {
		return "below TLS"
	}
	return "above TLS"
}
