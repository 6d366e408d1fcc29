package coalesce

// The coalesce wrapper's TLS view (tls.go): the TLS state above
// TLS, and HTTP/2's TLS requirements (RFC 9113 section 9.2) enforced as
// x/net's server enforces them.

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
	"github.com/h2file/caddy-h2file/internal/harness"
)

// Above TLS, the wrapper has the TLS state and the wrapped connection;
// elsewhere it has no TLS state, so it cannot pass for TLS.
func TestCoalesceConnectionState(t *testing.T) {
	lwNoLeaks(t)
	limits := NewLimits(64<<10, 64<<20, time.Second)
	server, client := harness.TCPPair(t)
	plain := NewConn(server, limits)
	if _, ok := plain.(tlsConnectionStater); ok {
		t.Fatal("wrapper of a TCP connection has ConnectionState")
	}
	if nc := plain.(interface{ NetConn() net.Conn }).NetConn(); nc != server {
		t.Fatal("NetConn is not the wrapped connection")
	}

	tc := harness.NewCert(t)
	cert, pool := tc.TLS, tc.Pool
	srv := tls.Server(server, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	wrapped := NewConn(srv, limits)
	st, ok := wrapped.(tlsConnectionStater)
	if !ok {
		t.Fatal("wrapper of a TLS connection has no ConnectionState")
	}
	cli := tls.Client(client, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"h2"}})
	go func() { cli.Write([]byte("hello")) }()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(wrapped, buf); err != nil {
		t.Fatal(err)
	}
	got, want := st.ConnectionState(), srv.ConnectionState()
	if !got.HandshakeComplete || got.NegotiatedProtocol != "h2" || got.Version != want.Version || got.CipherSuite != want.CipherSuite {
		t.Fatalf("ConnectionState = %+v, want %+v", got, want)
	}
	if nc := wrapped.(interface{ NetConn() net.Conn }).NetConn(); nc != srv {
		t.Fatal("NetConn is not the wrapped connection")
	}
	wrapped.Close()
}

// For every TLS 1.2 cipher suite crypto/tls has, the wrapper rejects
// HTTP/2 exactly when golang.org/x/net/http2's server does (it sends a
// GOAWAY frame with INADEQUATE_SECURITY instead of its SETTINGS).
func TestCoalesceH2TLSRequirementsMatchHTTP2Server(t *testing.T) {
	lwNoLeaks(t)
	certs := map[string]tls.Certificate{}
	pools := map[string]*x509.CertPool{}
	for kind, tc := range map[string]*harness.Cert{"ecdsa": harness.NewCert(t), "rsa": harness.NewRSACert(t)} {
		certs[kind], pools[kind] = tc.TLS, tc.Pool
	}
	suites := append(tls.CipherSuites(), tls.InsecureCipherSuites()...)
	tested := 0
	for _, cs := range suites {
		if !lwSupportsTLS12(cs) {
			continue
		}
		kind := "rsa"
		if bytes.Contains([]byte(cs.Name), []byte("ECDSA")) {
			kind = "ecdsa"
		}
		for _, viaWrapper := range []bool{false, true} {
			goaway, st, err := lwFirstH2Frame(t, certs[kind], pools[kind], cs.ID, viaWrapper)
			if err != nil {
				t.Logf("%s: skipped: %v", cs.Name, err)
				continue
			}
			tested++
			if want := wire.TLSProblem(st) != ""; goaway != want {
				t.Errorf("%s (wrapper %v): GOAWAY sent = %v, want %v", cs.Name, viaWrapper, goaway, want)
			}
		}
	}
	if tested < 10 {
		t.Fatalf("only %d cipher suites could be tested", tested)
	}
}

func lwSupportsTLS12(cs *tls.CipherSuite) bool {
	for _, v := range cs.SupportedVersions {
		if v == tls.VersionTLS12 {
			return true
		}
	}
	return false
}

// lwFirstH2Frame makes a TLS 1.2 connection with cipher suite id and ALPN
// h2 to an HTTP/2 server, directly on the *tls.Conn or through the
// wrapper (above TLS, as the h2c path sees it, without the TLS state),
// and reports whether the server's first frame is a GOAWAY.
func lwFirstH2Frame(t *testing.T, cert tls.Certificate, pool *x509.CertPool, id uint16, viaWrapper bool) (goaway bool, st tls.ConnectionState, err error) {
	server, client := harness.TCPPair(t)
	srv := tls.Server(server, &tls.Config{
		Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"},
		CipherSuites: []uint16{id}, MaxVersion: tls.VersionTLS12,
	})
	h2srv := &http2.Server{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	served := make(chan struct{})
	go func() {
		defer close(served)
		if !viaWrapper {
			// as net/http does: the handshake, then HTTP/2 on the *tls.Conn
			if err := srv.Handshake(); err != nil {
				return
			}
			h2srv.ServeConn(srv, &http2.ServeConnOpts{Handler: handler})
			return
		}
		wrapped := NewConn(srv, NewLimits(64<<10, 64<<20, time.Second))
		// as net/http's h2c path does: read the preface, then hand over
		// a connection that hides the TLS state
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(wrapped, preface); err != nil {
			wrapped.Close()
			return
		}
		h2srv.ServeConn(struct{ net.Conn }{wrapped}, &http2.ServeConnOpts{Handler: handler, SawClientPreface: true})
	}()
	defer func() { client.Close(); <-served }()

	cli := tls.Client(client, &tls.Config{
		RootCAs: pool, ServerName: "localhost", NextProtos: []string{"h2"},
		CipherSuites: []uint16{id}, MaxVersion: tls.VersionTLS12,
	})
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	if err := cli.Handshake(); err != nil {
		server.Close()
		return false, st, err
	}
	st = cli.ConnectionState()
	if _, err := io.WriteString(cli, http2.ClientPreface); err != nil {
		return false, st, err
	}
	fr := http2.NewFramer(io.Discard, cli)
	f, err := fr.ReadFrame()
	if err != nil {
		return false, st, fmt.Errorf("reading first frame: %w", err)
	}
	ga, ok := f.(*http2.GoAwayFrame)
	if ok && ga.ErrCode != http2.ErrCodeInadequateSecurity {
		return false, st, fmt.Errorf("GOAWAY with %v", ga.ErrCode)
	}
	return ok, st, nil
}
