package harness

// Ready HTTP clients for the harness (see package caddysite).

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// InsecureTLS is a client TLS config for servers whose certificate the
// test does not know (Caddy's internal issuer): server name localhost,
// no verification.
func InsecureTLS() *tls.Config {
	return &tls.Config{ServerName: "localhost", InsecureSkipVerify: true} //nolint:gosec // test servers only
}

// NoRedirect makes a client return redirects instead of following them.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// NewClient returns an HTTP client speaking only proto: "h1" or "h2" over
// TLS, "h1c" or "h2c" in cleartext, "h3" over QUIC. tlsCfg nil means
// InsecureTLS. It asks for no compression, follows no redirect, dials
// 127.0.0.1 for localhost (Caddy answers 421 when the Host differs from
// the TLS server name with client authentication on) and closes its
// connections when the test ends.
func NewClient(t testing.TB, proto string, tlsCfg *tls.Config) *http.Client {
	if tlsCfg == nil {
		tlsCfg = InsecureTLS()
	}
	tlsCfg = tlsCfg.Clone()
	if proto == "h3" {
		tr := &http3.Transport{TLSClientConfig: tlsCfg}
		t.Cleanup(func() { tr.Close() })
		return &http.Client{Transport: tr, CheckRedirect: NoRedirect, Timeout: time.Minute}
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
		t.Fatalf("NewClient: unknown protocol %q", proto)
	}
	t.Cleanup(tr.CloseIdleConnections)
	transports.Store(tr, struct{}{})
	t.Cleanup(func() { transports.Delete(tr) })
	return &http.Client{Transport: tr, CheckRedirect: NoRedirect, Timeout: time.Minute}
}

// transports are the transports of the clients NewClient made
// whose test is still running.
var transports sync.Map // *http.Transport -> struct{}

// CloseIdleClientConns closes the idle connections of every client
// NewClient made. One sweep is not always enough: a dial that outlived
// its request (net/http lets it finish, for the pool) can complete its
// HTTP/2 set-up just after CloseIdleConnections and add an idle
// connection that no sweep saw; net/http closes a late HTTP/1.1
// connection itself then, not an HTTP/2 one.
func CloseIdleClientConns() {
	transports.Range(func(tr, _ any) bool {
		tr.(*http.Transport).CloseIdleConnections()
		return true
	})
}
